"""Never an empty differential (issue 19, item 5): where the start stopped -> prior candidates, from
hangwatch/data/phase_priors.yaml, at low confidence, each with its check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hangwatch.classify import classify, load_rules
from hangwatch.classify.verdict.context import Context
from hangwatch.classify.verdict.differential import CHECKS, with_priors
from hangwatch.classify.verdict.priors import PRIOR_MAX, Where, load_priors, prior_rows, rows_for, where_of
from hangwatch.errors import RuleError
from hangwatch.model import Candidate, Evidence, Phase, State
from helpers.classify_builders import event, logs
from helpers.paths import DEV_CORPUS, ROOT

SHIPPED = load_rules()


def where(**changes: object) -> Where:
    base = {"phase": "none", "outcome": "stalled", "engine": None, "nodes": None, "gpus": None,
            "pcie_only": None, "compute_capability": ()}  # fmt: skip
    return Where(**{**base, **changes})  # type: ignore[arg-type]


def first_row(w: Where) -> str:
    return rows_for(w, prior_rows())[0].id


# ---------------------------------------------------------------- the table


def test_shipped_table_is_valid_and_every_prior_is_low() -> None:
    rows = load_priors()
    assert rows and all(row.source for row in rows)
    for row in rows:
        for prior in row.causes:
            assert 0 < row.confidence(prior) <= PRIOR_MAX < 0.6
            assert CHECKS.get(prior.cause), prior.cause  # each prior comes with the check that tells it apart


def test_every_outcome_has_a_row() -> None:
    # whatever else is unknown, a stalled or a crashed start meets some row
    for outcome in ("stalled", "crashed"):
        assert rows_for(where(outcome=outcome), prior_rows())


@pytest.mark.parametrize(
    ("changes", "row"),
    [
        ({"nodes": "multi", "phase": "dist_init"}, "several-nodes"),
        ({"phase": "cuda_graph", "gpus": "many"}, "in-cuda-graph-capture"),
        ({"phase": "dist_init", "pcie_only": True}, "in-dist-init-pcie"),
        ({"phase": "dist_init", "pcie_only": False}, "in-dist-init"),
        ({"phase": "warmup"}, "at-http-or-warmup"),
        ({"compute_capability": ("12.0",), "outcome": "crashed"}, "new-consumer-blackwell"),
        ({"pcie_only": True, "gpus": "many"}, "pcie-several-gpus"),
        ({"outcome": "crashed", "gpus": "many"}, "crashed-several-gpus"),
        ({"outcome": "crashed"}, "crashed"),
        ({"outcome": "stalled", "gpus": "one"}, "stalled"),
    ],
)
def test_the_most_specific_row_holds_first(changes: dict, row: str) -> None:
    assert first_row(where(**changes)) == row


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "priors.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("priors: []", "non-empty"),
        ("priors:\n  - {id: a, when: {}, causes: [{cause: nccl_init, count: 1}], count: 1}", "missing ['source']"),
        ("priors:\n  - {id: a, when: {phase: somewhere}, causes: [{cause: nccl_init, count: 0}], count: 0, source: s}", "phase"),
        ("priors:\n  - {id: a, when: {}, causes: [{cause: no_such_cause, count: 0}], count: 0, source: s}", "unknown cause"),
        ("priors:\n  - {id: a, when: {}, causes: [{cause: nccl_init, count: 3}], count: 2, source: s}", "more than"),
        ("priors:\n  - {id: a, when: {}, causes: [{cause: nccl_init, count: -1}], count: 2, source: s}", "count"),
        ("priors:\n  - {id: a, when: {colour: red}, causes: [{cause: nccl_init}], count: 0, source: s}", "unknown keys"),
    ],
)
def test_a_bad_table_is_refused_with_its_reason(tmp_path: Path, body: str, reason: str) -> None:
    with pytest.raises(RuleError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        load_priors(write(tmp_path, body))


# ---------------------------------------------------------------- where the start stopped


def test_where_reads_phase_topology_and_hardware() -> None:
    ev = Evidence(
        engine="sglang", log=logs("Init torch distributed begin.", rank="TP0"),
        phases=(event(Phase.DIST_INIT, "TP0", 1),),
        meta={"gpu_model": "NVIDIA GeForce RTX 4090", "compute_capability": "8.9", "tp": 2, "nnodes": 1},
    )  # fmt: skip
    w = where_of(Context(ev), "stalled")
    assert (w.phase, w.nodes, w.gpus, w.pcie_only, w.compute_capability) == ("dist_init", "single", "many", True, ("8.9",))


def test_an_ended_phase_points_at_the_next_one() -> None:
    ev = Evidence(engine="sglang", log=logs("Load weight end."), phases=(event(Phase.WEIGHT_LOAD, None, 1, end=True),))
    assert where_of(Context(ev), "stalled").phase == "kv_cache"


def test_with_priors_fills_to_three_after_the_matches_and_skips_their_causes() -> None:
    ev = Evidence(engine="vllm", meta={"tp": 4, "nnodes": 1})
    matched = Candidate(cause="jit_compile_slow", confidence=0.3, rule="r")
    out = with_priors((matched,), Context(ev), "stalled")
    assert len(out) == 3 and out[0] is matched
    assert len({c.cause for c in out}) == 3
    assert all(c.rule is None and c.confidence < 0.6 and c.check and "prior" in c.evidence_for[0] for c in out[1:])


# ---------------------------------------------------------------- the verdicts (rule-style: a bundle in, candidates out)


@pytest.mark.parametrize(
    ("evidence", "state", "expected"),
    [
        # a pasted log that stops with no phase line, no rule matching: stalled, never an empty list
        (Evidence(engine="vllm", log=logs("INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.9.0")),
         State.STALLED, None),
        # stopped inside graph capture with no capture rule holding yet: capture leads the priors
        (Evidence(engine="sglang", log=logs("[2025-01-01 00:00:00 TP0] Capture cuda graph begin. This can take up to several minutes."),
                  phases=(event(Phase.CUDA_GRAPH, "TP0", 1),), meta={"tp": 2}),
         State.STALLED, "cuda_graph_capture"),
        # an error no rule names, on several nodes: the rendezvous leads
        (Evidence(engine="sglang", log=logs("RuntimeError: something nobody wrote a rule for"), meta={"nnodes": 2, "tp": 8}),
         State.CRASHED, "multinode_rendezvous"),
    ],
)  # fmt: skip
def test_unknown_verdicts_carry_prior_candidates(evidence: Evidence, state: State, expected: str | None) -> None:
    verdict = classify(evidence, SHIPPED)
    assert verdict.state is state
    assert len(verdict.candidates) == 3
    assert all(c.confidence < 0.6 and c.check for c in verdict.candidates)
    if expected is not None:
        assert verdict.candidates[0].cause == expected


@pytest.mark.skipif(not DEV_CORPUS.is_dir(), reason=f"no corpus at {DEV_CORPUS} (set HANGWATCH_CORPUS)")
def test_table_counts_are_the_dev_corpus_counts() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "helpers" / "count_priors.py"), str(DEV_CORPUS)],
        capture_output=True, text=True, timeout=300, check=True, env={"PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])},  # this checkout, not an install
    )  # fmt: skip
    counted = {line.split()[0]: int(line.split()[1]) for line in out.stdout.splitlines() if line.strip()}
    assert counted == {row.id: row.count for row in prior_rows()}


def test_a_winner_that_quotes_only_consequences_is_followed_by_priors_not_its_neighbours() -> None:
    # GIVEN a cut traceback no rule explains, then the launcher's report that the worker died
    ev = Evidence(engine="vllm", meta={"tp": 4}, log=logs(
        "ERROR [multiproc_executor.py:671] WorkerProc failed to start.",
        "Traceback (most recent call last):",
        '  File "/x/vllm/v1/executor/multiproc_executor.py", line 640, in __init__',
        "    self._init_message_queues(input_shm_handle, vllm_config)",
    ))  # fmt: skip
    verdict = classify(ev, SHIPPED)
    # THEN the death leads at a consequence's confidence, and where the start stopped fills the rest
    assert verdict.cause == "dead_rank" and verdict.confidence < 0.6
    assert [c.rule for c in verdict.candidates[1:]] == [None, None]
    assert all("prior" in c.evidence_for[0] for c in verdict.candidates[1:])
