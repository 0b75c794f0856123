"""The watch loop's trackers, each alone: what `Watcher.tick()` composes (docs/architecture.md, the tick).

Real parts: the engines' own phase parsers, a real thread pool for the stack rounds, SQLite for
past starts. No clock is read: times are passed in.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

from hangwatch.engines import get_engine
from hangwatch.model import GpuInfo, GpuSample, Missing, Origin, Phase, State
from hangwatch.parse.logs import read_log_lines
from hangwatch.sinks.store import HistoryStore
from hangwatch.watch.budgets import BudgetPolicy, PastStart
from hangwatch.watch.ladder import LadderConfig
from hangwatch.watch.learning import BudgetLearner, where
from hangwatch.watch.livesources import EngineReleases
from hangwatch.watch.logfollow import LogFollower
from hangwatch.watch.observation import Observation, PhaseSpan, Progress, ServerInfo
from hangwatch.watch.processes import ProcessTable
from hangwatch.watch.progress import ProgressTracker, snapshot_of
from hangwatch.watch.reading import Reading, StackRound, StackTarget, merged_missing
from hangwatch.watch.stackrounds import StackRounds
from hangwatch.watch.stacks import StackBook
from helpers.recorded_sources import frame, proc, stack
from helpers.serve_fixtures import make_verdict

SGLANG = get_engine("sglang")
LOAD = b"[2026-11-30 23:28:50] Load weight begin. avail mem=21.07 GB\n"
LOADED = b"[2026-11-30 23:28:58] Load weight end. elapsed=0.06 s, type=X, avail mem=21 GB, mem usage=0.00 GB.\n"
WAIT = b"[2026-11-30 23:28:51] Waiting for the weights...\n"
FORWARD = stack("TP0", 101, frame("LlamaModel.forward", "transformers/models/llama/modeling_llama.py", 412, Origin.LIBRARY))
SYNC = stack("TP0", 101, frame("synchronize", "torch/cuda/__init__.py", 801, Origin.LIBRARY),
             frame("Scheduler.__init__", "sglang/srt/managers/scheduler.py", 300))


# ---------------------------------------------------------------- LogFollower


def _engine_for(_lines):
    return SGLANG


def test_the_log_follower_times_phase_lines_and_calls_only_later_ones_progress() -> None:
    follower = LogFollower(read_log_lines, max_lines=100)
    # the first read is the tail already there: its phases are known, but they are no progress
    assert follower.feed(0.0, LOAD, _engine_for) == []
    assert [(p.t, p.event.phase) for p in follower.ring.phases] == [(0.0, Phase.WEIGHT_LOAD)]
    moved = follower.feed(4.0, LOADED, _engine_for)
    assert [(m.signal, m.since_t) for m in moved] == [("phase:weight_load", 4.0)]  # its end line
    assert follower.first_read_t == 0.0 and follower.quiet_s(6.0) == 2.0


def test_a_repeated_line_is_no_news_for_the_follower() -> None:
    follower = LogFollower(read_log_lines, max_lines=100, quiet_before_s=30.0)
    follower.feed(0.0, LOAD + WAIT, _engine_for)
    assert follower.quiet_s(5.0) == 35.0  # nothing new since we came: counted from before
    follower.feed(5.0, WAIT, _engine_for)
    assert follower.quiet_s(7.0) == 37.0 and follower.since_news_s(7.0) == 7.0


def test_an_engine_known_late_re_derives_the_phases_of_every_line_read() -> None:
    engine = {"now": None}
    follower = LogFollower(read_log_lines, max_lines=100)
    follower.feed(0.0, LOAD, lambda _lines: engine["now"])
    assert not follower.ring.phases
    engine["now"] = SGLANG
    assert follower.feed(1.0, WAIT, lambda _lines: engine["now"]) == []  # a re-derivation is no progress
    assert [p.event.phase for p in follower.ring.phases] == [Phase.WEIGHT_LOAD]


# ---------------------------------------------------------------- ProgressTracker


def _snap(t: float, *, news: int = 0, gpu_mib: float = 0.0):
    gpu = GpuSample(t, (GpuInfo(0, "H200", memory_used_mib=gpu_mib),))
    return snapshot_of(t, 0, news, gpu, [proc(100, "launcher")], {})


def test_progress_tracker_dates_what_moved_and_forgets_old_signals() -> None:
    tracker = ProgressTracker(recent_s=10.0)
    assert tracker.update(_snap(0.0)) == [] and tracker.recent_signals() == ()
    moved = tracker.update(_snap(2.0, gpu_mib=4096.0))
    assert [(m.signal, m.since_t) for m in moved] == [("gpu_memory", 0.0)]  # moved since the snapshot before
    assert tracker.since_last_progress(5.0, quiet_before_s=100.0) == 3.0
    tracker.update(_snap(11.0, gpu_mib=4096.0))
    assert tracker.recent_signals() == ("gpu_memory",)
    tracker.update(_snap(13.0, gpu_mib=4096.0))
    assert tracker.recent_signals() == ()


def test_progress_tracker_counts_from_before_we_came_while_nothing_moved() -> None:
    tracker = ProgressTracker()
    tracker.update(_snap(0.0))
    assert tracker.since_last_progress(0.5, quiet_before_s=60.0) == 0.5  # one reading proves nothing
    tracker.update(_snap(1.0, news=0))
    assert tracker.since_last_progress(1.0, quiet_before_s=60.0) == 61.0
    assert [m.signal for m in tracker.update(_snap(2.0, news=1))] == []  # the log alone moves no episode
    assert tracker.since_last_progress(2.0, quiet_before_s=60.0) == 0.0


# ---------------------------------------------------------------- StackBook


def test_stack_book_times_each_wait_and_counts_steady_rounds() -> None:
    book = StackBook()
    procs = [proc(101, "scheduler", "TP0", cpu=1.0)]
    book.store(0.0, StackRound(((SYNC, b"{}"),), ()), procs)
    book.store(5.0, StackRound(((SYNC, b"{}"),), (), took_s=0.2), procs)
    assert book.steady == {"TP0": 2} and book.timings == {"stacks": 0.2}
    # first seen in this wait: counted from the last progress when that is longer
    assert book.wait_since(6.0, quiet_s=40.0) == {"TP0": 40.0}
    book.store(10.0, StackRound(((FORWARD, b"{}"),), ()), procs)
    assert book.steady == {"TP0": 1} and book.wait_since(12.0, quiet_s=40.0) == {"TP0": 2.0}
    assert book.newest_round_t() == 10.0 and book.latest()["TP0"].sample == 2


def test_stack_book_keeps_why_stacks_failed_until_every_rank_dumps() -> None:
    book = StackBook()
    refused = Missing("stacks", "ptrace refused", "run as root")
    book.store(0.0, StackRound((), (refused, refused)), [])
    assert book.missing == Missing("stacks", "ptrace refused (2 processes)", "run as root")
    book.store(1.0, StackRound(((FORWARD, b"{}"),), ()), [])
    assert book.missing is None


# ---------------------------------------------------------------- StackRounds


class _Dumper:
    """Dumps on the pool's thread, released by the test: a slow py-spy."""

    def __init__(self) -> None:
        self.release, self.calls = threading.Event(), []

    def __call__(self, targets, native: bool) -> StackRound:
        self.calls.append((tuple(t.label for t in targets), native, threading.current_thread().name))
        self.release.wait(10)
        return StackRound(((replace(SYNC, native=native), b"{}"),), (), native, 0.01)


