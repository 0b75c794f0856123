"""Derived views of one `Evidence`, computed at most once per classify call.

Atoms read the evidence through a `Context` so that the per-rank phase positions, the latest
stack of each rank, the GPU memory trend and the flag aliases are worked out once, not per rule.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from hangwatch.classify.verdict import logscan
from hangwatch.classify.verdict.memo import ScanMemo
from hangwatch.engines import MAIN, flag_aliases, get_engine, rank_positions, rank_roles, ready_seen, server_port
from hangwatch.engines.base import flag_port
from hangwatch.model import (
    Evidence,
    GpuSample,
    LogLine,
    Phase,
    PhaseEvent,
    ProcessRecord,
    ProcessStack,
    Source,
)
from hangwatch.parse.failures import Failure, read_failures
from hangwatch.parse.pasted import compute_capability
from hangwatch.parse.repeats import RepeatedWait, repeated_waits

META_FLAG_FALLBACKS = ("nnodes", "tp")  # flags a meta-only bundle still knows
TREND_WINDOW_S = 120.0  # the GPU memory trend looks at the last two minutes of samples
TREND_MIN_MIB = 64.0  # smaller changes are allocator noise, not progress
# A line that only reports that a process died or exited, in the shapes launchers, supervisors and
# the kernel print it; after a first failure it is what followed from it.
DEATH_REPORT = re.compile(
    r"(?i)^\W*killed\W*$|\b(?:died|is dead|exited|was killed|been killed|terminated)\b|"
    r"\bexit ?code:? ?-?\d+|exitcode[=:] ?-?\d+|hit an exception|signal \d+\b|\bSIG(?:KILL|TERM|QUIT|ABRT)\b"
)
_RANK_LABEL = re.compile(r"^(?:[A-Z]+\d+_)*[A-Z]+\d+$")  # TP0, DP0_TP3, PP1_TP2

Position = tuple[Phase, bool]  # (phase, ended)


@dataclass(frozen=True)
class GpuView:
    """One GPU as the rules see it: the latest NVML sample, or meta.json when there is none."""

    index: int | None
    name: str | None
    compute_capability: str | None
    utilization_pct: float | None
    memory_used_mib: float | None
    pids: tuple[int, ...]
    source: Source


@dataclass(frozen=True)
class Trend:
    direction: str  # rising / flat / falling
    first_mib: float
    last_mib: float
    seconds: float


def position_key(position: Position) -> tuple[int, bool]:
    phase, ended = position
    return (phase.order, ended)


def _engine(name: str | None) -> Any:
    try:
        return get_engine(name) if name else None
    except ValueError:
        return None


def _numeric(value: Any) -> float | None:
    try:
        number = None if isinstance(value, bool) or value is None else float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number is None or math.isfinite(number) else None  # `Infinity`/`NaN` from a bundle


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def rewraps(root: Failure, failure: Failure, after: int) -> bool:
    """`failure` is the root raised again by the step it failed in, on the next line: `Exception:
    Capture cuda graph failed: CUDA error: invalid resource handle` after the CUDA error. The
    wrapper names the phase; quoting it quotes the first failure."""
    if failure is root or failure.kind != "exception" or min(failure.lines, default=failure.lineno) != after + 1:
        return False
    if root.cuda is not None and failure.cuda == root.cuda:
        return True
    if root.errno is not None and failure.errno == root.errno:
        return True
    said = (root.message or "").strip()[:40]
    return len(said) >= 12 and said in failure.text


def memory_trend(samples: tuple[GpuSample, ...]) -> Trend | None:
    points = sorted(
        (s.t, sum(g.memory_used_mib for g in s.gpus if g.memory_used_mib is not None))
        for s in samples
        if any(g.memory_used_mib is not None for g in s.gpus)
    )
    recent = [p for p in points if p[0] >= points[-1][0] - TREND_WINDOW_S] if points else []
    recent = recent if len(recent) >= 2 else points[-2:]
    if len(recent) < 2:
        return None
    (t0, first), (t1, last) = recent[0], recent[-1]
    delta = last - first
    direction = "flat" if abs(delta) < TREND_MIN_MIB else ("rising" if delta > 0 else "falling")
    return Trend(direction, first, last, t1 - t0)


# Signals a launcher or watchdog sends when it tears the tree down: an exit by one of them follows
# another failure; an exit by its own code or a crash signal started one.
_TEARDOWN_CODES = frozenset({-9, -15, -3, -2, -1})
_NOT_SERVER = frozenset({"compiler", "other"})


def exit_roles(procs: tuple[ProcessRecord, ...]) -> dict[int, str]:
    dead = [p for p in procs if p.role not in _NOT_SERVER and p.exited]
    if len(dead) < 2:
        return {}
    timed = [p for p in dead if p.exit_time is not None]
    if timed:
        first = min(timed, key=lambda p: p.exit_time or 0.0)
    else:
        # no exit times: one process that ended by itself while the others were torn down
        own = [p for p in dead if p.exit_code is not None and p.exit_code not in _TEARDOWN_CODES]
        if len(own) != 1:
            return {}
        first = own[0]
    return {p.pid: "root" if p is first else "consequence" for p in dead}


class Context:
    """The evidence plus views derived from it; build one per classify call. `memo`, the caller's
    (see classify.memo), only saves work across calls: the views are the same without it."""

    def __init__(self, evidence: Evidence, memo: ScanMemo | None = None):
        self.evidence = evidence
        self.memo = memo
        self._hits: dict[re.Pattern[str], list[LogLine]] = {}

    # ------------------------------------------------------------ basics

    @property
    def meta(self) -> Mapping[str, Any]:
        return self.evidence.meta

    @cached_property
    def engine(self) -> str | None:
        return self.evidence.engine or _text(self.meta.get("engine"))

    @cached_property
    def quiet_s(self) -> float | None:
        """Seconds since the last progress; None when unknown (a pasted report of a hang)."""
        if self.evidence.since_last_progress_s is not None:
            return self.evidence.since_last_progress_s
        return _numeric(self.meta.get("since_last_progress_s"))

    @cached_property
    def log_quiet_s(self) -> float | None:
        """Seconds since the log last grew; None when unknown."""
        if self.evidence.log_quiet_s is not None:
            return self.evidence.log_quiet_s
        return _numeric(self.meta.get("log_quiet_s"))

    @cached_property
    def only_meta(self) -> bool:
        ev = self.evidence
        return not (ev.log or ev.stacks or ev.gpus or ev.procs)

    # ------------------------------------------------------------ log

    @cached_property
    def _chunks(self) -> list[logscan.Chunk]:
        return logscan.chunks(self.evidence.log, self.memo.chunks if self.memo is not None else None)

    def log_hits(self, pattern: re.Pattern[str]) -> list[LogLine]:
        """Lines where `pattern` matches, in log order (see `logscan` for why not a plain loop)."""
        if pattern not in self._hits:
            self._hits[pattern] = [line for chunk in self._chunks for line in logscan.hits(chunk, pattern)]
        return self._hits[pattern]

    @cached_property
    def repeated_waits(self) -> list[RepeatedWait]:
        """The waits the log keeps repeating, still going on (the `log.waits` atom): a wait that
        still goes on is at the log's end, so its newest 2000 lines are enough."""
        return repeated_waits(self.evidence.log[-2000:], min_count=1)

    @cached_property
    def failures(self) -> tuple[Failure, ...]:
        """The log's failures in order, one marked `root` (the first that is not a consequence)."""
        return read_failures(self.evidence.log, self.memo.failures if self.memo is not None else None)

    @cached_property
    def root_failure(self) -> Failure | None:
        return next((f for f in self.failures if f.role == "root"), None)

    @cached_property
    def failure_roles(self) -> dict[int, str]:
        """Log line number -> the role of the failure that spans it. A line after the root failure
        that only reports a death or an exit (`Killed`, `rank 1 died`, `Child process ... died`,
        `TP0 rank is dead`) is a consequence of it too, even where the failure reader does not
        count it as a failure: a process that died after the first error died of it."""
        roles: dict[int, str] = {}
        for failure in self.failures:
            for lineno in failure.lines:
                if roles.get(lineno) != "root":
                    roles[lineno] = failure.role or "consequence"
        root = self.root_failure
        if root is not None and not root.consequence:
            after = max(root.lines, default=root.lineno)
            for failure in self.failures:
                if rewraps(root, failure, after):
                    roles.update(dict.fromkeys(failure.lines, "root"))
            for line in self.evidence.log:
                if line.lineno > after and line.lineno not in roles and DEATH_REPORT.search(line.message or line.text):
                    roles[line.lineno] = "consequence"
        return roles

    @cached_property
    def exit_roles(self) -> dict[int, str]:
        """pid -> `root` for the process whose exit started a crash, `consequence` for the ones
        that followed (the launcher killing the tree), when two or more are gone."""
        return exit_roles(self.evidence.procs)

    # ------------------------------------------------------------ phases

    @cached_property
    def positions(self) -> dict[str, Position]:
        return rank_positions(self.evidence.phases)

    @cached_property
    def behind(self) -> tuple[str, Position] | None:
        """The rank furthest behind. Unprefixed (launcher) lines count only once the ranks are done."""
        ranks = {rank: pos for rank, pos in self.positions.items() if rank != MAIN}
        main = self.positions.get(MAIN)
        if not ranks:
            return (MAIN, main) if main else None
        if main and main[0].order > max(pos[0].order for pos in ranks.values()):
            return (MAIN, main)
        rank = min(ranks, key=lambda r: (position_key(ranks[r]), r))
        return (rank, ranks[rank])

    @cached_property
    def ready(self) -> bool:
        # the log's ready line, else (no log readable) the engine's own endpoint said so
        endpoint = self.evidence.endpoint
        return ready_seen(self.evidence.phases) or (endpoint is not None and endpoint.ready)

    def event_for(self, rank: str, position: Position) -> PhaseEvent | None:
        """The last log event that put `rank` at `position`."""
        phase, ended = position
        found = None
        for event in self.evidence.phases:
            if (event.rank or MAIN) == rank and event.phase == phase and event.end == ended:
                found = event
        return found

    # ------------------------------------------------------------ processes and stacks

    @cached_property
    def procs_by_pid(self) -> dict[int, ProcessRecord]:
        return {proc.pid: proc for proc in self.evidence.procs}

    def proc_of(self, stack: ProcessStack) -> ProcessRecord | None:
        pid = stack.pid if stack.pid is not None else (int(stack.label) if stack.label.isdigit() else None)
        return self.procs_by_pid.get(pid) if pid is not None else None

    def label_of(self, stack: ProcessStack) -> str:
        """The rank tag of a stack ("TP3"), else "pid N"."""
        if not stack.label.isdigit():
            return stack.label
        proc = self.proc_of(stack)
        return proc.rank if proc and proc.rank else f"pid {stack.label}"

    @cached_property
    def stacks(self) -> dict[str, ProcessStack]:
        """The latest sample of each process, by label."""
        latest: dict[str, ProcessStack] = {}
        for stack in self.evidence.stacks:
            label = self.label_of(stack)
            old = latest.get(label)
            if old is None or (stack.sample, stack.t or 0.0) >= (old.sample, old.t or 0.0):
                latest[label] = stack
        return dict(sorted(latest.items(), key=lambda item: label_order(item[0])))

    def is_rank(self, label: str, stack: ProcessStack) -> bool:
        proc = self.proc_of(stack)
        return bool(_RANK_LABEL.match(label)) or (proc is not None and proc.role in rank_roles())

    @cached_property
    def rank_stacks(self) -> dict[str, ProcessStack]:
        """Stacks of rank processes; all stacks when none can be told to be a rank."""
        ranks = {label: stack for label, stack in self.stacks.items() if self.is_rank(label, stack)}
        return ranks or self.stacks

    def role_of(self, label: str, stack: ProcessStack) -> str | None:
        proc = self.proc_of(stack)
        if proc is not None:
            return proc.role
        return "rank" if _RANK_LABEL.match(label) else None

    def rank_of_pid(self, pid: int) -> str | None:
        proc = self.procs_by_pid.get(pid)
        return proc.rank if proc else None

    # ------------------------------------------------------------ GPUs

    @cached_property
    def gpus(self) -> tuple[GpuView, ...]:
        """GPUs of the latest sample with meta.json filling unknown names and architectures."""
        name, cc = _text(self.meta.get("gpu_model")), _text(self.meta.get("compute_capability"))
        cc = cc or compute_capability(name)  # the model names its architecture
        if not self.evidence.gpus:
            if name is None and cc is None:
                return ()
            return (GpuView(None, name, cc, None, None, (), Source("meta.json")),)
        sample = max(self.evidence.gpus, key=lambda s: s.t)
        return tuple(
            GpuView(
                gpu.index,
                gpu.name or name,
                gpu.compute_capability or compute_capability(gpu.name) or cc,
                gpu.utilization_pct,
                gpu.memory_used_mib,
                tuple(p.pid for p in gpu.processes),
                Source("gpus.json", detail=f"t={sample.t:g}s, GPU {gpu.index}"),
            )
            for gpu in sample.gpus
        )

    def gpu_label(self, gpu: GpuView) -> str:
        """The rank using a GPU, where procs.json tells, else "GPU N"."""
        for pid in gpu.pids:
            rank = self.rank_of_pid(pid)
            if rank:
                return rank
        return f"GPU {gpu.index}" if gpu.index is not None else "GPU"

    @cached_property
    def gpu_trend(self) -> Trend | None:
        return memory_trend(self.evidence.gpus)

    # ------------------------------------------------------------ configuration

    @cached_property
    def flags(self) -> dict[str, Any]:
        flags = {_flag_key(key): value for key, value in self.evidence.flags.items()}
        for alias, name in flag_aliases().items():  # every engine's spelling -> the short key
            if name not in flags and alias in flags:
                flags[name] = flags[alias]
        return flags

    @property
    def cmdline_known(self) -> bool:
        return bool(self.evidence.cmdline or self.evidence.flags)

    def flag(self, name: str) -> tuple[Any, Source] | None:
        """A launch flag's value and where it came from; `nnodes` and `tp` fall back to meta.json."""
        name = _flag_key(name)
        if name in self.flags:
            return self.flags[name], Source("cmdline.txt")
        if name in META_FLAG_FALLBACKS and self.meta.get(name) is not None:
            return self.meta[name], Source("meta.json", detail=name)
        return None

    @cached_property
    def server_port(self) -> int | None:
        if self.evidence.server_port is not None:
            return self.evidence.server_port
        return server_port(self.flags, _engine(self.engine))

    @cached_property
    def port_read(self) -> bool:
        """Whether the port was read from the command line: the engine's default, assumed when
        no port flag could be read (a title hangwatch could not split, a flag not given), is no
        evidence against a process that holds it."""
        engine = _engine(self.engine)
        return flag_port(self.flags, engine.port_flag if engine is not None else "port") is not None

    @property
    def ports_known(self) -> bool:
        return bool(self.evidence.ports) or self.evidence.ports_text is not None


def _flag_key(name: str) -> str:
    return name.lstrip("-").replace("_", "-")


def label_order(label: str) -> tuple[Any, ...]:
    # TP2 before TP10: compare the digit runs as numbers.
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", label))
