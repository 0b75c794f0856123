"""The watch loop: one `tick()` climbs the evidence ladder, builds `Evidence` and classifies it.

    watcher = Watcher(server, rules, WatchConfig())
    while True:
        observation, verdict = watcher.tick()   # ~ms of work; stack dumps run beside it, never in it
        time.sleep(config.interval_s)

Every tick reads the cheap sources (log tail, process table, ports, NVML) and decides from
`ladder.py` whether Python stacks (nonblocking) or native stacks (pausing) are worth taking;
dumps run on a worker thread and their results join the next tick, so a slow py-spy never delays
the loop. What moved between two ticks (`progress.py`) gives `since_last_progress_s`. Memory stays
bounded (`rings.py`), and the same `Evidence` type as a bundle goes to the same `classify`; the
live layers on top (episodes, the final blocker, learned budgets, the ETA) are in `decide.py`.
Each tick hands out one frozen `Observation` and the verdict: sinks read those, never this class.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any

from hangwatch.classify.verdict.memo import ScanMemo
from hangwatch.classify.verdict.stacktree import merge_stacks
from hangwatch.engines import rank_roles
from hangwatch.errors import SourceUnavailable
from hangwatch.model import (
    Evidence,
    Finding,
    Missing,
    ProcessRecord,
    ProcessStack,
    StallEpisode,
    State,
    Verdict,
)
from hangwatch.parse.logformats import read_phases
from hangwatch.sources.modelid import model_identity
from hangwatch.watch import progress
from hangwatch.watch.budgets import (
    Book,
    BudgetPolicy,
    PastStart,
    SetupKey,
    budgets,
    phase_durations,
    position,
    setup_key_of,
)
from hangwatch.watch.capture import build_evidence, bundle_files, phase_spans, stacks_json
from hangwatch.watch.decide import Decider
from hangwatch.watch.episodes import Motion
from hangwatch.watch.gather import LiveSources, Sources, StackTarget, engine_version, stack_targets
from hangwatch.watch.ladder import (
    LadderConfig,
    looks_stalled,
    native_targets,
    python_dump_due,
    rescan_due,
)
from hangwatch.watch.lognews import LogNews, file_age
from hangwatch.watch.observation import (
    Observation,
    Progress,
    ServerInfo,
    StackSnapshot,
    TransitionRecord,
)
from hangwatch.watch.published import StaticView
from hangwatch.watch.rings import GpuRing, LogRing, StackRing, VerdictChanges
from hangwatch.watch.skim import phase_needles

__all__ = ["WatchConfig", "Watcher"]


@dataclass(frozen=True)
class WatchConfig:
    interval_s: float = 1.0
    ladder: LadderConfig = field(default_factory=LadderConfig)
    thresholds: progress.Thresholds = field(default_factory=progress.Thresholds)
    stack_timeout_s: float = 5.0
    log_path: str | None = None  # overrides the log discover() found
    initial_log_bytes: int = 8 << 20  # of an existing log, only the tail is read at start
    evidence_log_lines: int = 5_000  # newest lines handed to the classifier (phase lines always)
    recent_signals_s: float = 10.0  # a progress signal stays in the evidence this long
    proc_root: str = "/proc"
    # what `hangwatch preflight` found before this launch: evidence for the live rules
    preflight: tuple[Finding, ...] = ()
    ss: str = "ss"
    gpus: bool = True
    nvml: Any = None  # a pynvml-like module (tests: RecordedNvml); None = the real one
    max_stack_targets: int = 64
    first_stacks_wait_s: float = 1.0
    # First look: a watch that begins takes one reading of everything that can move (log, /proc
    # counters, GPU memory, a stack round) and compares the first tick's with it this much later,
    # so its first verdict already knows what moved (a late attach to a stuck server is `stalled`
    # at once, a silent compile is not). Only on the real clock (`tick()` without `now`).
    first_look_s: float = 1.0
    # Live, a rule that is not `immediate` decides "stalled" only after nothing has moved this
    # long, even without its own `for:`: at the first tick of a healthy start every rank is
    # "inside" some phase and its stack in some wait. A bundle (quiet time unknown) is unaffected.
    min_hold_s: float = 3.0
    learn: bool = True  # learned budgets and the ETA from past starts (`--no-learn`: off)
    budget_policy: BudgetPolicy = field(default_factory=BudgetPolicy)


class Watcher:
    """Watches one server; `tick()` is called by one thread, `view` is read by any.

    `sources` (default: the live machine) and `book` (past starts, for learned budgets and the
    ETA; None: no learning) are injected; `clock`/`wall` too, so tests drive it tick by tick."""

    def __init__(self, server: Any, rules: Sequence[Any], config: WatchConfig = WatchConfig(), *,
                 sources: Sources | None = None, book: Book | None = None,
                 clock=time.monotonic, wall=time.time):
        self.server, self.config = server, config
        self.rules = live_rules(rules, config.min_hold_s)
        self._clock, self._wall = clock, wall
        self.started = clock()
        self.started_wall = wall()
        self.sources: Sources = sources if sources is not None else LiveSources(
            server, config, rules=self.rules)
        # the classifier sees the newest evidence_log_lines (phase events are kept apart): more would
        # only be parsed to sit unused
        self.log = LogRing(self.sources.parse_lines, max_lines=config.evidence_log_lines, overflow_needles=phase_needles())
        self.stacks = StackRing()
        self.gpus = GpuRing()
        self.transitions = VerdictChanges()
        self.view = StaticView(server_name(server), started_at=self.started_wall)
        self._book = book if config.learn else None
        # this server's log caches, so a tick classifies only the lines that arrived (classify.memo)
        self.scan_memo = ScanMemo()
        self._decider = Decider(self.rules, config.min_hold_s, config.budget_policy, memo=self.scan_memo)
        self._server_info = server_info(server)
        self._procs: list[ProcessRecord] = []
        self._snapshot: progress.Snapshot | None = None
        self._stack_marks: dict[str, progress.StackMark] = {}
        self._wait_began: dict[str, float] = {}  # label -> t its current stack was first sampled
        self._steady: dict[str, int] = {}  # label -> samples in a row with the same stack
        self._first_wait: set[str] = set()  # labels still in the wait their first sample showed
        self._last_progress_t: float | None = None
        self._signals: dict[str, float] = {}  # signal -> t last seen
        self._motion: list[Motion] = []  # this tick's real progress, for the episode
        self._last_log_t = 0.0
        self._first_read_t: float | None = None
        # Attached to a server already stuck: how long its log had been silent before we came.
        # Used only while nothing at all moves under our eyes (see since_last_progress).
        # Read lines are news (a new kind of line, a counter that moved) or repeats (lognews.py).
        self._news = LogNews(file_age(self.sources.log_path, self.started_wall))
        self._log_grew = self._log_read_once = False
        self._compared = False
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hangwatch-stacks")
        self._dumping: Future | None = None
        self._native: Future | None = None
        self._last_dump_t: float | None = None
        self._last_rescan_t: float | None = None
        self._last_native_t: dict[str, float] = {}
        self._verdict: Verdict | None = None
        self._observation: Observation | None = None
        self._raw: Verdict | None = None
        self._setup: SetupKey | None = None
        self._version: str | None = None  # the engine's release, read once: its log formats read the phases
        self._past: list[PastStart] | None = None
        self._learned = False
        self._budget_end: float | None = None  # watch time the current phase outruns its learned budget
        self._lock = threading.RLock()
        self._stop: str | None = None  # a stop someone asked for (note_stop): its exit is no crash

    def note_stop(self, what: str) -> None:
        """A stop was asked for (`hangwatch run` forwarding Ctrl-C or SIGTERM): the exit that
        follows is `stopped`, unless something crashes. A start whose rank had already died
        crashed before the stop: its end is no stop's. Safe from a signal handler: no lock taken."""
        if any(p.exited and p.role in rank_roles() for p in self._procs):
            return
        self._stop = self._stop or what

    # ---------------------------------------------------------------- the tick

    def tick(self, now: float | None = None) -> tuple[Observation, Verdict]:
        """One round: read the sources, decide, publish; returns what it saw and the verdict."""
        with self._lock:
            if now is None and self._snapshot is None and self.config.first_look_s > 0:
                self._first_look()
            return self._tick(self._clock() if now is None else now)

    def _first_look(self) -> None:
        """The baseline reading (see WatchConfig.first_look_s): nothing in it counts as progress."""
        t = self._clock() - self.started
        # the stack round first: its py-spy runs (another process) while this one reads the log
        self._read_procs()
        self._schedule_stacks(t)
        self._read_log(t)
        self._read_gpus(t)
        deadline = time.monotonic() + self.config.stack_timeout_s
        while self._dumping is not None and not self._dumping.done() and time.monotonic() < deadline:
            wait([self._dumping], timeout=0.25)
            self._read_procs()  # a process that dies meanwhile is known by what it was (its title, rank)
        self._collect_stacks(t)
        self._track_progress(t)
        # Motion ends the look early: the comparison it waits for could only say "nothing moved"
        # by waiting its whole length, and something already has (progress.first_look_moved).
        end = time.monotonic() + self.config.first_look_s - (self._clock() - self.started - t)
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(left, progress.FIRST_LOOK_POLL_S))
            if left > progress.FIRST_LOOK_POLL_S and self._moved_in_look():
                break

    def _moved_in_look(self) -> bool:
        """The log (its news), the known processes and GPU memory read again: moved since the baseline?"""
        t = self._clock() - self.started
        self._read_log(t)
        self._read_procs()  # its threads' reads too (a rank loading weights): a rescan reads them
        self._read_gpus(t)
        return progress.first_look_moved(self._snapshot, self._snapshot_at(t), self.config.thresholds)

    def _tick(self, now: float) -> tuple[Observation, Verdict]:
        t = now - self.started
        self._motion = []
        self._read_log(t)
        rescan = rescan_due(t, self._last_rescan_t, self._ready(), self.config.ladder)
        self._last_rescan_t = t if rescan else self._last_rescan_t
        self._read_procs(rescan)
        if rescan:
            self.sources.read_ports()
        self.sources.read_health()
        self._read_gpus(t)
        self._collect_stacks(t)
        self._track_progress(t)
        self._schedule_stacks(t)
        self._await_first_stacks(t)
        observation = self._observe(t)
        verdict = self._decide(observation)
        self._learn(observation, verdict)
        self._publish(observation, verdict)
        return self._observation or observation, verdict

    def _read_log(self, t: float) -> None:
        data = self.sources.read_log()
        if not data:
            return
        lines = self.log.feed(data)
        # the first read is the tail that was already there; a later one is growth when it is news
        news = self._news.feed(lines, bytes_read=True)
        if news or not self._log_read_once:
            self._last_log_t = t
        self._log_grew, self._log_read_once = self._log_grew or news > 0, True
        self._first_read_t = t if self._first_read_t is None else self._first_read_t
        engine = self.sources.engine_for(self.log.lines)
        if engine is None:
            return
        if self.sources.engine_changed:
            # all lines read so far: this feed's when it alone overflowed the ring
            pool = lines if len(lines) >= len(self.log.lines) else list(self.log.lines)
            self.log.reset_phases(t, read_phases(engine, pool, version=self._engine_version(engine.name)))
        elif lines:
            events = read_phases(engine, lines, before=(p.event for p in self.log.phases),
                                 version=self._engine_version(engine.name))
            self.log.add_phases(t, events)
            # a phase line is progress of the start (other lines may be a warning repeated forever)
            self._motion.extend(Motion(f"phase:{e.phase.value}", t) for e in events)

    def _engine_version(self, name: str) -> str | None:
        """The engine's release installed beside the launcher's Python; None when it cannot be told."""
        if self._version is None:
            self._version = engine_version(name, getattr(getattr(self.sources, "server", None), "cmdline", None))
        return None if self._version == "unknown" else self._version

    def _read_procs(self, rescan: bool = True) -> None:
        try:
            records = self.sources.read_procs(rescan=rescan)
            self._procs = pin_launcher(records, self.sources.root_pid, self._procs)
            self.sources.clear_missing("procs")
        except SourceUnavailable as exc:
            # The launcher is gone. Whatever was seen stays, marked exited: that is a crash to report.
            self._procs = [replace(p, alive=False, state=None) if p.alive else p for p in self._procs]
            if not self._procs:
                self.sources.note_missing(exc)
        except OSError as exc:  # out of file descriptors (EMFILE) and the like: transient, the server is not gone
            self.sources.note_missing(SourceUnavailable("procs", f"cannot read /proc now: {exc.strerror or exc}",
                                                        "raise the open-file limit (LimitNOFILE=)"))

    def _read_gpus(self, t: float) -> None:
        gpus = self.sources.read_gpus()
        if gpus is not None:
            self.gpus.add(gpus_at(t, gpus))

    # ---------------------------------------------------------------- stacks (rungs 2 and 3)

    def _collect_stacks(self, t: float) -> None:
        for attr in ("_dumping", "_native"):
            future: Future | None = getattr(self, attr)
            if future is None or not future.done():
                continue
            setattr(self, attr, None)
            self._store_stacks(t, *future.result())

    def _store_stacks(self, t: float, dumps: list[tuple[ProcessStack, bytes]], missing: list[Missing]) -> None:
        cpu = {p.rank or str(p.pid): p.cpu_time_s for p in self._procs}
        for stack, raw in dumps:
            stored = self.stacks.add(stack, raw, t)
            if not stack.native:
                mark = progress.StackMark(stored.sample, progress.motion_signature(stored), cpu.get(stack.label), t,
                                          progress.wait_signature(stored), progress.thread_marks(stored))
                self._note_wait(stack.label, mark, t)
                self._stack_marks[stack.label] = mark
        self.sources.set_stack_missing(missing, any_ok=bool(dumps))
        kept = set(self.stacks.labels())  # processes that are gone stop costing memory
        self._stack_marks = {k: v for k, v in self._stack_marks.items() if k in kept}
        self._wait_began = {k: v for k, v in self._wait_began.items() if k in kept}
        self._steady = {k: v for k, v in self._steady.items() if k in kept}
        self._first_wait &= kept
        self._last_native_t = {k: v for k, v in self._last_native_t.items() if k in kept}

    def _note_wait(self, label: str, mark: progress.StackMark, t: float) -> None:
        """How long each process has shown the same stack: the final blocker's `for_s`."""
        before = self._stack_marks.get(label)
        if before is not None and before.where == mark.where:
            self._steady[label] = self._steady.get(label, 1) + 1
        else:
            self._wait_began[label], self._steady[label] = t, 1
            # first seen in this wait: it may have waited since the last progress, before we came
            if before is None:
                self._first_wait.add(label)
            else:
                self._first_wait.discard(label)

    def _schedule_stacks(self, t: float) -> None:
        targets = stack_targets(self._procs, self.config.max_stack_targets)
        if not targets or not self.sources.stacks_possible:
            return
        quiet = t - self._last_log_t
        if self._dumping is None and python_dump_due(t, self._last_dump_t, quiet, bool(self.stacks.labels()),
                                                     self.config.ladder, ready=self._ready()):
            self._last_dump_t = t
            self._dumping = self._pool.submit(self.sources.dump, targets, False)
        if self._native is None:
            self._schedule_native(t, targets)

    def _schedule_native(self, t: float, targets: list[StackTarget]) -> None:
        stalled = self._verdict is not None and self._verdict.state is State.STALLED
        if not looks_stalled(stalled, self.since_last_progress(t), self.config.ladder, self._budget_left(t)):
            return
        latest = {label: s.stack for label, s in self.stacks.latest().items()}
        labels = set(native_targets(latest, self._last_native_t, t, True, self.config.ladder))
        chosen = [target for target in targets if target.label in labels]
        if chosen:
            self._last_native_t.update({target.label: t for target in chosen})
            self._native = self._pool.submit(self.sources.dump, chosen, True)

    def _ready(self) -> bool:
        """The last verdict was `ready`: ports, the tree scan and stacks at a sidecar's slow pace (ladder)."""
        return self._verdict is not None and self._verdict.state is State.READY

    def _budget_left(self, t: float) -> float | None:
        """Seconds left of the current phase's learned budget, as of the last verdict."""
        if self._budget_end is None:
            return None
        return self._budget_end - t

    def _await_first_stacks(self, t: float) -> None:
        """The first verdict is worth its stacks (attaching to a server that is already stuck):
        wait a little for the first round, never the full py-spy timeout."""
        if self._dumping is None or self.stacks.labels():
            return
        done, _ = wait([self._dumping], timeout=self.config.first_stacks_wait_s)
        if done:
            self._collect_stacks(t)

    def sample_stacks_now(self) -> None:
        """Take one round of Python stacks synchronously (`collect`); still nonblocking for the targets."""
        targets = stack_targets(self._procs, self.config.max_stack_targets)
        if targets and self.sources.stacks_possible:
            t = self._clock() - self.started
            dumps = self.sources.dump(targets, False)
            with self._lock:
                self._store_stacks(t, *dumps)
                self._last_dump_t = t

    # ---------------------------------------------------------------- progress and verdict

    def _track_progress(self, t: float) -> None:
        snapshot = self._snapshot_at(t)
        signals = progress.progress_signals(self._snapshot, snapshot, self.config.thresholds)
        self._motion.extend(_motion(self._snapshot, signals))
        self._compared = self._compared or self._snapshot is not None
        self._snapshot = snapshot
        if signals:
            self._last_progress_t = t
            self._signals.update(dict.fromkeys(signals, t))
        horizon = t - self.config.recent_signals_s
        self._signals = {s: seen for s, seen in self._signals.items() if seen >= horizon}

    def _snapshot_at(self, t: float) -> progress.Snapshot:
        latest_gpu = self.gpus.latest()
        return progress.Snapshot(
            t=t,
            log_bytes=self.sources.log_bytes_seen,
            log_news=self._news.total,
            gpu_used_mib={g.index: g.memory_used_mib for g in latest_gpu.gpus if g.memory_used_mib is not None} if latest_gpu else {},
            procs=progress.proc_samples(self._procs),
            compilers=progress.compiler_cpu(self._procs),
            stacks=dict(self._stack_marks),
        )

    def since_last_progress(self, t: float) -> float:
        if self._last_progress_t is None and self._compared:
            # nothing has moved since we came: the stall began when the log last moved, or earlier
            return t + self._news.quiet_before_s
        return progress.since_last_progress(self._last_progress_t, 0.0, t)

    def since_last_log(self, t: float) -> float:
        if not self._log_grew:
            return t + self._news.quiet_before_s
        return progress.since_last_progress(self._last_log_t, 0.0, t)

    # ---------------------------------------------------------------- observe, decide, publish

    def _observe(self, t: float) -> Observation:
        latest = self.stacks.latest()
        stacks = {label: sample.stack for label, sample in latest.items()}
        prefer = self._verdict.blocker.chain[-1:] if self._verdict and self._verdict.blocker else ()
        lines = list(self.log.lines)
        return Observation(
            t=round(t, 3), wall=self.started_wall + t, started_wall=self.started_wall, server=self._server_with_engine(),
            procs=tuple(self._procs), phases=phase_spans(self.log.phases),
            phase_events=tuple(tp.event for tp in self.log.phases), gpus=tuple(self.gpus.samples), stacks=stacks,
            stack_samples=tuple(StackSnapshot(s.stack, s.raw) for s in self.stacks.all()),
            stack_tree=merge_stacks(stacks.values(), prefer), ports=self.sources.ports, ports_text=self.sources.ports_text,
            progress=Progress(self.since_last_progress(t), self.since_last_log(t), self.recent_signals()),
            missing=self.sources.missing(), timings=dict(self.sources.latencies),
            log=tuple(lines[-self.config.evidence_log_lines:]), log_tail=self.log.raw_tail(),
            transitions=tuple(_record(tr) for tr in self.transitions.items()),
            wait_since=self._wait_since(t),
            endpoint=self.sources.endpoint, preflight=self.config.preflight, stop=self._stop,
        )  # fmt: skip

    def _wait_since(self, t: float) -> dict[str, float]:
        """How long each process has shown its stack; a wait seen since its first sample counts
        from the last progress (attached to a stuck server: "for 89s", not the 9 s we watched)."""
        quiet = self.since_last_progress(t)
        return {label: round(max(t - began, quiet) if label in self._first_wait else t - began, 2)
                for label, began in self._wait_began.items()}

    def _server_with_engine(self) -> ServerInfo:
        engine = self.sources.engine_name
        if engine != self._server_info.engine:
            self._server_info = replace(self._server_info, engine=engine)
        return self._server_info

    def _decide(self, obs: Observation) -> Verdict:
        where = position(_rows(obs), obs.t)
        decision = self._decider.decide(
            build_evidence(obs), t=obs.t, wall=obs.wall, motion=self._motion, wait_since=obs.wait_since,
            steady=dict(self._steady), past=self._past_starts(obs), where=where, elapsed_s=self._elapsed(obs),
            stacks_at=self._stacks_at(),
        )
        self._verdict, self._raw = decision.verdict, decision.raw
        budget = budgets(self._past or [], self.config.budget_policy).get(where.phase) if where else None
        # the same test as the decider's: in the phase, or without progress, longer than the budget
        spent = max(where.in_phase_s, obs.progress.since_last_progress_s) if where else 0.0
        self._budget_end = obs.t + budget - spent if budget is not None else None
        return decision.verdict

    def _stacks_at(self) -> float | None:
        """Watch time of the newest Python stack round; None when stacks cannot be taken at all."""
        if not self.sources.stacks_possible or "stacks" in {m.source for m in self.sources.missing()}:
            return None
        marks = [m.t for m in self._stack_marks.values() if m.t is not None]
        return max(marks) if marks else float("-inf")

    def _publish(self, obs: Observation, verdict: Verdict) -> None:
        changed = self.transitions.offer(obs.t, obs.wall, verdict)
        if changed:  # the observation carries the transition it caused
            obs = replace(obs, transitions=tuple(_record(tr) for tr in self.transitions.items()))
        self._observation = obs
        self.view.publish(
            verdict=verdict,
            verdict_time=self._wall() if changed or self.view.verdict_time() is None else self.view.verdict_time(),
            stacks=stacks_json(obs.stacks),
            stack_tree=obs.stack_tree,
            timeline={rank: [span.to_dict() for span in spans] for rank, spans in obs.phases.items()},
            gpu_samples=list(obs.gpus),
            sampler_latencies=dict(obs.timings),
            bundle_files=lambda: bundle_files(obs),
            observation=obs,
            tick=True,
        )

    # ---------------------------------------------------------------- learning from past starts

    def _setup_key(self, obs: Observation) -> SetupKey | None:
        if self._setup is None and obs.server.engine:
            flags = obs.server.flags
            gpu = obs.gpus[-1].gpus[0].name if obs.gpus and obs.gpus[-1].gpus else None
            model = flags.get("model-path") or flags.get("model") or "unknown"
            self._setup = setup_key_of(obs.server.engine, engine_version(obs.server.engine, obs.server.cmdline),
                                       flags, model_identity(str(model), obs.server.launcher_pid), gpu)
        return self._setup

    def _past_starts(self, obs: Observation) -> list[PastStart]:
        if self._book is None:
            return []
        if self._past is None:
            key = self._setup_key(obs)
            if key is None:
                return []
            self._past = self._book.past_starts(key)
        return self._past

    def _elapsed(self, obs: Observation) -> float | None:
        """Seconds since the launcher started (the ETA counts from there); None when unknown."""
        launcher = next((p for p in obs.procs if p.role == "launcher" and p.create_time), None)
        return max(0.0, obs.wall - launcher.create_time) if launcher and launcher.create_time else None

    def _learn(self, obs: Observation, verdict: Verdict) -> None:
        """The first time the start is ready: keep its phase durations for the next start."""
        if self._book is None or self._learned or verdict.state is not State.READY:
            return
        self._learned = True
        key = self._setup_key(obs)
        elapsed = self._elapsed(obs)
        # phases already under way when we attached would be undercounted; from the launch, all count
        seen_from = -1.0 if elapsed is not None and elapsed - obs.t < 3.0 else (self._first_read_t or 0.0)
        durations = phase_durations(_rows(obs), seen_from, obs.t)
        if key is not None and durations:
            self._book.record_start(key, PastStart(elapsed if elapsed is not None else obs.t, durations), at=obs.wall)

    # ---------------------------------------------------------------- read access

    @property
    def procs(self) -> list[ProcessRecord]:
        return self._procs

    @property
    def verdict(self) -> Verdict | None:
        return self._verdict

    @property
    def raw_verdict(self) -> Verdict | None:
        """What the classifier alone said at the last tick, before episodes (tests, the bench)."""
        return self._raw

    @property
    def observation(self) -> Observation | None:
        """The latest tick's observation (what every sink reads)."""
        return self._observation

    @property
    def evidence(self) -> Evidence | None:
        return build_evidence(self._observation) if self._observation else None

    def recent_signals(self) -> tuple[str, ...]:
        return tuple(sorted(self._signals))

    def observed_for(self) -> float:
        return self._clock() - self.started

    def until_budget_end(self) -> float | None:
        """Seconds from now until the current phase outruns its learned budget; None without one."""
        return self._budget_left(self.observed_for())

    def resume_episode(self, episode: StallEpisode) -> None:
        """A stall episode an earlier watch of this server left open in the history (a daemon
        restarted mid-stall): it stays stalled until progress this watch sees (episodes.py)."""
        with self._lock:
            self._decider.episodes.resume(episode, self.observed_for(), self._wall())

    def bundle_files(self) -> dict[str, bytes]:
        """A bundle of the latest observation (`collect`, GET /bundle)."""
        with self._lock:
            obs = self._observation or self._observe(self.observed_for())
        return bundle_files(obs)

    def settle(self, timeout_s: float = 10.0) -> None:
        """Wait until the stack dumps in flight have finished (their results join the next tick)."""
        pending = [f for f in (self._dumping, self._native) if f is not None]
        if pending:
            wait(pending, timeout=timeout_s)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.sources.close()


