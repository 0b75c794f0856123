"""classify/verdict/raise_sites: the first failure traced to the engine code that raised it, and that code to
a cause (hangwatch/data/raise_site_causes.yaml over the mined index)."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from rich.console import Console

from hangwatch.bundle import evidence_from_files
from hangwatch.bundle.read import FORMAT
from hangwatch.classify import classify, load_rules
from hangwatch.classify.causes import CAUSES
from hangwatch.classify.verdict.raise_sites import cause_of, engine_words, load_causes
from hangwatch.errors import RuleError
from hangwatch.model import State
from hangwatch.sinks.api import create_app
from hangwatch.sinks.report import print_verdict
from helpers.serve_fixtures import make_view

META = json.dumps({"format": FORMAT, "engine": "vllm"}).encode()
# vLLM 0.32's own check, as its EngineCore prints it (text from the template, numbers of one start)
KV_TOO_SMALL = b"""INFO 12-01 22:40:01 [core.py:98] Initializing a V1 LLM engine (v0.32.0) with config: model='m'
(EngineCore pid=4242) ERROR 12-01 22:40:09 [core.py:1011] EngineCore failed to start.
(EngineCore pid=4242) ERROR 12-01 22:40:09 [core.py:1011] Traceback (most recent call last):
(EngineCore pid=4242) ERROR 12-01 22:40:09 [core.py:1011]   File "/venv/lib/python3.11/site-packages/vllm/v1/core/kv_cache_utils.py", line 712, in check_enough_kv_cache_memory
(EngineCore pid=4242) ERROR 12-01 22:40:09 [core.py:1011]     raise ValueError(
(EngineCore pid=4242) ERROR 12-01 22:40:09 [core.py:1011] ValueError: To serve at least one request with the models's max seq len (32768), (3.0 GiB KV cache is needed, which is larger than the available KV cache memory (0.5 GiB). Based on the available memory, the estimated maximum model length is 5456. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""


def test_the_shipped_table_loads_and_names_known_causes() -> None:
    table = load_causes()
    assert len(table) >= 30
    assert all(entry.cause in CAUSES and entry.source for entry in table)


def test_every_table_entry_maps_a_mined_site() -> None:
    """A glob that matches no site of the index is a typo, or code that moved: either way, dead."""
    words = engine_words()
    sites = [(s.module, s.function) for s in words.sites]
    dead = [entry.pattern for entry in load_causes() if not entry.frame and not any(entry.fits(m, f) for m, f in sites)]
    assert not dead
    # a frame entry names a function that raises no message of its own (it is not in the index):
    # tests/integration/test_engine_words_lab.py starts the real code into it
    frames = [entry for entry in load_causes() if entry.frame]
    assert frames and all(entry.errno and ":" in entry.pattern for entry in frames)


def test_a_frame_entry_needs_frame_true_for_its_errno(tmp_path: Path) -> None:
    table = tmp_path / "t.yaml"
    table.write_text('- site: "a/b.py:f"\n  cause: port_in_use\n  source: x\n  errno: EADDRINUSE\n')
    with pytest.raises(RuleError, match="frame: true"):
        load_causes(table)


def test_an_unknown_cause_is_refused_with_its_line(tmp_path: Path) -> None:
    table = tmp_path / "t.yaml"
    table.write_text('- site: "a/b.py:f"\n  cause: port_in_use\n  source: x\n- site: "c.py"\n  cause: not_a_cause\n  source: y\n')
    with pytest.raises(RuleError, match="not_a_cause") as raised:
        load_causes(table)
    assert raised.value.location.line == 4


def test_an_entry_without_a_source_is_refused(tmp_path: Path) -> None:
    table = tmp_path / "t.yaml"
    table.write_text('- site: "a/b.py:f"\n  cause: port_in_use\n')
    with pytest.raises(RuleError, match="source"):
        load_causes(table)


def test_the_first_matching_entry_wins() -> None:
    assert cause_of("vllm/v1/worker/utils.py", "request_memory").cause == "gpu_memory_held"  # type: ignore[union-attr]
    assert cause_of("vllm/v1/core/kv_cache_utils.py", "check_enough_kv_cache_memory").cause == "kv_cache_alloc"  # type: ignore[union-attr]
    assert cause_of("vllm/entrypoints/cli/main.py", "main") is None


def test_a_raise_site_names_the_cause_and_shows_as_evidence() -> None:
    evidence = evidence_from_files({"server.log": KV_TOO_SMALL, "meta.json": META})
    verdict = classify(evidence, load_rules())
    assert verdict.state is State.CRASHED
    assert verdict.cause == "kv_cache_alloc"
    texts = [fact.text for fact in verdict.evidence]
    site = next(t for t in texts if t.startswith("raised by vllm/v1/core/kv_cache_utils.py:check_enough_kv_cache_memory"))
    # the wording of these releases ("models's"), and the values its holes read
    assert "vLLM 0.9.2–0.11.0" in site and "→ kv_cache_alloc" in site
    assert "max_model_len=32768" in site and "available_memory=0.5" in site
    assert verdict.candidates and verdict.candidates[0].cause == "kv_cache_alloc"
    # a hand-written signature of the same failure decides (it reads more); the site is its evidence
    assert verdict.rule == "first-failure-oom-in-kv-pool"


def test_a_message_without_its_traceback_still_finds_its_site() -> None:
    # the line as a report quotes it: no traceback, another prefix
    log = (b"[rank0]: ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
           b"when initializing the engine (this flag also controls CPU memory reservation on the CPU backend, despite "
           b"its name). See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.\n")  # fmt: skip
    verdict = classify(evidence_from_files({"server.log": log, "meta.json": META}), load_rules())
    site = next(f.text for f in verdict.evidence if f.text.startswith("raised by "))
    assert site.startswith("raised by vllm/v1/core/kv_cache_utils.py:_check_enough_kv_cache_memory")
    assert "0.32.0" in site


def test_an_unmapped_site_is_still_evidence() -> None:
    words = engine_words()
    unmapped = next(
        s for s in words.sites
        if s.package == "vllm" and s.kind == "raise" and "0.32.0" in s.versions and cause_of(s.module, s.function) is None
        and "{" not in s.template and len(s.template) > 60
    )  # fmt: skip
    log = f"Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n{unmapped.label}: {unmapped.template}\n"
    verdict = classify(evidence_from_files({"server.log": log.encode(), "meta.json": META}), load_rules())
    assert any(f.text.startswith(f"raised by {unmapped.module}:{unmapped.function}") for f in verdict.evidence)


def test_the_raise_site_reaches_verdict_endpoint_and_the_report(tmp_path: Path) -> None:
    """/verdict serves the verdict's evidence, and the report (diagnose --html) renders it: the site is in both."""
    verdict = classify(evidence_from_files({"server.log": KV_TOO_SMALL, "meta.json": META}), load_rules())
    body = TestClient(create_app(make_view(verdict), rate=None), base_url="http://127.0.0.1:9464").get("/verdict").json()
    assert any(e["text"].startswith("raised by vllm/v1/core/kv_cache_utils.py") for e in body["evidence"])
    out = StringIO()
    print_verdict(verdict, Console(file=out, width=200, color_system=None))
    assert "raised by vllm/v1/core/kv_cache_utils.py:check_enough_kv_cache_memory" in out.getvalue()


# vLLM's config check inside pydantic: the summary line, then its message on an indented line
MAX_LEN_ERROR = (b"pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
                 b"  Value error, User-specified max_model_len (4096) is greater than the derived max_model_len "
                 b"(max_position_embeddings=512.0 or model_max_length=None in model's config.json). To allow overriding "
                 b"this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used "
                 b"with extreme caution. If the model uses relative position encoding (RoPE), positions exceeding "
                 b"derived_max_model_len lead to nan. If the model uses absolute position encoding, positions exceeding "
                 b"derived_max_model_len will cause a CUDA array out-of-bounds error.")  # fmt: skip


def test_a_message_carried_on_an_indented_line_is_read_with_its_summary() -> None:
    log = (MAX_LEN_ERROR + b" [type=value_error, input_value=ArgsKwargs(()), input_type=ArgsKwargs]\n"
           b"    For further information visit https://errors.pydantic.dev/2.14/v/value_error\n")
    verdict = classify(evidence_from_files({"server.log": log, "meta.json": META}), load_rules())
    site = next(f.text for f in verdict.evidence if f.text.startswith("raised by "))
    assert site.startswith("raised by vllm/config/model.py:_get_and_verify_max_len")
    assert "vLLM 0.13.0–0.32.0)" in site and "max_model_len=4096" in site


def test_a_crash_no_rule_explains_still_shows_its_raise_site() -> None:
    """The launcher exited after an error no rule and no table entry names: "the server exited",
    and the evidence says where in the engine it failed."""
    log = MAX_LEN_ERROR + b"\n"
    procs = json.dumps([{"pid": 7, "ppid": 1, "cmdline": "vllm serve m", "role": "launcher", "rank": None, "state": "Z",
                         "alive": False, "exit_code": 1}]).encode()  # fmt: skip
    verdict = classify(evidence_from_files({"server.log": log, "meta.json": META, "procs.json": procs}), load_rules())
    assert verdict.state is State.CRASHED and verdict.cause is None
    texts = [f.text for f in verdict.evidence]
    assert any(t.startswith("raised by vllm/config/model.py:_get_and_verify_max_len") and "→" not in t for t in texts)
    assert any("exited, code 1" in t for t in texts)
