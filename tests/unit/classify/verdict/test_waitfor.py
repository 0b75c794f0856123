"""The wait-for graph and the final blocker, on the H200 fixtures and on built stacks."""

from __future__ import annotations

import json

import pytest

from hangwatch.bundle import read_bundle
from hangwatch.classify.verdict.waitfor import final_blocker
from hangwatch.model import Evidence, Frame, Origin, ProcessRecord, ProcessStack, Source, ThreadStack
from helpers.paths import FIXTURES

GPU = FIXTURES / "gpu"


@pytest.mark.parametrize(("scenario", "rank", "definite"), [
    ("collective", "TP1", False),  # TP0 in an NCCL sync, TP1 idle in the user's hook
    ("graph-capture", "TP1", False),  # TP0 in a collective, TP1 synchronizing its GPU in capture
    ("nccl-init", "TP1", False),  # TP0 in ncclCommInitRank, TP1 waiting on a store key
    ("collective-1gpu", "TP1", False),  # the same three, both ranks on one H200
    ("graph-capture-1gpu", "TP1", False),
    ("nccl-init-1gpu", "TP1", False),
])
def test_final_blocker_on_the_gpu_fixtures(scenario: str, rank: str, definite: bool) -> None:
    evidence = read_bundle(GPU / scenario / "bundle")
    blocker = final_blocker(evidence)
    assert blocker is not None
    pid_of_rank = {p.rank: p.pid for p in evidence.procs if p.rank}
    assert (blocker.rank, blocker.pid, blocker.definite) == (rank, pid_of_rank[rank], definite)


def test_final_blocker_of_a_rendezvous_the_users_code_called() -> None:
    # both ranks in torch's TCPStore under user_hooks.join_process_group: the blocker says what
    # the classifier says (a wait on the rendezvous), not the user's frame
    blocker = final_blocker(read_bundle(GPU / "rendezvous-mismatch-1gpu" / "bundle"))
    assert blocker is not None and blocker.waits_on == "the distributed rendezvous (TCPStore)"
    assert blocker.frame is not None and "torch/distributed" in blocker.frame


@pytest.mark.parametrize("name", ["dead-rank", "dead-rank-1gpu"])
def test_final_blocker_on_the_gpu_fixture_of_a_killed_rank(name: str) -> None:
    # TP0 waits in an all-reduce on rank 1, which was SIGKILLed (its zombie's title is cut, so it
    # has no rank of its own): a wait that cannot end, decided at once.
    scenario = GPU / name
    killed = json.loads((scenario / "onset.json").read_text())["pid"]
    blocker = final_blocker(read_bundle(scenario / "bundle"))
    assert blocker is not None and blocker.definite
    assert blocker.pid == killed or (blocker.pid is None and blocker.rank == "TP1")


def _f(name: str, file: str, line: int = 1, origin: Origin = Origin.ENGINE) -> Frame:
    return Frame(name.rsplit(".", 1)[-1], name, file, line, origin)


def _stack(label: str, pid: int, *frames: Frame, active: bool = False) -> ProcessStack:
    return ProcessStack(label, pid, (ThreadStack("MainThread", pid, frames, active),), Source(f"stacks/{label}.json"))


def _proc(pid: int, rank: str, **kw) -> ProcessRecord:
    return ProcessRecord(pid=pid, ppid=1, cmdline=f"sglang::scheduler_{rank}", role="scheduler", rank=rank, **kw)


DIST = "torch/distributed/distributed_c10d.py"


def test_ranks_in_different_collectives_are_a_cycle() -> None:
    ev = Evidence(procs=(_proc(10, "TP0", state="S"), _proc(11, "TP1", state="S")),
                  stacks=(_stack("TP0", 10, _f("all_reduce", DIST)), _stack("TP1", 11, _f("broadcast", DIST))))
    blocker = final_blocker(ev, {"TP0": 12.0})
    assert blocker is not None and blocker.definite and blocker.rank == "TP0" and "cycle" in blocker.waits_on
    assert blocker.for_s == 12.0


