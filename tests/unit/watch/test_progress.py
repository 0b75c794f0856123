"""Progress detection over two snapshots (hangwatch/watch/progress.py), and the ladder's decisions."""

from __future__ import annotations

from hangwatch.model import Frame, ProcessRecord, ProcessStack, Source, ThreadStack
from hangwatch.watch.ladder import (
    LadderConfig,
    native_targets,
    needs_native,
    python_dump_due,
)
from hangwatch.watch.progress import (
    ProcSample,
    Snapshot,
    StackMark,
    compiler_cpu,
    motion_signature,
    proc_samples,
    progress_signals,
    since_last_progress,
)


def _stack(label: str, *frames: tuple[str, str, int], native: bool = False, active: bool = True) -> ProcessStack:
    thread = ThreadStack("MainThread", 1, tuple(Frame(name, name, file, line) for name, file, line in frames), active=active)
    return ProcessStack(label, 100, (thread,), Source(f"stacks/{label}.json"), native=native)


def _proc(key: str, **fields: object) -> dict[str, ProcSample]:
    return {key: ProcSample(key, str(fields.pop("role", "scheduler")), **fields)}  # type: ignore[arg-type]


# ---------------------------------------------------------------- progress_signals


def test_first_snapshot_has_no_signals() -> None:
    # GIVEN no earlier snapshot WHEN compared THEN nothing can have moved yet
    assert progress_signals(None, Snapshot(t=1.0, log_bytes=500)) == ()


def test_new_log_bytes_are_progress() -> None:
    assert progress_signals(Snapshot(0, log_bytes=10), Snapshot(1, log_bytes=11)) == ("log",)


def test_same_log_is_not_progress() -> None:
    assert progress_signals(Snapshot(0, log_bytes=10), Snapshot(1, log_bytes=10)) == ()


def test_gpu_memory_moving_more_than_64_mib() -> None:
    before, after = Snapshot(0, gpu_used_mib={0: 1000.0, 1: 1000.0}), Snapshot(1, gpu_used_mib={0: 1000.0, 1: 1200.0})
    assert progress_signals(before, after) == ("gpu_memory",)


def test_gpu_memory_noise_is_not_progress() -> None:
    before, after = Snapshot(0, gpu_used_mib={0: 1000.0}), Snapshot(1, gpu_used_mib={0: 1040.0})
    assert progress_signals(before, after) == ()


def test_gpu_appearing_is_not_a_move() -> None:
    # a GPU seen for the first time has nothing to compare with
    assert progress_signals(Snapshot(0), Snapshot(1, gpu_used_mib={0: 5000.0})) == ()


def test_compiler_child_using_cpu() -> None:
    before, after = Snapshot(0, compilers={7: 1.0}), Snapshot(1, compilers={7: 1.5})
    assert progress_signals(before, after) == ("compiler",)


def test_idle_compiler_is_not_progress() -> None:
    before, after = Snapshot(0, compilers={7: 1.0}), Snapshot(1, compilers={7: 1.0})
    assert progress_signals(before, after) == ()


def test_new_compiler_with_cpu_counts() -> None:
    assert progress_signals(Snapshot(0), Snapshot(1, compilers={9: 0.2})) == ("compiler",)


def test_rank_rss_moving_more_than_32_mib() -> None:
    before, after = Snapshot(0, procs=_proc("TP0", rss_mib=100.0)), Snapshot(1, procs=_proc("TP0", rss_mib=500.0))
    assert progress_signals(before, after) == ("rss:TP0",)


def test_rank_rss_falling_also_counts() -> None:
    before, after = Snapshot(0, procs=_proc("TP0", rss_mib=500.0)), Snapshot(1, procs=_proc("TP0", rss_mib=100.0))
    assert progress_signals(before, after) == ("rss:TP0",)


def test_small_rss_change_is_not_progress() -> None:
    before, after = Snapshot(0, procs=_proc("TP0", rss_mib=100.0)), Snapshot(1, procs=_proc("TP0", rss_mib=120.0))
    assert progress_signals(before, after) == ()


def test_rank_io_growing() -> None:
    before, after = Snapshot(0, procs=_proc("TP1", io_bytes=0)), Snapshot(1, procs=_proc("TP1", io_bytes=50 << 20))
    assert progress_signals(before, after) == ("io:TP1",)


def test_dead_process_movement_is_ignored() -> None:
    before = Snapshot(0, procs=_proc("TP1", rss_mib=500.0))
    after = Snapshot(1, procs=_proc("TP1", rss_mib=0.0, alive=False))
    assert progress_signals(before, after) == ()


def test_cpu_with_a_changing_stack_is_progress() -> None:
    before = Snapshot(0, stacks={"TP0": StackMark(0, "load@a.py:1", cpu_time_s=1.0)})
    after = Snapshot(5, stacks={"TP0": StackMark(1, "load@a.py:9", cpu_time_s=4.0)})
    assert progress_signals(before, after) == ("stack:TP0",)


