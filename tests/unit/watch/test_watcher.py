"""`Watcher.tick()` in process, behind recorded sources: what the loop publishes tick by tick."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from hangwatch.classify import RULES_DIR, load_rules
from hangwatch.cli.session import next_wait
from hangwatch.model import Finding, Origin, State
from hangwatch.watch import WatchConfig, Watcher
from hangwatch.watch.budgets import PastStart, SetupKey
from hangwatch.watch.capture import build_evidence
from hangwatch.watch.ladder import LadderConfig
from hangwatch.watch.observation import Observation
from hangwatch.watch.reading import EVERY, Reading
from helpers.recorded_sources import RecordedSources, frame, proc, server, stack

LOG = (Path(__file__).parents[2] / "fixtures" / "live" / "hs-dump-patch.log").read_bytes().splitlines(keepends=True)
RULES = load_rules([RULES_DIR])
WALL0 = 1_800_000_000.0


def _watcher(src: RecordedSources, **kw) -> Watcher:
    config = WatchConfig(gpus=False, **kw.pop("config", {}))
    return Watcher(server(), RULES, config, sources=src, clock=lambda: 0.0, wall=lambda: WALL0, **kw)


def _tick(watcher: Watcher, t: float):
    observation, verdict = watcher.tick(now=t)
    watcher.settle()
    return observation, verdict


FORWARD = stack("101", 101, frame("LlamaModel.forward", "transformers/models/llama/modeling_llama.py", 412, Origin.LIBRARY),
                frame("Scheduler.run_batch", "sglang/srt/managers/scheduler.py", 2100), active=True)
BLOCKED = stack("101", 101, frame("_dump", "hs_dump.py", 42, Origin.USER), frame("dump_forward", "hs_dump.py", 51, Origin.USER),
                frame("Scheduler.run_batch", "sglang/srt/managers/scheduler.py", 2100))


def _hs_dump_start() -> tuple[RecordedSources, Watcher]:
    src = RecordedSources(procs=[proc(100, "launcher"), proc(101, "scheduler", cpu=5.0), proc(102, "detokenizer")])
    src.set_stacks(FORWARD)
    src.write(b"".join(LOG[:40]))
    return src, _watcher(src)


def test_observation_is_frozen_plain_data_with_what_the_tick_saw() -> None:
    src, watcher = _hs_dump_start()
    observation, verdict = _tick(watcher, 0.0)
    assert isinstance(observation, Observation)
    assert observation.server.engine == "sglang" and observation.server.launcher_pid == 100
    assert [p.pid for p in observation.procs] == [100, 101, 102]
    assert observation.stacks["101"].threads[0].frames[0].qualname == "LlamaModel.forward"
    assert observation.stack_tree["ranks"] == ["101"]
    assert "main" in observation.phases and observation.phases["main"][-1].phase == "weight_load"
    with pytest.raises(AttributeError):
        observation.t = 5.0  # type: ignore[misc]
    assert verdict.state is State.STARTING and watcher.view.latest().observation is observation


def test_a_stack_that_changed_on_the_way_into_the_hang_does_not_end_the_stall() -> None:
    """The lab's hs-dump-patch flap (issue 10): stalled, then "starting" for one tick because the
    scheduler's stack moved from the forward into the blocked dump, then stalled again."""
    src, watcher = _hs_dump_start()
    states, raw = [], []
    for t in range(0, 41):
        if 1 <= t <= 16:
            src.write(LOG[39 + t])  # the start goes on: one line a second, and the scheduler computes
            src.burn("101", 0.5)
        if t == 17:
            src.write(b"".join(LOG[56:58]))  # the warm-up forward reaches the patch: "waiting for consumer"
            src.set_stacks(BLOCKED)
        _, verdict = _tick(watcher, float(t))
        states.append((t, verdict.state, verdict.episode.id if verdict.episode else None))
        raw.append((t, watcher.raw_verdict.state))
    first = next(t for t, state, _ in states if state is State.STALLED)
    after = [(t, state) for t, state, _ in states if t >= first]
    assert all(state is State.STALLED for _, state in after), after
    assert len({episode for t, _, episode in states if t >= first}) == 1  # one episode, never resolved
    assert first <= 17 + 15  # decided within a few stack rounds of the hang


