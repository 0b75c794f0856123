"""Planning a relaunch: one safe change, its conditions, and the argv rewriting that never touches
the model, the parallel sizes, the node layout or the serving host/port (property-style: thousands
of generated commands, every shipped change)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from hangwatch.model import Fact, State, Verdict
from hangwatch.watch.relaunch import Plan, Refusal, apply_change, command_diff, plan_relaunch, protected_flags
from hangwatch.watch.remedies import shipped_remedies
from helpers.recorded_host import RecordedHost

SGLANG = ["python", "-m", "sglang.launch_server", "--model-path", "/m/llama", "--tp", "2", "--host", "0.0.0.0",
          "--port", "30000"]
VLLM = ["vllm", "serve", "org/llama", "--tensor-parallel-size", "2", "--port", "8000"]


def verdict(cause: str | None, state: State = State.STALLED, *evidence: str) -> Verdict:
    return Verdict(state, cause, 0.9, evidence=tuple(Fact(text, "server.log") for text in evidence))


def plan(cause: str, argv: list[str], host: RecordedHost | None = None, env: Mapping[str, str] | None = None,
         *evidence: str, state: State = State.STALLED) -> Plan | Refusal:
    engine = "vllm" if argv[0] == "vllm" else "sglang"
    return plan_relaunch(verdict(cause, state, *evidence), engine, argv, env or {}, shipped_remedies(), host or RecordedHost())


def test_cuda_graph_hang_adds_the_engines_own_flag() -> None:
    sglang = plan("cuda_graph_capture", SGLANG)
    assert isinstance(sglang, Plan) and sglang.argv == (*SGLANG, "--disable-cuda-graph")
    vllm = plan("cuda_graph_capture", VLLM)
    assert isinstance(vllm, Plan) and vllm.argv == (*VLLM, "--enforce-eager")
    assert "slower decode" in vllm.change.cost


def test_a_flag_already_given_is_no_change() -> None:
    found = plan("cuda_graph_capture", [*SGLANG, "--disable_cuda_graph"])
    assert isinstance(found, Refusal) and "already has" in found.reason


def test_taken_nccl_port_moves_to_a_free_one_only_when_it_is_the_named_and_held_one() -> None:
    argv = [*SGLANG, "--nccl-port", "29650"]
    error = "DistNetworkError: ... port: 29650, useIpv6: false, code: -98, name: EADDRINUSE"
    found = plan("port_in_use", argv, RecordedHost(taken={29650}), None, error, state=State.CRASHED)
    assert isinstance(found, Plan)
    assert found.argv == (*SGLANG, "--nccl-port", "24311") and found.detail == "--nccl-port 29650 -> 24311"
    # free again (the holder went away): nothing to move away from
    assert isinstance(plan("port_in_use", argv, RecordedHost(), None, error), Refusal)


def test_taken_serving_port_is_never_changed() -> None:
    argv = [*SGLANG, "--nccl-port", "29650"]
    found = plan("port_in_use", argv, RecordedHost(taken={30000, 29650}), None,
                 "[Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use")
    assert isinstance(found, Refusal) and "serving port 30000" in found.reason


def test_dist_init_port_only_on_one_node() -> None:
    one = [*SGLANG, "--dist-init-addr", "127.0.0.1:29600"]
    found = plan("port_in_use", one, RecordedHost(taken={29600}), None, "port: 29600 EADDRINUSE")
    assert isinstance(found, Plan) and found.argv[-1] == "127.0.0.1:24311"
    two = [*one, "--nnodes", "2", "--node-rank", "0"]
    refused = plan("port_in_use", two, RecordedHost(taken={29600}), None, "port: 29600 EADDRINUSE")
    assert isinstance(refused, Refusal) and "2-node launch" in refused.reason


@pytest.mark.parametrize("cause", ["patch_or_user_code", "shm_too_small", "driver_or_xid", "dead_rank", "unknown", None])
def test_causes_without_a_safe_change_are_refused(cause: str | None) -> None:
    assert isinstance(plan(cause, SGLANG), Refusal)  # type: ignore[arg-type]


def test_only_stalled_or_crashed_verdicts_relaunch() -> None:
    for state in (State.STARTING, State.PROGRESSING, State.READY):
        assert isinstance(plan("cuda_graph_capture", SGLANG, state=state), Refusal)


def test_a_wrapper_script_is_never_rewritten() -> None:
    found = plan_relaunch(verdict("cuda_graph_capture"), None, ["bash", "start.sh"], {}, shipped_remedies(), RecordedHost())
    assert isinstance(found, Refusal) and "wrapper" in found.reason


def test_env_changes_respect_what_the_user_set() -> None:
    found = plan("nccl_p2p_topology", SGLANG)
    assert isinstance(found, Plan) and found.env == {"NCCL_P2P_DISABLE": "1"} and found.argv == tuple(SGLANG)
    assert isinstance(plan("nccl_p2p_topology", SGLANG, None, {"NCCL_P2P_DISABLE": "0"}), Refusal)
    omp = plan("cpu_thread_oversubscription", SGLANG, RecordedHost(ncores=16))
    assert isinstance(omp, Plan) and omp.env == {"OMP_NUM_THREADS": "8"}  # 16 cores, TP 2


def test_hub_offline_only_when_the_model_is_cached() -> None:
    assert isinstance(plan("tokenizer_or_detokenizer", VLLM, RecordedHost(cached=True)), Plan)
    refused = plan("tokenizer_or_detokenizer", VLLM, RecordedHost(cached=False))
    assert isinstance(refused, Refusal) and "not in the local cache" in refused.reason


def test_stale_locks_are_removed_only_when_found() -> None:
    found = plan("jit_lock_deadlock", SGLANG, RecordedHost(locks=("/c/flashinfer/x.lock",)))
    assert isinstance(found, Plan) and found.remove == ("/c/flashinfer/x.lock",) and found.argv == tuple(SGLANG)
    assert isinstance(plan("jit_lock_deadlock", SGLANG, RecordedHost()), Refusal)


def test_tried_changes_are_skipped() -> None:
    found = plan_relaunch(verdict("cuda_graph_capture"), "sglang", SGLANG, {}, shipped_remedies(), RecordedHost(),
                          skip=frozenset({"sglang-disable-cuda-graph"}))
    assert isinstance(found, Refusal) and "tried already" in found.reason


def test_set_flag_replaces_in_place_whatever_the_spelling() -> None:
    change = shipped_remedies().by_id("sglang-attention-triton")
    assert change is not None
    for argv, want in (([*SGLANG, "--attention-backend", "flashinfer"], [*SGLANG, "--attention-backend", "triton"]),
                       ([*SGLANG, "--attention_backend=flashinfer"], [*SGLANG, "--attention_backend=triton"]),
                       (SGLANG, [*SGLANG, "--attention-backend", "triton"])):
        found = apply_change(change, list(argv), {}, RecordedHost())
        assert isinstance(found, Plan) and list(found.argv) == want


def test_command_diff_shows_the_change() -> None:
    argv = [*SGLANG, "--nccl-port", "29650", "--log-level", "info"]
    found = plan("port_in_use", argv, RecordedHost(taken={29650}), None, "port: 29650")
    assert isinstance(found, Plan)
    assert command_diff(argv, found) == ["- --nccl-port 29650", "+ --nccl-port 24311"]


# ---------------------------------------------------------------- property: never the protected flags

_PROTECTED = [["--model-path", "/m/a"], ["--model", "org/b"], ["--tp", "4"], ["--tp-size", "2"],
              ["--tensor-parallel-size", "8"], ["--pp", "2"], ["--pipeline-parallel-size", "2"], ["--dp-size", "2"],
              ["--data-parallel-size", "2"], ["--ep-size", "4"], ["--host", "0.0.0.0"], ["--port", "8000"],
              ["--port=9000"], ["--nnodes", "1"], ["--node-rank", "0"], ["--served-model-name", "m"]]  # fmt: skip
_OTHER = [["--nccl-port", "29650"], ["--dist-init-addr", "127.0.0.1:29650"], ["--attention-backend", "flashinfer"],
          ["--attention_backend=fa3"], ["--log-level", "info"], ["--trust-remote-code"], ["--mem-fraction-static", "0.8"],
          ["--disable-radix-cache"], ["--max-model-len", "512"]]  # fmt: skip
_HEADS = [["python3", "-m", "sglang.launch_server"], ["vllm", "serve", "org/llama"], ["sglang", "serve"]]


def _random_command(rng: random.Random) -> list[str]:
    parts = rng.sample(_PROTECTED, rng.randint(1, 6)) + rng.sample(_OTHER, rng.randint(0, 5))
    rng.shuffle(parts)
    return [*rng.choice(_HEADS), *(token for part in parts for token in part)]


def test_no_change_ever_touches_model_parallel_sizes_host_or_port() -> None:
    rng = random.Random(20)
    host = RecordedHost(taken={29650}, locks=("/c/x.lock",))
    checked = 0
    for _ in range(600):
        argv = _random_command(rng)
        for change in shipped_remedies().changes:
            found = apply_change(change, list(argv), {}, host, "port: 29650 EADDRINUSE")
            if isinstance(found, Refusal):
                continue
            checked += 1
            assert protected_flags(found.argv) == protected_flags(argv), (change.id, argv, found.argv)
            # exactly one change: at most one token added or replaced, plus its value
            assert len(found.argv) - len(argv) in (0, 1, 2), (change.id, argv, found.argv)
    assert checked > 2000


def test_protected_flags_sees_a_changed_port() -> None:  # the property above can fail
    assert protected_flags([*SGLANG]) != protected_flags([*SGLANG[:-1], "30001"])
    assert protected_flags(VLLM) != protected_flags(["vllm", "serve", "org/other", *VLLM[3:]])


def test_the_plan_serialises_for_json() -> None:
    found = plan("cuda_graph_capture", SGLANG)
    assert isinstance(found, Plan)
    body = found.to_dict()
    assert body["cause"] == "cuda_graph_capture" and body["argv"][-1] == "--disable-cuda-graph"
    assert replace(found, env={"A": "1"}).to_dict()["env"] == {"A": "1"}


# ---------------------------------------------------------------- this machine (LiveHost)


def test_live_host_sees_a_held_port_and_finds_a_free_one() -> None:
    import socket

    from hangwatch.watch.relaunch import LiveHost

    host = LiveHost()
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        assert host.port_taken(held.getsockname()[1])
    port = host.free_port()
    assert not host.port_taken(port) and port < 30000  # below the ephemeral range, as SGLang picks


def test_live_host_knows_a_model_in_the_hub_cache(tmp_path: Path) -> None:
    from hangwatch.watch.relaunch import LiveHost

    env = {"HF_HOME": str(tmp_path / "hf")}
    assert not LiveHost().model_cached("org/llama", env)
    snapshot = tmp_path / "hf" / "hub" / "models--org--llama" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    assert LiveHost().model_cached("org/llama", env)
    assert LiveHost().model_cached(str(tmp_path), {})  # a local folder


def test_live_host_finds_only_locks_whose_writer_is_gone(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from hangwatch.watch.relaunch import LiveHost

    cache = tmp_path / "flashinfer"
    cache.mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    stale, alive = cache / "a.lock", cache / "b.lock"
    stale.write_text(f"{gone.stdout.strip()}\n{os.uname().nodename}\n")  # SoftFileLock: PID, host
    alive.write_text(f"{os.getpid()}\n{os.uname().nodename}\n")
    assert LiveHost().stale_locks({"FLASHINFER_WORKSPACE_BASE": str(cache), "HOME": str(tmp_path)}) == (str(stale),)