def test_spin_wait_with_the_same_stack_is_not_progress() -> None:
    # GIVEN a rank burning CPU in synchronize WHEN its stack stays the same THEN nothing moved
    before = Snapshot(0, stacks={"TP0": StackMark(0, "synchronize@cuda.py:9", cpu_time_s=1.0)})
    after = Snapshot(5, stacks={"TP0": StackMark(1, "synchronize@cuda.py:9", cpu_time_s=6.0)})
    assert progress_signals(before, after) == ()


def test_changing_stack_without_cpu_is_not_progress() -> None:
    before = Snapshot(0, stacks={"TP0": StackMark(0, "a@x.py:1", cpu_time_s=1.0)})
    after = Snapshot(5, stacks={"TP0": StackMark(1, "b@x.py:2", cpu_time_s=1.0)})
    assert progress_signals(before, after) == ()


def test_stack_counts_only_on_a_new_sample() -> None:
    mark = StackMark(3, "a@x.py:1", cpu_time_s=1.0)
    assert progress_signals(Snapshot(0, stacks={"TP0": mark}), Snapshot(1, stacks={"TP0": mark})) == ()


def test_several_signals_at_once() -> None:
    before = Snapshot(0, log_bytes=1, gpu_used_mib={0: 0.0}, procs=_proc("TP0", rss_mib=0.0))
    after = Snapshot(1, log_bytes=2, gpu_used_mib={0: 900.0}, procs=_proc("TP0", rss_mib=900.0))
    assert progress_signals(before, after) == ("log", "gpu_memory", "rss:TP0")


# ---------------------------------------------------------------- helpers


def test_since_last_progress_counts_from_start_until_something_moves() -> None:
    assert since_last_progress(None, 0.0, 12.5) == 12.5
    assert since_last_progress(10.0, 0.0, 12.5) == 2.5


def test_proc_samples_key_by_rank_and_keep_the_live_holder() -> None:
    records = [
        ProcessRecord(2, 1, "sglang::scheduler_TP0", "scheduler", "TP0", rss_mib=10.0, io_read_bytes=5),
        ProcessRecord(3, 1, "python", "launcher", None, rss_mib=1.0),
        ProcessRecord(4, 1, "sglang::scheduler_TP0", "scheduler", "TP0", alive=False),
    ]
    samples = proc_samples(records)
    assert samples["TP0"] == ProcSample("TP0", "scheduler", None, 10.0, 5, True)
    assert samples["pid:3"].role == "launcher"


def test_compiler_cpu_lists_alive_compilers_only() -> None:
    records = [
        ProcessRecord(5, 2, "nvcc x.cu", "compiler", cpu_time_s=2.0),
        ProcessRecord(6, 2, "ninja", "compiler", cpu_time_s=1.0, alive=False),
        ProcessRecord(7, 2, "python", "scheduler", "TP0", cpu_time_s=9.0),
    ]
    assert compiler_cpu(records) == {5: 2.0}


def test_motion_signature_changes_with_the_line() -> None:
    a = _stack("TP0", ("load", "w.py", 10), ("main", "m.py", 1))
    b = _stack("TP0", ("load", "w.py", 11), ("main", "m.py", 1))
    assert motion_signature(a) != motion_signature(b)
    assert motion_signature(a) == motion_signature(_stack("TP0", ("load", "w.py", 10), ("main", "m.py", 1)))


# ---------------------------------------------------------------- the ladder


def test_python_stacks_first_time_at_once() -> None:
    assert python_dump_due(0.5, None, log_quiet_s=0.0, have_stacks=False, config=LadderConfig())


def test_python_stacks_wait_for_a_quiet_log() -> None:
    config = LadderConfig(quiet_before_stacks_s=3.0, stack_interval_s=5.0)
    assert not python_dump_due(20.0, 10.0, log_quiet_s=1.0, have_stacks=True, config=config)
    assert python_dump_due(20.0, 10.0, log_quiet_s=3.5, have_stacks=True, config=config)


def test_python_stacks_at_most_every_interval() -> None:
    config = LadderConfig(stack_interval_s=5.0)
    assert not python_dump_due(12.0, 10.0, log_quiet_s=60.0, have_stacks=True, config=config)


def test_native_only_for_a_native_call_on_top() -> None:
    assert needs_native(_stack("TP0", ("synchronize", "torch/cuda/__init__.py", 9), ("capture", "runner.py", 3)))
    assert not needs_native(_stack("TP0", ("wait", "threading.py", 320), ("serve", "srv.py", 3)))
    assert not needs_native(_stack("TP0", ("load_weights", "model.py", 12)))