def live_rules(rules: Sequence[Any], min_hold_s: float) -> list[Any]:
    """The rules with the live hold floor (see WatchConfig.min_hold_s); immediate and
    `state: progressing` rules keep theirs: one proves a stall, the other is not one."""
    out = []
    for rule in rules:
        if not rule.immediate and rule.state is not State.PROGRESSING and rule.hold_s < min_hold_s:
            rule = replace(rule, hold_s=min_hold_s)
        out.append(rule)
    return out


def pin_launcher(records: list[ProcessRecord], root_pid: int, previous: Sequence[ProcessRecord]) -> list[ProcessRecord]:
    """Keep who a process was once it exits: a zombie's command line is gone (its title with it),
    so without this a dead scheduler reads as "other" and the launcher we started as not one.
    The root we watch is the launcher, whatever its command line says (`run` may start a wrapper)."""
    before = {(p.pid, p.create_time): p for p in previous}
    out = []
    for record in records:
        known = before.get((record.pid, record.create_time))
        if not record.alive and known is not None:
            record = replace(record, cmdline=known.cmdline, role=known.role, rank=known.rank)
        if record.pid == root_pid and record.role != "launcher":
            record = replace(record, role="launcher", rank=None)
        out.append(record)
    return out


def server_info(server: Any) -> ServerInfo:
    from hangwatch.engines import env_prefixes
    from hangwatch.redact import filter_env

    return ServerInfo(
        name=server_name(server), engine=getattr(server, "engine", None), launcher_pid=server.launcher_pid,
        host=getattr(server, "host", None), port=getattr(server, "port", None) or None,
        cmdline=getattr(server, "cmdline", None), flags=dict(getattr(server, "flags", None) or {}),
        env=dict(filter_env(getattr(server, "env", None) or {}, env_prefixes())), log_path=getattr(server, "log_path", None),
        host_name=getattr(server, "host_name", None),
    )  # fmt: skip