def _schedule(rounds: StackRounds, t: float, *, stalled: bool = False, have: bool = False, log_quiet: float = 0.0) -> None:
    rounds.schedule(t, [StackTarget(101, "TP0")], log_quiet_s=log_quiet, have_stacks=have, ready=False,
                    stalled=stalled, quiet_s=0.0, budget_left_s=None, latest={"TP0": SYNC})


def test_stack_rounds_run_beside_the_loop_and_join_a_later_tick() -> None:
    dumper = _Dumper()
    rounds = StackRounds(dumper, LadderConfig())
    try:
        _schedule(rounds, 0.0)  # no stacks yet: a Python round at once
        assert rounds.python_running() and rounds.finished() == []  # the tick goes on without it
        _schedule(rounds, 1.0)  # one in flight: no second
        dumper.release.set()
        assert rounds.wait_python(5.0)
        done = rounds.finished()
        assert [r.native for r in done] == [False] and rounds.finished() == []
        assert dumper.calls[0][2].startswith("hangwatch-stacks")
        _schedule(rounds, 2.0, have=True, log_quiet=10.0)  # within stack_interval_s of the last
        assert len(dumper.calls) == 1
        _schedule(rounds, 6.0, have=True, log_quiet=10.0)
        rounds.settle()
        assert len(dumper.calls) == 2
    finally:
        dumper.release.set()
        rounds.close()


def test_native_rounds_only_when_the_server_looks_stalled_and_once_a_minute() -> None:
    dumper = _Dumper()
    dumper.release.set()
    rounds = StackRounds(dumper, LadderConfig())
    try:
        _schedule(rounds, 0.0, have=True, log_quiet=10.0)
        rounds.settle()
        rounds.finished()
        assert [native for _, native, _ in dumper.calls] == [False]
        _schedule(rounds, 1.0, have=True, stalled=True)
        rounds.settle()
        assert [r.native for r in rounds.finished()] == [True]
        _schedule(rounds, 30.0, have=True, stalled=True)  # the same rank within native_interval_s: not again
        rounds.settle()
        assert [native for _, native, _ in dumper.calls].count(True) == 1
    finally:
        rounds.close()