def test_a_new_phase_after_the_stall_ends_the_episode() -> None:
    src, watcher = _hs_dump_start()
    for t in range(0, 10):
        _, verdict = _tick(watcher, float(t))
    assert verdict.state is State.STALLED and verdict.episode is not None
    episode = verdict.episode.id
    src.write(b"[2026-11-30 23:28:58] Load weight end. elapsed=0.06 s, type=X, avail mem=21 GB, mem usage=0.00 GB.\n")
    src.write(b"[2026-11-30 23:28:59] KV Cache is allocated. #tokens: 4096, K size: 0.01 GB, V size: 0.01 GB\n")
    _, verdict = _tick(watcher, 10.0)
    assert verdict.state is not State.STALLED and verdict.episode is None
    assert watcher._decider.episodes.ended[-1].id == episode and watcher._decider.episodes.ended[-1].state == "resolved"


def test_a_dead_rank_that_others_wait_for_is_a_stall_without_the_hold() -> None:
    barrier = frame("monitored_barrier", "torch/distributed/distributed_c10d.py", 5435, Origin.TORCH)
    src = RecordedSources(procs=[proc(100, "launcher"), proc(101, "scheduler", "TP0"),
                                 proc(102, "scheduler", "TP1", alive=False, state="Z", exit_code=-9)])
    src.set_stacks(stack("TP0", 101, barrier, frame("dist_barrier_after_load", "sglang/srt/model_loader/utils.py", 387)))
    src.write(b"".join(LOG[:42]))
    watcher = _watcher(src, config={"min_hold_s": 30.0})  # a long floor: only the deadlock path can be quick
    verdicts = [_tick(watcher, float(t))[1] for t in range(0, 12)]
    stalled = [v for v in verdicts if v.state is State.STALLED]
    assert stalled, [v.state for v in verdicts]
    blocker = stalled[0].blocker
    assert blocker is not None and blocker.definite and blocker.pid == 102 and blocker.state == "exited"
    assert blocker.chain == ("TP0", "TP1")


def test_tp1_loading_a_fifo_is_named_as_the_final_blocker() -> None:
    barrier = frame("monitored_barrier", "torch/distributed/distributed_c10d.py", 5435, Origin.TORCH)
    loader_main = (frame("Condition.wait", "threading.py", 327, Origin.LIBRARY), frame("Thread.start", "threading.py", 969, Origin.LIBRARY),
                   frame("DefaultModelLoader.load_model", "sglang/srt/model_loader/loader.py", 1020))
    from hangwatch.model import ThreadStack

    pool = ThreadStack("ThreadPoolExecutor-1_0", 7, (frame("_load_file", "sglang/srt/model_loader/weight_utils.py", 1354),), False)
    src = RecordedSources(procs=[proc(100, "launcher"), proc(101, "scheduler", "TP0"),
                                 proc(102, "scheduler", "TP1", wchan=("do_epoll_wait", "wait_for_partner"))])
    src.set_stacks(stack("TP0", 101, barrier), stack("TP1", 102, *loader_main, threads=[pool]))
    src.write(b"".join(LOG[:40]))
    watcher = _watcher(src)
    for t in range(0, 60):
        _, verdict = _tick(watcher, float(t))
    assert verdict.state is State.STALLED
    b = verdict.blocker
    assert b is not None and b.rank == "TP1" and b.pid == 102 and b.chain == ("TP0", "TP1")
    assert "FIFO" in b.waits_on and b.frame is not None and "_load_file" in b.frame
    assert b.for_s is not None and b.for_s > 30
    tree = watcher.observation.stack_tree
    assert tree["ranks"] == ["TP0", "TP1"] and tree["outliers"] == ["TP1"]