def test_native_for_a_thread_idle_in_a_call_python_cannot_see() -> None:
    # the top frame called into C (a TCPStore constructor, a socket accept) and waits there
    assert needs_native(_stack("TP0", ("meet_peers", "rank.py", 24), active=False))
    assert not needs_native(_stack("TP0", ("get", "queue.py", 180), active=False))


def test_native_never_for_a_healthy_server() -> None:
    latest = {"TP0": _stack("TP0", ("synchronize", "torch/cuda/__init__.py", 9))}
    assert native_targets(latest, {}, 100.0, stalled=False, config=LadderConfig()) == []


def test_native_for_a_stalled_server_at_a_bounded_rate() -> None:
    latest = {"TP0": _stack("TP0", ("ncclCommInitRank", "pynccl.py", 9)), "TP1": _stack("TP1", ("load", "m.py", 2))}
    config = LadderConfig(native_interval_s=60.0)
    assert native_targets(latest, {}, 100.0, stalled=True, config=config) == ["TP0"]
    assert native_targets(latest, {"TP0": 70.0}, 100.0, stalled=True, config=config) == []
    assert native_targets(latest, {"TP0": 30.0}, 100.0, stalled=True, config=config) == ["TP0"]


def test_native_can_be_turned_off() -> None:
    latest = {"TP0": _stack("TP0", ("synchronize", "torch/cuda/__init__.py", 9))}
    assert native_targets(latest, {}, 100.0, stalled=True, config=LadderConfig(native=False)) == []


def test_an_idle_helper_thread_that_wakes_is_no_motion() -> None:
    """SGLang's soft watchdog thread sleeps, checks, runs a py-spy dump: its frames change while
    the rank waits in the rendezvous (idle in both samples); a thread whose frames stay while
    py-spy's idle flag flips is no motion either; an active thread that moved is."""
    from hangwatch.model import Frame, ProcessStack, Source, ThreadStack
    from hangwatch.watch.progress import StackMark, thread_marks

    def frames(*names: str) -> tuple[Frame, ...]:
        return tuple(Frame(function=n, qualname=n, file="x.py", line=1) for n in names)

    def mark(sample: int, cpu: float, *threads: ThreadStack) -> StackMark:
        stack = ProcessStack(label="TP0", pid=1, source=Source("stacks/TP0.json"), threads=threads)
        return StackMark(sample, motion_signature(stack), cpu, float(sample), "", thread_marks(stack))

    def moved(a: StackMark, b: StackMark) -> tuple[str, ...]:
        return progress_signals(Snapshot(0.0, stacks={"TP0": a}), Snapshot(5.0, stacks={"TP0": b}))

    waiting = ThreadStack("MainThread", 1, frames("TCPStore.__init__", "init_process_group"), active=False)
    asleep = mark(1, 1.0, waiting, ThreadStack("watchdog", 2, frames("sleep", "_watchdog_once"), active=False))
    dumping = mark(2, 1.5, waiting, ThreadStack("watchdog", 2, frames("run", "pyspy_dump"), active=False))
    assert moved(asleep, dumping) == ()
    flipped = mark(2, 1.5, ThreadStack("MainThread", 1, waiting.frames, active=True),
                   ThreadStack("watchdog", 2, frames("sleep", "_watchdog_once"), active=False))
    assert moved(asleep, flipped) == ()
    computing = mark(2, 1.5, ThreadStack("MainThread", 1, frames("forward"), active=True),
                     ThreadStack("watchdog", 2, frames("sleep", "_watchdog_once"), active=False))
    assert moved(asleep, computing) == ("stack:TP0",)


def test_a_helper_the_engine_runs_on_itself_is_no_progress() -> None:
    """SGLang's soft watchdog runs `py-spy dump --native` on its own processes: the debugger's
    memory and reads grow while the start waits; an untitled multiprocessing child (a rank to
    be) still counts."""
    from hangwatch.model import ProcessRecord

    def rec(pid: int, cmdline: str, rss: float, io: int) -> ProcessRecord:
        return ProcessRecord(pid=pid, ppid=1, cmdline=cmdline, role="other", rank=None, state="S", cpu_time_s=1.0,
                             rss_mib=rss, io_read_bytes=io, alive=True)

    spy, child = "py-spy dump --native --pid 5237", "python -c from multiprocessing.spawn import spawn_main"
    before = Snapshot(0.0, procs=proc_samples([rec(10, spy, 10.0, 0), rec(11, child, 100.0, 0)]))
    after = Snapshot(1.0, procs=proc_samples([rec(10, spy, 90.0, 50 << 20), rec(11, child, 100.0, 0)]))
    assert progress_signals(before, after) == ()
    grown = Snapshot(1.0, procs=proc_samples([rec(10, spy, 90.0, 50 << 20), rec(11, child, 200.0, 0)]))
    assert progress_signals(before, grown) == ("rss:pid:11",)
