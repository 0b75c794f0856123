"""The watch loop: one `tick()` is one path through named steps, each a small object of its own.

    watcher = Watcher(server, rules, WatchConfig())
    while True:
        observation, verdict = watcher.tick()   # ~ms of work; stack dumps run beside it, never in it
        time.sleep(config.interval_s)

A tick: read (`Sources.read`: one frozen `Reading` of the log, processes, ports, health, NVML)
-> take it in (`LogFollower` the log and its phases, `ProcessTable` the tree, the GPU ring, the
finished stack rounds into `StackBook`) -> progress (`ProgressTracker`: what moved since the last
tick) -> schedule stacks (`StackRounds`, the ladder's rungs 2 and 3, on a worker thread) ->
observe (one frozen `Observation`) -> decide (`Decider`: classify, episodes, the final blocker,
the ETA from `BudgetLearner`) -> learn -> publish (one immutable value the sinks read).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hangwatch.classify.verdict.memo import ScanMemo
from hangwatch.classify.verdict.stacktree import merge_stacks
from hangwatch.model import GpuSample, StallEpisode, State, Verdict
from hangwatch.watch.budgets import Book
from hangwatch.watch.capture import build_evidence, bundle_files, phase_spans, stacks_json
from hangwatch.watch.config import WatchConfig, live_rules
from hangwatch.watch.decide import Decider
from hangwatch.watch.episodes import Motion
from hangwatch.watch.learning import BudgetLearner, elapsed_s, where
from hangwatch.watch.livesources import EngineReleases, LiveSources
from hangwatch.watch.logfollow import LogFollower
from hangwatch.watch.lognews import file_age
from hangwatch.watch.observation import Observation, Progress
from hangwatch.watch.processes import ProcessTable
from hangwatch.watch.progress import FIRST_LOOK_POLL_S, ProgressTracker, Snapshot, snapshot_of
from hangwatch.watch.published import LatestView, Published
from hangwatch.watch.reading import EVERY, Reading, Sources, merged_missing, stack_targets
from hangwatch.watch.rings import GpuRing, VerdictChanges
from hangwatch.watch.server import server_info, server_name
from hangwatch.watch.stackrounds import StackRounds
from hangwatch.watch.stacks import StackBook

__all__ = ["WatchConfig", "Watcher"]

_FIRST_LOOK = frozenset({"log", "procs", "gpus"})
_PROCS = frozenset({"procs"})
_DEFAULT_CONFIG = WatchConfig()


class Watcher:
    """Watches one server; `tick()` is called by one thread, `view` is read by any.

    `sources` (default: the live machine) and `book` (past starts, for learned budgets and the
    ETA; None: no learning) are injected; `clock`/`wall` too, so tests drive it tick by tick."""

    def __init__(self, server: Any, rules: Sequence[Any], config: WatchConfig = _DEFAULT_CONFIG, *,
                 sources: Sources | None = None, book: Book | None = None, clock=time.monotonic, wall=time.time):
        self.server, self.config, self._clock, self._wall = server, config, clock, wall
        self.rules = live_rules(rules, config.min_hold_s)
        self.started, self.started_wall = clock(), wall()
        self.sources: Sources = sources if sources is not None else LiveSources(server, config, rules=self.rules)
        releases = EngineReleases(getattr(server, "cmdline", None))
        self.log = LogFollower(self.sources.parse_lines, max_lines=config.evidence_log_lines,
                               quiet_before_s=file_age(self.sources.log_path, self.started_wall), releases=releases)
        self.processes = ProcessTable(self.sources.root_pid)
        self.gpus, self.stacks = GpuRing(), StackBook()
        self.progress = ProgressTracker(config.thresholds, config.recent_signals_s)
        # `dump` looked up per round, as before: bench/bench_overhead.py times it by wrapping it
        self.rounds = StackRounds(lambda targets, native: self.sources.dump(targets, native), config.ladder)
        self.learner = BudgetLearner(book if config.learn else None, config.budget_policy, releases)
        self.transitions = VerdictChanges()
        self.view = LatestView(server_name(server), started_at=self.started_wall)
        # this server's log caches, so a tick classifies only the lines that arrived (classify.memo)
        self._decider = Decider(self.rules, config.min_hold_s, config.budget_policy, memo=ScanMemo())
        self._server_info = server_info(server)
        self._reading, self._motion = Reading(), list[Motion]()
        self._verdict: Verdict | None = None  # as published at the last tick
        self._raw: Verdict | None = None  # as the classifier alone said it
        self.observation: Observation | None = None  # the latest tick's (what every sink reads)
        self._lock = threading.RLock()
        self._stop: str | None = None  # a stop someone asked for (note_stop): its exit is no crash

    def note_stop(self, what: str) -> None:
        """A stop was asked for (`hangwatch run` forwarding Ctrl-C or SIGTERM): the exit that
        follows is `stopped`, unless something crashes. A start whose rank had already died
        crashed before the stop: its end is no stop's. Safe from a signal handler: no lock taken."""
        if not self.processes.rank_died():
            self._stop = self._stop or what

    def tick(self, now: float | None = None) -> tuple[Observation, Verdict]:
        """One round: read, take in, track progress, schedule stacks, observe, decide, learn, publish."""
        with self._lock:
            if now is None and self.progress.last is None and self.config.first_look_s > 0:
                self._first_look()
            t = (self._clock() if now is None else now) - self.started
            self._motion = []
            rescan = self.rounds.rescan_due(t, self._verdict is not None and self._verdict.state is State.READY)
            self._take(t, self.sources.read(EVERY if rescan else EVERY - {"ports"}, rescan=rescan))
            self._motion.extend(self.progress.update(self._snapshot(t)))
            self._schedule_stacks(t)
            if not self.stacks.ring.labels() and self.rounds.wait_python(self.config.first_stacks_wait_s):
                self._store_rounds(t)  # the first verdict is worth its stacks: wait a little for the first round
            observation = self._observe(t)
            verdict = self._decide(observation)
            self.learner.learn(observation, verdict, self.log.first_read_t)
            return self._publish(observation, verdict), verdict

    def _first_look(self) -> None:
        """The baseline reading (see WatchConfig.first_look_s): nothing in it counts as progress."""
        t = self._clock() - self.started
        # the processes, then the stack round: its py-spy runs (another process) while this one reads the log
        self._take(t, self.sources.read(_PROCS))
        self._schedule_stacks(t)
        self._take(t, self.sources.read(_FIRST_LOOK - _PROCS))
        # the processes read while the round runs: one that dies meanwhile is known by what it was
        self.rounds.wait_python_doing(self.config.stack_timeout_s, lambda: self.processes.take(self.sources.read(_PROCS)))
        self._store_rounds(t)
        self.progress.update(self._snapshot(t))
        # the look ends at the first motion, read again (a rescan: a rank's threads' reads too); "nothing moved" waits it all
        end = time.monotonic() + self.config.first_look_s - (self._clock() - self.started - t)
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(left, FIRST_LOOK_POLL_S))
            if left > FIRST_LOOK_POLL_S:
                self._take(t2 := self._clock() - self.started, self.sources.read(_FIRST_LOOK))
                if self.progress.moved_since_last(self._snapshot(t2)):
                    break

    # ---------------------------------------------------------------- the steps

    def _take(self, t: float, reading: Reading) -> None:
        """Take one reading in: the log, the process tree, NVML, and the stack rounds that finished."""
        self._reading = reading
        self._motion.extend(self.log.feed(t, reading.log, self.sources.engine_for))
        self.processes.take(reading)
        if reading.gpus is not None:
            self.gpus.add(GpuSample(t=round(t, 2), gpus=reading.gpus))
        self._store_rounds(t)

    def _store_rounds(self, t: float) -> None:
        for round_ in self.rounds.finished():
            self.rounds.forget_except(self.stacks.store(t, round_, self.processes.procs))

    def _snapshot(self, t: float) -> Snapshot:
        return snapshot_of(t, self._reading.log_bytes_seen, self.log.news.total, self.gpus.latest(),
                           self.processes.procs, self.stacks.marks)

    def _schedule_stacks(self, t: float) -> None:
        targets = stack_targets(self.processes.procs, self.config.max_stack_targets)
        if not targets or not self._reading.stacks_possible:
            return
        state = self._verdict.state if self._verdict is not None else None
        self.rounds.schedule(
            t, targets, log_quiet_s=self.log.since_news_s(t), have_stacks=bool(self.stacks.ring.labels()),
            ready=state is State.READY, stalled=state is State.STALLED, latest=self.stacks.latest(),
            quiet_s=self.progress.since_last_progress(t, self.log.news.quiet_before_s),
            budget_left_s=self.learner.budget_left(t))

    def _observe(self, t: float) -> Observation:
        reading, stacks = self._reading, self.stacks.latest()
        quiet = self.progress.since_last_progress(t, self.log.news.quiet_before_s)
        prefer = self._verdict.blocker.chain[-1:] if self._verdict and self._verdict.blocker else ()
        engine = self.log.engine.name if self.log.engine is not None else self._server_info.engine
        if engine != self._server_info.engine:
            self._server_info = replace(self._server_info, engine=engine)
        extra = [m for m in (self.processes.missing, self.stacks.missing) if m is not None]
        lines = list(self.log.ring.lines)
        return Observation(
            t=round(t, 3), wall=self.started_wall + t, started_wall=self.started_wall, server=self._server_info,
            procs=tuple(self.processes.procs), phases=phase_spans(self.log.ring.phases),
            phase_events=tuple(tp.event for tp in self.log.ring.phases), gpus=tuple(self.gpus.samples), stacks=stacks,
            stack_samples=tuple(self.stacks.ring.all()),
            stack_tree=merge_stacks(stacks.values(), prefer), ports=reading.ports, ports_text=reading.ports_text,
            progress=Progress(quiet, self.log.quiet_s(t), self.progress.recent_signals()),
            missing=merged_missing(reading.missing, extra), timings={**reading.timings, **self.stacks.timings},
            log=tuple(lines[-self.config.evidence_log_lines:]), log_tail=self.log.ring.raw_tail(),
            transitions=tuple(tr.record() for tr in self.transitions.items()), wait_since=self.stacks.wait_since(t, quiet),
            endpoint=reading.endpoint, preflight=self.config.preflight, stop=self._stop,
        )  # fmt: skip

    def _decide(self, obs: Observation) -> Verdict:
        at = where(obs)
        # the newest Python stack round; None when stacks cannot be taken at all
        stacks_at = self.stacks.newest_round_t() if self._reading.stacks_possible and not any(
            m.source == "stacks" for m in obs.missing) else None
        decision = self._decider.decide(
            build_evidence(obs), t=obs.t, wall=obs.wall, motion=self._motion, wait_since=obs.wait_since,
            steady=dict(self.stacks.steady), past=self.learner.past(obs), where=at, elapsed_s=elapsed_s(obs),
            stacks_at=stacks_at)
        self._verdict, self._raw = decision.verdict, decision.raw
        self.learner.mark_budget(obs, at)
        return decision.verdict

    def _publish(self, obs: Observation, verdict: Verdict) -> Observation:
        changed = self.transitions.offer(obs.t, obs.wall, verdict)
        if changed:  # the observation carries the transition it caused
            obs = replace(obs, transitions=tuple(tr.record() for tr in self.transitions.items()))
        self.observation, before = obs, self.view.latest().verdict_time
        self.view.publish(Published(
            verdict=verdict, verdict_time=self._wall() if changed or before is None else before, observation=obs,
            stacks=stacks_json(obs.stacks), stack_tree=obs.stack_tree, gpu_samples=obs.gpus, sampler_latencies=obs.timings,
            timeline={rank: [span.to_dict() for span in spans] for rank, spans in obs.phases.items()},
            bundle=lambda: bundle_files(obs)), tick=True)
        return obs

    # ---------------------------------------------------------------- read access and control

    @property
    def raw_verdict(self) -> Verdict | None:
        """What the classifier alone said at the last tick, before episodes (tests, the bench)."""
        return self._raw

    def observed_for(self) -> float:
        return self._clock() - self.started

    def until_budget_end(self) -> float | None:
        """Seconds from now until the current phase outruns its learned budget; None without one."""
        return self.learner.budget_left(self.observed_for())

    def resume_episode(self, episode: StallEpisode) -> None:
        """A stall episode an earlier watch of this server left open in the history (a daemon
        restarted mid-stall): it stays stalled until progress this watch sees (episodes.py)."""
        with self._lock:
            self._decider.episodes.resume(episode, self.observed_for(), self._wall())

    def sample_stacks_now(self) -> None:
        """Take one round of Python stacks synchronously (`collect`); still nonblocking for the targets."""
        targets = stack_targets(self.processes.procs, self.config.max_stack_targets)
        if targets and self._reading.stacks_possible:
            t = self.observed_for()
            round_ = self.sources.dump(targets, False)
            with self._lock:
                self.rounds.forget_except(self.stacks.store(t, round_, self.processes.procs))
                self.rounds.took_python(t)

    def bundle_files(self) -> dict[str, bytes]:
        """A bundle of the latest observation (`collect`, GET /bundle)."""
        with self._lock:
            obs = self.observation or self._observe(self.observed_for())
        return bundle_files(obs)

    def settle(self, timeout_s: float = 10.0) -> None:
        """Wait until the stack dumps in flight have finished (their results join the next tick)."""
        self.rounds.settle(timeout_s)

    def close(self) -> None:
        self.rounds.close()
        self.sources.close()