class _Book:
    def __init__(self, past: list[PastStart]) -> None:
        self.past, self.recorded = past, []

    def past_starts(self, key: SetupKey, limit: int = 50) -> list[PastStart]:
        self.key = key
        return list(self.past)

    def record_start(self, key: SetupKey, start: PastStart, *, at: float) -> None:
        self.recorded.append((key, start))


def test_a_phase_past_its_learned_budget_is_stalled_before_the_fixed_hold() -> None:
    waiting = stack("101", 101, frame("Scheduler.event_loop", "sglang/srt/managers/scheduler.py", 900))
    src = RecordedSources(procs=[proc(100, "launcher"), proc(101, "scheduler")])
    src.set_stacks(waiting)
    src.write(b"".join(line for line in LOG[:38] if b"HS_DUMP" not in line))  # ends at "Load weight begin."
    quick = [PastStart(20.0, {"weight_load": 1.0})] * 3  # it always loaded in a second: budget 7 s

    def first_stall(book: _Book | None, learn: bool = True) -> float | None:
        watcher = _watcher(RecordedSources(procs=list(src.procs), stacks=list(src.stacks), _log=src._log),
                           book=book, config={"learn": learn})
        for t in range(0, 40):
            _, verdict = _tick(watcher, float(t))
            if verdict.state is State.STALLED:
                return t
        return None

    learned, fixed, off = first_stall(_Book(quick)), first_stall(None), first_stall(_Book(quick), learn=False)
    assert learned is not None and learned <= 2 * 1.0 + 5.0 + 1
    assert fixed is None or fixed > learned
    assert off == fixed


def test_native_frames_are_taken_just_before_a_learned_budget_runs_out() -> None:
    # GIVEN a rank whose Python stack only says it waits in a native call, in a phase that always
    # took a second (budget 7 s)
    in_native = stack("101", 101, frame("synchronize", "torch/cuda/__init__.py", 801, Origin.LIBRARY),
                      frame("Scheduler.__init__", "sglang/srt/managers/scheduler.py", 300))
    quick = [PastStart(20.0, {"weight_load": 1.0})] * 3

    def first_native_and_stall(book: _Book | None) -> tuple[int | None, int | None]:
        src = RecordedSources(procs=[proc(100, "launcher"), proc(101, "scheduler")])
        src.set_stacks(in_native)
        src.write(b"".join(line for line in LOG[:38] if b"HS_DUMP" not in line))  # ends at "Load weight begin."
        watcher, native, stalled = _watcher(src, book=book), None, None
        for t in range(0, 60):
            _, verdict = _tick(watcher, float(t))
            native = t if native is None and src.native_dumps else native
            stalled = t if stalled is None and verdict.state is State.STALLED else stalled
            if native is not None and stalled is not None:
                break
        return native, stalled

    # WHEN the phase runs past its budget with nothing moving
    native, stalled = first_native_and_stall(_Book(quick))
    # THEN the native round comes before the stall is declared (not a round after it)
    assert native is not None and stalled is not None and native < stalled, (native, stalled)
    # AND with nothing learned the target is not paused before it looks stalled: a stalled
    # verdict, or nothing moving for `native_after_quiet_s`
    native, stalled = first_native_and_stall(None)
    looks_stalled_at = min(stalled or 90, LadderConfig().native_after_quiet_s)
    assert native is not None and native >= looks_stalled_at, (native, stalled)