def test_ranks_all_in_the_same_collective_wait_on_none_of_them() -> None:
    ev = Evidence(procs=(_proc(10, "TP0"), _proc(11, "TP1")),
                  stacks=(_stack("TP0", 10, _f("all_reduce", DIST)), _stack("TP1", 11, _f("all_reduce", DIST))))
    blocker = final_blocker(ev)
    assert blocker is not None and not blocker.definite and blocker.chain == ("TP0",)


def test_an_absent_rank_of_a_one_node_start_is_definite() -> None:
    ev = Evidence(flags={"tp": "2"}, procs=(_proc(10, "TP0"),), stacks=(_stack("TP0", 10, _f("barrier", DIST)),))
    blocker = final_blocker(ev)
    assert blocker is not None and blocker.definite and blocker.rank == "TP1" and blocker.state == "absent"


def test_a_rank_waiting_for_its_child_names_the_child() -> None:
    child = ProcessRecord(pid=12, ppid=10, cmdline="python -c build", role="worker", rank="TP0-build", state="S",
                          wchan=("pipe_read",))
    ev = Evidence(procs=(_proc(10, "TP0", wchan=("do_wait",)), child),
                  stacks=(_stack("TP0", 10, _f("Popen.wait", "subprocess.py", 1200, Origin.LIBRARY)),
                          _stack("TP0-build", 12, _f("main", "build.py", 3, Origin.USER))))
    blocker = final_blocker(ev)
    assert blocker is not None and blocker.pid == 12 and "pipe" in blocker.waits_on


def test_every_rank_running_has_no_blocker() -> None:
    ev = Evidence(procs=(_proc(10, "TP0"),), stacks=(_stack("TP0", 10, _f("forward", "model.py"), active=True),))
    assert final_blocker(ev) is None


def test_vllm_workers_in_the_rendezvous_do_not_wait_on_the_engine_core() -> None:
    # GIVEN vLLM TP=2 over two nodes, node 1 never started: both local workers wait in the TCPStore
    # rendezvous, the EngineCore (a rank role, no rank label) idles in its selector loop
    core = ProcessRecord(pid=9, ppid=1, cmdline="VLLM::EngineCore", role="engine_core", state="S")
    # (before distributed init the workers have no TP title yet: `VLLM::Worker`)
    workers = [ProcessRecord(pid=10 + i, ppid=9, cmdline="VLLM::Worker", role="worker", state="S") for i in range(2)]
    store = _f("TCPStore.__init__", DIST, 900, Origin.TORCH)
    ev = Evidence(flags={"tensor-parallel-size": "2", "nnodes": "2"}, procs=(core, *workers),
                  stacks=(_stack("9", 9, _f("_PollLikeSelector.select", "selectors.py", 415, Origin.LIBRARY)),
                          _stack("10", 10, store), _stack("11", 11, store)))
    # THEN the blocker is a worker in the rendezvous (waiting for the node that never came), not the idle core
    blocker = final_blocker(ev)
    assert blocker is not None and blocker.pid in (10, 11) and "rendezvous" in blocker.waits_on, blocker


def test_a_rank_that_died_after_its_last_stack_is_dead_not_waiting() -> None:
    # GIVEN TP1's last stack shows it in the rendezvous, then it was SIGKILLed; TP0 waits there for it
    store = _f("TCPStore.__init__", DIST, 900, Origin.TORCH)
    ev = Evidence(procs=(_proc(10, "TP0", state="S"), _proc(11, "TP1", state="Z", alive=False, exit_code=-9)),
                  stacks=(_stack("TP0", 10, store), _stack("TP1", 11, store)))
    # THEN TP1 is the blocker, gone: a wait that cannot end
    blocker = final_blocker(ev)
    assert blocker is not None and blocker.rank == "TP1" and blocker.state == "exited" and blocker.definite, blocker