def test_a_ready_server_rescans_every_ten_seconds() -> None:
    rounds = StackRounds(_Dumper(), LadderConfig())
    assert [rounds.rescan_due(t, ready=True) for t in (0.0, 1.0, 9.0, 10.0)] == [True, False, False, True]
    assert rounds.rescan_due(10.5, ready=False)
    rounds.close()


# ---------------------------------------------------------------- ProcessTable


def test_process_table_keeps_who_an_exited_process_was() -> None:
    table = ProcessTable(root_pid=100)
    table.take(Reading(procs=(proc(100, "other"), proc(101, "scheduler", "TP0"))))
    assert [p.role for p in table.procs] == ["launcher", "scheduler"]  # the root we watch is the launcher
    zombie = replace(proc(101, "other"), cmdline="", alive=False, state="Z")
    table.take(Reading(procs=(proc(100, "launcher"), zombie)))
    assert table.procs[1].role == "scheduler" and table.procs[1].rank == "TP0"
    assert table.rank_died()


def test_the_launcher_gone_marks_all_exited_and_is_missing_only_when_nothing_was_seen() -> None:
    gone = Missing("procs", "the launcher exited")
    table = ProcessTable(root_pid=100)
    table.take(Reading(launcher_gone=gone))
    assert table.missing == gone
    table = ProcessTable(root_pid=100)
    table.take(Reading(procs=(proc(100, "launcher"),)))
    table.take(Reading())  # a reading without the tree changes nothing
    table.take(Reading(launcher_gone=gone))
    assert table.missing is None and not table.procs[0].alive


def test_the_loops_own_missing_sources_win_over_the_readings() -> None:
    read = (Missing("log", "no log"), Missing("stacks", "py-spy not found"))
    merged = merged_missing(read, [Missing("stacks", "ptrace refused")])
    assert [(m.source, m.reason) for m in merged] == [("log", "no log"), ("stacks", "ptrace refused")]


# ---------------------------------------------------------------- BudgetLearner


LAUNCH = "python -m sglang.launch_server --model-path m"


def _obs(t: float, phases: dict[str, tuple[PhaseSpan, ...]], *, quiet: float = 0.0) -> Observation:
    server = ServerInfo("sglang pid 100", "sglang", 100, cmdline=LAUNCH,
                        flags={"model-path": "m"})
    launcher = replace(proc(100, "launcher"), create_time=1_000.0)
    return Observation(t=t, wall=1_000.0 + t, started_wall=1_000.0, server=server, procs=(launcher,), phases=phases,
                       phase_events=(), gpus=(), stacks={}, stack_samples=(), stack_tree={}, ports=(), ports_text=None,
                       progress=Progress(quiet, quiet, ()), missing=(), timings={}, log=(), log_tail=b"", transitions=())


def test_budget_learner_records_a_ready_start_once_and_reads_it_back(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "history.db")
    first = BudgetLearner(store, BudgetPolicy(), EngineReleases(LAUNCH))
    spans = {"main": (PhaseSpan("weight_load", 0.0, 4.0, 1), PhaseSpan("kv_cache", 4.0, 5.0, 2),
                      PhaseSpan("http_up", 5.0, None, 3))}
    done = _obs(6.0, spans)
    first.learn(done, make_verdict(State.READY, None), first_read_t=0.0)
    first.learn(done, make_verdict(State.READY, None), first_read_t=0.0)  # once per start
    second = BudgetLearner(store, BudgetPolicy(), EngineReleases(LAUNCH))
    past = second.past(_obs(1.0, {"main": (PhaseSpan("weight_load", 0.0, None, 1),)}))
    assert len(past) == 1 and past[0].phases["weight_load"] == 4.0


def test_budget_learner_says_how_much_of_the_phase_budget_is_left() -> None:
    class Book:
        def past_starts(self, key, limit=50):
            return [PastStart(20.0, {"weight_load": 1.0})]

        def record_start(self, key, start, *, at):
            raise AssertionError("not ready")

    learner = BudgetLearner(Book(), BudgetPolicy(), EngineReleases(LAUNCH))  # budget: 2 x 1 s + 5 s
    obs = _obs(3.0, {"main": (PhaseSpan("weight_load", 1.0, None, 1),)}, quiet=2.0)
    learner.past(obs)
    learner.mark_budget(obs, where(obs))
    assert learner.budget_left(3.0) == 5.0 and learner.budget_left(8.0) == 0.0
    assert BudgetLearner(None, BudgetPolicy(), EngineReleases(LAUNCH)).past(obs) == []