def test_a_phase_under_way_before_the_watch_is_stalled_with_its_cause_at_its_budget(tmp_path: Path) -> None:
    # GIVEN a rank spinning in the sampler's warm-up kernel since before hangwatch came (its log last
    # written 1.3 s earlier), in a phase that always took a second (budget 7 s)
    spinning = stack("101", 101, frame("synchronize", "torch/cuda/__init__.py", 1162, Origin.LIBRARY),
                     frame("_dummy_sampler_run", "sglang/srt/model_executor/model_runner.py", 157),
                     frame("Scheduler.__init__", "sglang/srt/managers/scheduler.py", 300))
    log = tmp_path / "server.log"
    log.write_bytes(b"".join(line for line in LOG[:38] if b"HS_DUMP" not in line))
    os.utime(log, (WALL0 - 1.3, WALL0 - 1.3))
    src = RecordedSources(procs=[proc(100, "launcher"), proc(101, "scheduler", state="R")], log_file=str(log))
    src.set_stacks(spinning)
    src.write(log.read_bytes())
    watcher = _watcher(src, book=_Book([PastStart(20.0, {"weight_load": 1.0})] * 2))
    # WHEN the budget runs out with nothing moving
    stalls = []
    for t in range(0, 20):
        src.burn("101", 1.0)  # it spins on the CPU too (a busy synchronize); its stack stays the same
        stalls += [verdict for _, verdict in [_tick(watcher, float(t))] if verdict.state is State.STALLED]
    # THEN the stall names the sampler's kernel from its first verdict on, never `unknown` first
    assert stalls and stalls[0].cause == "arch_kernel_hang", stalls[:1]


def test_eta_from_past_starts_and_a_ready_start_is_recorded() -> None:
    book = _Book([PastStart(60.0, {"weight_load": 10.0, "kv_cache": 5.0, "http_up": 5.0})] * 4)
    launcher = replace(proc(100, "launcher"), create_time=WALL0 - 5.0)  # launched 5 s ago: not yet late
    src = RecordedSources(procs=[launcher, proc(101, "scheduler")])
    src.write(b"".join(LOG[:38]))
    watcher = _watcher(src, book=book)
    _, verdict = _tick(watcher, 0.0)
    assert verdict.eta is not None and verdict.eta.from_starts == 4 and verdict.eta.ready_in_s is not None
    assert verdict.eta.budget_s == 2 * 10.0 + 5.0
    src.write(b"".join(LOG[38:56]) + b"[2026-11-30 23:29:01] The server is fired up and ready to roll!\n")
    _, verdict = _tick(watcher, 3.0)
    assert verdict.state is State.READY and verdict.eta is None
    assert len(book.recorded) == 1 and book.key.engine == "sglang" and book.key.gpu_model == "cpu"


def test_the_launcher_gone_is_a_crash_that_ends_the_episode() -> None:
    src, watcher = _hs_dump_start()
    for t in range(0, 8):
        _, verdict = _tick(watcher, float(t))
    assert verdict.state is State.STALLED
    src.launcher_gone = True
    _, verdict = _tick(watcher, 8.0)
    assert verdict.state is State.CRASHED and verdict.episode is not None and verdict.episode.state == "crashed"


def test_a_quiet_log_while_the_rank_computes_is_not_called_stalled() -> None:
    """A loaded host: the log pauses for 6 s while the scheduler computes (its stack moves with CPU
    time). The markers rule would hold after 3 s of quiet; the stall waits for a stack round
    taken inside the quiet, and that round shows the rank moving."""
    src, watcher = _hs_dump_start()
    moving = stack("101", 101, frame("Scheduler.init_memory_pool", "sglang/srt/managers/scheduler.py", 700), active=True)
    states = []
    for t in range(0, 20):
        if 1 <= t <= 6 or t >= 13:
            src.write(LOG[39 + t] if 39 + t < 56 else b"[2026-11-30 23:28:59] still starting\n")
        src.burn("101", 0.8)
        if t == 8:
            src.set_stacks(moving)
        states.append(_tick(watcher, float(t))[1].state)
    assert State.STALLED not in states, states


