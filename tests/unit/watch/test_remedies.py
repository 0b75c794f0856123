"""The safe launch changes as data (hangwatch/data/remedies.yaml): shipped entries and load-time refusals."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from hangwatch.classify.causes import CAUSES
from hangwatch.engines import engine_names
from hangwatch.watch.remedies import (
    ANY,
    CAUSE_IDS_WITHOUT_CHANGE,
    NEVER_FLAGS,
    RemedyError,
    canonical_flag,
    load_remedies,
    shipped_remedies,
)

DOC = Path(__file__).resolve().parents[3] / "docs" / "remedy.md"


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "remedies.yaml"
    path.write_text(body)
    return path


ENTRY = """
changes:
  - id: x
    engine: sglang
    cause: cuda_graph_capture
    {change}
    source: sglang/srt/server_args.py
    cost: slower decode
"""


def test_every_shipped_change_names_a_known_engine_cause_source_and_cost() -> None:
    remedies = shipped_remedies()
    assert len(remedies.changes) >= 10
    for change in remedies.changes:
        assert change.engine in (*engine_names(), ANY)
        assert change.cause in CAUSES and change.cause not in CAUSE_IDS_WITHOUT_CHANGE
        assert change.source and change.cost
        assert change.flag is None or canonical_flag(change.flag) not in NEVER_FLAGS


def test_each_engine_has_its_own_graph_and_allreduce_flags() -> None:
    remedies = shipped_remedies()
    assert [c.describe() for c in remedies.for_cause("cuda_graph_capture", "sglang")] == ["--disable-cuda-graph"]
    assert [c.describe() for c in remedies.for_cause("cuda_graph_capture", "vllm")] == ["--enforce-eager"]
    assert [c.describe() for c in remedies.for_cause("custom_allreduce", "vllm")] == ["--disable-custom-all-reduce"]
    assert [c.id for c in remedies.for_cause("port_in_use", "sglang")] == ["sglang-nccl-port", "sglang-dist-init-port"]
    # the generic ones apply to every engine
    assert [c.describe() for c in remedies.for_cause("nccl_p2p_topology", "vllm")] == ["NCCL_P2P_DISABLE=1"]


@pytest.mark.parametrize("cause", CAUSE_IDS_WITHOUT_CHANGE)
def test_causes_without_a_safe_change_have_none(cause: str) -> None:
    for engine in engine_names():
        assert shipped_remedies().for_cause(cause, engine) == ()


def test_shutdown_signals_per_engine() -> None:
    remedies = shipped_remedies()
    assert remedies.shutdown("vllm").signal == signal.SIGTERM and remedies.shutdown("vllm").repeat_after_s > 0
    assert remedies.shutdown("nope").grace_s > 0


def test_docs_list_every_shipped_change() -> None:
    text = DOC.read_text()
    for change in shipped_remedies().changes:
        assert f"`{change.id}`" in text, change.id


@pytest.mark.parametrize("flag", ["model-path", "tp-size", "tensor-parallel-size", "tp", "pp", "dp", "ep-size",
                                  "host", "port", "nnodes", "node-rank", "--model", "tensor_parallel_size"])
def test_a_change_of_the_model_parallel_sizes_host_or_port_is_refused_on_load(tmp_path: Path, flag: str) -> None:
    for change in (f"add_flag: {flag}", f"set_flag: {{{flag}: '8'}}", f"free_port: {flag}"):
        with pytest.raises(RemedyError, match="never changed"):
            load_remedies(_write(tmp_path, ENTRY.format(change=change)))


@pytest.mark.parametrize(("change", "message"), [
    ("add_flag: a\n    set_env: {A: '1'}", "exactly one change"),
    ("", "exactly one change"),
    ("set_env: {CUDA_VISIBLE_DEVICES: '0'}", "may not set"),
    ("remove_stale_locks: yes-please", "takes `true`"),
    ("add_flag: a\n    when: [sometimes]", "`when` must be"),
    ("add_flag: a\n    bogus: 1", "unknown key"),
])  # fmt: skip
def test_bad_entries_are_one_clear_error(tmp_path: Path, change: str, message: str) -> None:
    with pytest.raises(RemedyError, match=message) as info:
        load_remedies(_write(tmp_path, ENTRY.format(change=change)))
    assert "change 'x'" in str(info.value)


def test_unknown_engine_cause_and_missing_cost_are_refused(tmp_path: Path) -> None:
    body = ENTRY.format(change="add_flag: a")
    with pytest.raises(RemedyError, match="engine 'tgi'"):
        load_remedies(_write(tmp_path, body.replace("engine: sglang", "engine: tgi")))
    with pytest.raises(RemedyError, match="not in docs/causes.md"):
        load_remedies(_write(tmp_path, body.replace("cuda_graph_capture", "bad_luck")))
    with pytest.raises(RemedyError, match="has no safe launch change"):
        load_remedies(_write(tmp_path, body.replace("cuda_graph_capture", "patch_or_user_code")))
    with pytest.raises(RemedyError, match="`cost` is required"):
        load_remedies(_write(tmp_path, body.replace("    cost: slower decode\n", "")))
    with pytest.raises(RemedyError, match="duplicate"):
        load_remedies(_write(tmp_path, body + body.split("changes:\n", 1)[1]))
