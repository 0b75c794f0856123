"""Where a thread waits decides whose the wait is: one decision for the user-code rule and the
wait-for graph (classify.waiton), on a bundle recorded from real processes and on built stacks."""

from __future__ import annotations

from hangwatch.bundle import read_bundle
from hangwatch.classify import classify, load_rules
from hangwatch.classify.verdict.waitfor import final_blocker, process_wait
from hangwatch.classify.verdict.waiton import blamed_frame, thread_wait
from hangwatch.model import Evidence, Frame, Origin, ProcessRecord, ProcessStack, Source, State, ThreadStack
from helpers.paths import FIXTURES

RENDEZVOUS = FIXTURES / "bundles" / "rendezvous-user-script"
SCRIPT = "/home/me/serve.py"


def _f(name: str, file: str, origin: Origin) -> Frame:
    return Frame(name.rsplit(".", 1)[-1], name, file, 1, origin)


def _thread(*frames: Frame) -> ThreadStack:
    return ThreadStack("MainThread", 1, frames, False)


_STORE = (_f("_create_c10d_store", "torch/distributed/rendezvous.py", Origin.TORCH),
          _f("init_process_group", "torch/distributed/distributed_c10d.py", Origin.TORCH))
_USER_MAIN = _f("main", SCRIPT, Origin.USER)


def test_a_rendezvous_the_user_called_is_a_wait_on_the_peers() -> None:
    thread = _thread(*_STORE, _USER_MAIN)
    wait = thread_wait(thread)
    assert wait is not None and wait.kind == "rendezvous"
    blamed = blamed_frame(thread)
    assert blamed is not None and blamed.origin is Origin.TORCH and blamed.function == "_create_c10d_store"


def test_a_thread_in_the_users_own_frames_is_the_users() -> None:
    # blocked in a FIFO the hook opened, called from the engine's distributed init: the hook is where it waits
    hook = _f("dump_hidden", SCRIPT, Origin.USER)
    caller = _f("init_process_group", "torch/distributed/distributed_c10d.py", Origin.TORCH)
    thread = _thread(_f("open", "io.py", Origin.LIBRARY), hook, caller)
    assert thread_wait(thread) is None
    assert blamed_frame(thread) == hook


def test_the_users_own_names_are_no_peer_wait() -> None:
    thread = _thread(_f("rendezvous", "/home/me/rendezvous.py", Origin.USER))
    assert thread_wait(thread) is None
    blamed = blamed_frame(thread)
    assert blamed is not None and blamed.origin is Origin.USER


def test_the_graph_names_a_users_rank_by_its_own_frame_not_a_helper_threads_wait() -> None:
    main = ThreadStack("MainThread", 1, (_f("spin", SCRIPT, Origin.USER),), True)
    helper = ThreadStack("gloo", 2, (_f("all_reduce", "torch/distributed/distributed_c10d.py", Origin.TORCH),), False)
    stack = ProcessStack("TP0", 10, (main, helper), Source("stacks/TP0.json"))
    wait = process_wait(stack, None)
    assert wait.kind == "running" and wait.frame is not None and wait.frame.origin is Origin.USER


def test_ranks_in_torchs_store_called_from_the_users_script_are_the_distributed_family() -> None:
    # real py-spy stacks (tests/integration/programs/user_rendezvous.py: mismatched rendezvous ports)
    evidence = read_bundle(RENDEZVOUS)
    verdict = classify(evidence, load_rules())
    assert (verdict.state, verdict.cause) == (State.STALLED, "nccl_init")
    assert "patch_or_user_code" not in {c.cause for c in verdict.candidates}
    blocker = final_blocker(evidence)
    assert blocker is not None and "rendezvous" in blocker.waits_on and blocker.rank in ("TP0", "TP1")


def test_the_same_stacks_with_a_hook_inside_the_rendezvous_are_the_users() -> None:
    # the counter-case the rule exists for: the rank sits in user frames under the engine
    hook = _f("after_weights_loaded", "/work/user_hooks.py", Origin.USER)
    stack = ProcessStack("TP1", 11, (_thread(hook, *_STORE),), Source("stacks/TP1.json"))
    proc = ProcessRecord(pid=11, ppid=1, cmdline="sglang::scheduler_TP1", role="scheduler", rank="TP1")
    ev = Evidence(procs=(proc,), stacks=(stack,))
    wait = process_wait(stack, proc)
    assert wait.kind == "idle"
    assert blamed_frame(stack.threads[0]) == hook
    assert final_blocker(ev) is None  # nothing blocking in the graph's terms: no rendezvous edge