def test_the_preflight_findings_reach_the_classifier_each_tick() -> None:
    # `hangwatch run` hands the preflight's findings to the watcher: they must be in every
    # observation and in the evidence the rules read (rules match `preflight.finding`).
    finding = Finding("preflight-weights-fifo", "weight_loading_io", "critical", "The weights file is a FIFO", (), "Copy the weights")
    src, _ = _hs_dump_start()
    watcher = _watcher(src, config={"preflight": (finding,)})
    observation, _ = _tick(watcher, 0.0)
    assert observation.preflight == (finding,)
    assert build_evidence(observation).preflight == (finding,)


def test_the_loop_ticks_at_the_budgets_end_so_the_stall_is_decided_there() -> None:
    # GIVEN a phase that always took a second (budget 2 × 1 s + 5 s), stuck with nothing moving
    def first_stall(cadence_only: bool) -> tuple[float, float | None]:
        src = RecordedSources(procs=[proc(100, "launcher"), proc(101, "scheduler")])
        src.set_stacks(stack("101", 101, frame("Scheduler.event_loop", "sglang/srt/managers/scheduler.py", 900)))
        src.write(b"".join(line for line in LOG[:38] if b"HS_DUMP" not in line))  # ends at "Load weight begin."
        now = [0.0]
        watcher = Watcher(server(), RULES, WatchConfig(gpus=False), sources=src, clock=lambda: now[0],
                          wall=lambda: WALL0 + now[0], book=_Book([PastStart(20.0, {"weight_load": 1.0})] * 3))
        budget_end = None
        while now[0] < 30:
            _, verdict = _tick(watcher, now[0])
            if verdict.state is State.STALLED:
                return now[0], budget_end
            until = watcher.until_budget_end()
            budget_end = now[0] + until if until is not None else None
            now[0] += next_wait(1.0, now[0], None if cadence_only else until)
        raise AssertionError("never stalled")

    # WHEN the loop sleeps as the session does, THEN the stall comes just past the budget's end
    at, budget_end = first_stall(cadence_only=False)
    assert budget_end is not None and budget_end <= at <= budget_end + 0.1, (at, budget_end)
    # (on the cadence alone it came up to an interval later)
    late, _ = first_stall(cadence_only=True)
    assert late > at


def test_a_ready_server_is_sampled_at_a_sidecars_pace_until_its_state_changes() -> None:
    """Once ready: ports and the full process scan every 10 s, Python stacks every 60 s; the known
    processes every tick (a crash is still seen at once), and the crash brings the start's pace back."""
    src = RecordedSources(procs=[proc(100, "launcher"), proc(101, "scheduler")])
    src.set_stacks(FORWARD)
    src.write(b"".join(LOG[:56]) + b"[2026-11-30 23:29:01] The server is fired up and ready to roll!\n")
    calls = {"ports": 0, "reads": 0, "rescans": 0}
    read = src.read

    def counted(parts: frozenset[str] = EVERY, *, rescan: bool = True) -> Reading:
        calls["ports"] += "ports" in parts
        calls["reads"] += "procs" in parts
        calls["rescans"] += "procs" in parts and rescan
        return read(parts, rescan=rescan)

    src.read = counted  # type: ignore[method-assign]
    watcher = _watcher(src)
    states = []
    for t in range(121):
        src.burn("101", 0.5)
        states.append(_tick(watcher, float(t))[1].state)
    assert states[1:] == [State.READY] * 120
    assert calls["reads"] == 121  # the known processes, every tick
    assert 12 <= calls["ports"] <= 14 and calls["rescans"] == calls["ports"]  # t=0, 1 (ready), then every 10 s
    assert src.dumps <= 4  # the first round, then every 60 s
    ports = calls["ports"]
    src.launcher_gone = True
    _, verdict = _tick(watcher, 121.0)
    assert verdict.state is State.CRASHED
    for t in (122.0, 123.0, 124.0):
        _tick(watcher, t)
    assert calls["ports"] - ports == 3  # from the tick after the crash verdict: every tick again
