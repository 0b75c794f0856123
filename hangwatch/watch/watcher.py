"""The watch loop: one `tick()` climbs the evidence ladder, builds `Evidence` and classifies it.

    watcher = Watcher(server, rules, WatchConfig())
    while True:
        verdict = watcher.tick()          # ~ms of work; stack dumps run beside it, never in it
        time.sleep(config.interval_s)

Every tick reads the cheap sources (log tail, process table, ports, NVML) and decides from
`ladder.py` whether Python stacks (nonblocking) or native stacks (pausing) are worth taking;
dumps run on a worker thread and their results join the next tick, so a slow py-spy never delays
the loop. What moved between two ticks (`progress.py`) gives `since_last_progress_s`. Memory stays
bounded (`history.py`), and the same `Evidence` type as a bundle goes to the same `classify`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any

from hangwatch.classify import classify
from hangwatch.errors import SourceUnavailable
from hangwatch.model import (
    Evidence,
    Finding,
    Missing,
    ProcessRecord,
    ProcessStack,
    State,
    Verdict,
)
from hangwatch.sources.procs import ProcessSampler
from hangwatch.watch import progress
from hangwatch.watch.capture import (
    build_evidence,
    bundle_files,
    stacks_json,
    timeline_json,
)
from hangwatch.watch.gather import LiveSources, StackTarget, stack_targets
from hangwatch.watch.ladder import (
    LadderConfig,
    looks_stalled,
    native_targets,
    python_dump_due,
)
from hangwatch.watch.published import StaticView
from hangwatch.watch.rings import GpuRing, LogRing, StackRing, VerdictChanges

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
    # Live, a rule that is not `immediate` decides "stalled" only after nothing has moved this
    # long, even without its own `for:`: at the first tick of a healthy start every rank is
    # "inside" some phase and its stack in some wait. A bundle (quiet time unknown) is unaffected.
    min_hold_s: float = 3.0


class Watcher:
    """Watches one server; `tick()` is called by one thread, `view` is read by any."""

    def __init__(self, server: Any, rules: Sequence[Any], config: WatchConfig = WatchConfig(), *,
                 clock=time.monotonic, wall=time.time):
        self.server, self.rules, self.config = server, live_rules(rules, config.min_hold_s), config
        self._clock, self._wall = clock, wall
        self.started = clock()
        self.started_wall = wall()
        self.sources = LiveSources(server, config)
        self.log = LogRing(self.sources.parse_lines)
        self.stacks = StackRing()
        self.gpus = GpuRing()
        self.transitions = VerdictChanges()
        self.view = StaticView(server_name(server), started_at=self.started_wall)
        self._sampler = ProcessSampler(proc_root=config.proc_root)
        self._procs: list[ProcessRecord] = []
        self._snapshot: progress.Snapshot | None = None
        self._stack_marks: dict[str, progress.StackMark] = {}
        self._last_progress_t: float | None = None
        self._signals: dict[str, float] = {}  # signal -> t last seen
        self._last_log_t = 0.0
        # Attached to a server already stuck: how long its log had been silent before we came.
        # Used only while nothing at all moves under our eyes (see since_last_progress).
        self._quiet_before_s = _log_age(self.sources.log_path, self.started_wall)
        self._log_grew = self._log_read_once = False
        self._compared = False
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hangwatch-stacks")
        self._dumping: Future | None = None
        self._native: Future | None = None
        self._last_dump_t: float | None = None
        self._last_native_t: dict[str, float] = {}
        self._verdict: Verdict | None = None
        self._evidence: Evidence | None = None
        self._lock = threading.RLock()

    # ---------------------------------------------------------------- the tick

    def tick(self, now: float | None = None) -> Verdict:
        # the lock keeps GET /bundle (another thread) from reading the rings while they change
        with self._lock:
            return self._tick(self._clock() if now is None else now)

    def _tick(self, now: float) -> Verdict:
        t = now - self.started
        self._read_log(t)
        self._read_procs()
        self.sources.read_ports()
        self.sources.read_health()
        self._read_gpus(t)
        self._collect_stacks(t)
        self._track_progress(t)
        self._schedule_stacks(t)
        self._await_first_stacks(t)
        verdict = self._classify(t)
        self._publish(t, verdict)
        return verdict

    def _read_log(self, t: float) -> None:
        data = self.sources.read_log()
        if not data:
            return
        # the first read is the tail that was already there; any later one is growth
        self._log_grew, self._log_read_once = self._log_grew or self._log_read_once, True
        self._last_log_t = t
        lines = self.log.feed(data)
        engine = self.sources.engine_for(self.log.lines)
        if engine is None:
            return
        if self.sources.engine_changed:
            # all lines read so far: this feed's when it alone overflowed the ring
            pool = lines if len(lines) >= len(self.log.lines) else list(self.log.lines)
            self.log.reset_phases(t, engine.phase_events(pool))
        elif lines:
            self.log.add_phases(t, engine.phase_events(lines, before=(p.event for p in self.log.phases)))

    def _read_procs(self) -> None:
        try:
            records = self._sampler.sample(self.sources.root_pid)
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
                mark = progress.StackMark(stored.sample, progress.motion_signature(stored), cpu.get(stack.label))
                self._stack_marks[stack.label] = mark
        self.sources.set_stack_missing(missing, any_ok=bool(dumps))
        kept = set(self.stacks.labels())  # processes that are gone stop costing memory
        self._stack_marks = {k: v for k, v in self._stack_marks.items() if k in kept}
        self._last_native_t = {k: v for k, v in self._last_native_t.items() if k in kept}

    def _schedule_stacks(self, t: float) -> None:
        targets = stack_targets(self._procs, self.config.max_stack_targets)
        if not targets or not self.sources.stacks_possible:
            return
        quiet = t - self._last_log_t
        if self._dumping is None and python_dump_due(t, self._last_dump_t, quiet, bool(self.stacks.labels()), self.config.ladder):
            self._last_dump_t = t
            self._dumping = self._pool.submit(self.sources.dump, targets, False)
        if self._native is None:
            self._schedule_native(t, targets)

    def _schedule_native(self, t: float, targets: list[StackTarget]) -> None:
        stalled = self._verdict is not None and self._verdict.state is State.STALLED
        if not looks_stalled(stalled, self.since_last_progress(t), self.config.ladder):
            return
        latest = {label: s.stack for label, s in self.stacks.latest().items()}
        labels = set(native_targets(latest, self._last_native_t, t, True, self.config.ladder))
        chosen = [target for target in targets if target.label in labels]
        if chosen:
            self._last_native_t.update({target.label: t for target in chosen})
            self._native = self._pool.submit(self.sources.dump, chosen, True)

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
        latest_gpu = self.gpus.latest()
        snapshot = progress.Snapshot(
            t=t,
            log_bytes=self.sources.log_bytes_seen,
            gpu_used_mib={g.index: g.memory_used_mib for g in latest_gpu.gpus if g.memory_used_mib is not None} if latest_gpu else {},
            procs=progress.proc_samples(self._procs),
            compilers=progress.compiler_cpu(self._procs),
            stacks=dict(self._stack_marks),
        )
        signals = progress.progress_signals(self._snapshot, snapshot, self.config.thresholds)
        self._compared = self._compared or self._snapshot is not None
        self._snapshot = snapshot
        if signals:
            self._last_progress_t = t
            self._signals.update(dict.fromkeys(signals, t))
        horizon = t - self.config.recent_signals_s
        self._signals = {s: seen for s, seen in self._signals.items() if seen >= horizon}

    def since_last_progress(self, t: float) -> float:
        if self._last_progress_t is None and self._compared:
            # nothing has moved since we came: the stall began when the log last moved, or earlier
            return t + self._quiet_before_s
        return progress.since_last_progress(self._last_progress_t, 0.0, t)

    def since_last_log(self, t: float) -> float:
        if not self._log_grew:
            return t + self._quiet_before_s
        return progress.since_last_progress(self._last_log_t, 0.0, t)

    def _classify(self, t: float) -> Verdict:
        self._evidence = build_evidence(self, t)
        verdict = classify(self._evidence, self.rules, now=self.started_wall + t)
        self._verdict = verdict
        return verdict

    def _publish(self, t: float, verdict: Verdict) -> None:
        changed = self.transitions.offer(t, self.started_wall + t, verdict)
        self.view.publish(
            verdict=verdict,
            verdict_time=self._wall() if changed or self.view.verdict_time() is None else self.view.verdict_time(),
            stacks=stacks_json(self.stacks.latest()),
            timeline=timeline_json(self.log.phases),
            gpu_samples=list(self.gpus.samples),
            sampler_latencies=dict(self.sources.latencies),
            bundle_files=self.bundle_files,
            tick=True,
        )

    # ---------------------------------------------------------------- read access

    @property
    def procs(self) -> list[ProcessRecord]:
        return self._procs

    @property
    def verdict(self) -> Verdict | None:
        return self._verdict

    @property
    def evidence(self) -> Evidence | None:
        return self._evidence

    def recent_signals(self) -> tuple[str, ...]:
        return tuple(sorted(self._signals))

    def observed_for(self) -> float:
        return self._clock() - self.started

    def bundle_files(self) -> dict[str, bytes]:
        with self._lock:
            return bundle_files(self)

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


def gpus_at(t: float, gpus: Sequence[Any]):  # -> GpuSample
    from hangwatch.model import GpuSample

    return GpuSample(t=round(t, 2), gpus=tuple(gpus))


def server_name(server: Any) -> str:
    engine = getattr(server, "engine", None) or "server"
    port = getattr(server, "port", None)
    host = getattr(server, "host", None) or "localhost"
    pid = getattr(server, "launcher_pid", None)
    return f"{engine} pid {pid} on {host}:{port}" if port else f"{engine} pid {pid}"


def _log_age(path: str | None, wall_now: float) -> float:
    """Seconds since the log file was last written; 0 when there is none (or it is newer)."""
    if not path:
        return 0.0
    try:
        return max(0.0, wall_now - os.stat(path).st_mtime)
    except OSError:
        return 0.0