def _rows(obs: Observation) -> dict[str, list[tuple[str, float, float | None]]]:
    return {rank: [(s.phase, s.at, s.end) for s in spans] for rank, spans in obs.phases.items()}


def _record(tr: Any) -> TransitionRecord:
    v = tr.verdict
    return TransitionRecord(tr.t, tr.wall, v.state.value, v.cause, v.rule, tuple(v.ranks), v.phase.value if v.phase else None)


def _motion(before: progress.Snapshot | None, signals: Sequence[str]) -> list[Motion]:
    """Real progress with the start of the interval it moved in; plain log growth is not
    (a warning repeated forever moves the log); a phase line is (see _read_log)."""
    if before is None:
        return []
    out = []
    for signal in signals:
        if signal == "log":
            continue
        mark = before.stacks.get(signal[6:]) if signal.startswith("stack:") else None
        since = mark.t if mark is not None and mark.t is not None else before.t
        out.append(Motion(signal, since))
    return out


def gpus_at(t: float, gpus: Sequence[Any]):  # -> GpuSample
    from hangwatch.model import GpuSample

    return GpuSample(t=round(t, 2), gpus=tuple(gpus))


def server_name(server: Any) -> str:
    engine = getattr(server, "engine", None) or "server"
    port = getattr(server, "port", None)
    host = getattr(server, "host", None) or "localhost"
    pid = getattr(server, "launcher_pid", None)
    return f"{engine} pid {pid} on {host}:{port}" if port else f"{engine} pid {pid}"


def server_pid(name: str) -> int | None:
    """The launcher pid in a `server_name` label (a history file's records name servers by it)."""
    found = re.search(r"\bpid (\d+)\b", name)
    return int(found.group(1)) if found else None
