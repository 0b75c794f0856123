"""Bounded memory for a watch that may run for days: ring buffers of what the sources saw.

Each buffer keeps the recent past the classifier and a bundle need, and drops the rest:
log lines (the last 20 000, or the watcher's evidence window, plus the phase events, bounded separately so an early
`Load weight begin.` is not pushed out by a chatty later phase), the raw log tail for
`server.log`, GPU samples, the last few stack samples per rank, and verdict changes. (The SQLite history of transitions
and alerts across restarts is another thing: sinks/store.py.)
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from hangwatch.model import GpuSample, LogLine, PhaseEvent, ProcessStack, Verdict
from hangwatch.watch.observation import StackSample, TransitionRecord
from hangwatch.watch.skim import skim

__all__ = ["LogRing", "StackRing", "TimedPhase", "VerdictChange", "VerdictChanges", "GpuRing"]

PhaseParser = Callable[[Sequence[LogLine]], Sequence[PhaseEvent]]
LineParser = Callable[[bytes, int], Sequence[LogLine]]

_MAX_PENDING = 64 * 1024  # an unterminated line (a tqdm bar redrawn with `\r`) keeps only its tail


@dataclass(frozen=True)
class TimedPhase:
    t: float  # seconds since the watch began, when hangwatch first saw the line
    event: PhaseEvent


class LogRing:
    """The log as complete lines (parsed once), the unterminated last line, and a raw byte tail."""

    def __init__(self, parse_lines: LineParser, *, max_lines: int = 20_000, max_phases: int = 5_000,
                 raw_tail_bytes: int = 4 << 20, overflow_needles: frozenset[str] | None = None):
        self._parse = parse_lines
        # a feed of more lines than the ring holds (the start tail of a big log): the lines that
        # would fall out at once are only skimmed for these (phase needles): the phases are the
        # returned lines' only use beyond the ring (watch/skim.py)
        self._overflow_needles = overflow_needles
        self.lines: deque[LogLine] = deque(maxlen=max_lines)
        self.phases: deque[TimedPhase] = deque(maxlen=max_phases)
        self._raw = bytearray()
        self._raw_limit = raw_tail_bytes
        self._pending = b""
        self.next_lineno = 1
        self.total_bytes = 0

    def feed(self, data: bytes) -> list[LogLine]:
        """Add bytes read from the log; returns the complete lines they finished."""
        if not data:
            return []
        self.total_bytes += len(data)
        self._keep_raw(data)
        buffered = self._pending + data
        cut = buffered.rfind(b"\n") + 1
        complete, self._pending = buffered[:cut], _trim_pending(buffered[cut:])
        if not complete:
            return []
        count = complete.count(b"\n")
        lines = self._parse_overflowing(complete, count) if self.lines.maxlen is not None and count > self.lines.maxlen else None
        if lines is None:
            lines = list(self._parse(complete, self.next_lineno))
        self.next_lineno += count
        self.lines.extend(lines)
        return lines

    def _parse_overflowing(self, complete: bytes, count: int) -> list[LogLine] | None:
        """The lines that fit the ring parsed, those before them only where they hold a needle
        (each with its own line number); None: parse them all (no needles, or no repeats)."""
        if self._overflow_needles is None:
            return None
        keep = self.lines.maxlen or count
        cut = len(complete)
        for _ in range(keep + 1):
            cut = complete.rfind(b"\n", 0, cut)
        head, rest = complete[: cut + 1], complete[cut + 1 :]
        skimmed = skim(head, self._overflow_needles)
        if skimmed is None:
            return None
        out: list[LogLine] = []
        for index, line in zip(skimmed.indices, skimmed.kept, strict=True):
            out.extend(self._parse(line + b"\n", self.next_lineno + index))
        out.extend(self._parse(rest, self.next_lineno + skimmed.lines))
        return out

    def partial(self) -> list[LogLine]:
        """The unterminated last line (a live tqdm bar), parsed afresh each time; not stored."""
        if not self._pending.strip():
            return []
        return list(self._parse(self._pending, self.next_lineno))

    def add_phases(self, t: float, events: Iterable[PhaseEvent]) -> None:
        self.phases.extend(TimedPhase(t, event) for event in events)

    def reset_phases(self, t: float, events: Iterable[PhaseEvent]) -> None:
        """Re-derive the phases (the engine became known after lines were already read)."""
        self.phases.clear()
        self.add_phases(t, events)

    def raw_tail(self) -> bytes:
        return bytes(self._raw[-self._raw_limit:])

    def _keep_raw(self, data: bytes) -> None:
        self._raw += data
        if len(self._raw) > 2 * self._raw_limit:  # trim in big steps: O(1) amortised per byte
            del self._raw[: len(self._raw) - self._raw_limit]


def _trim_pending(pending: bytes) -> bytes:
    if len(pending) <= _MAX_PENDING:
        return pending
    cut = pending.rfind(b"\r", 0, len(pending) - 1)
    return pending[cut:] if cut >= 0 and len(pending) - cut <= _MAX_PENDING else pending[-_MAX_PENDING:]


class StackRing:
    """The last few stack samples of each process, by label."""

    def __init__(self, per_label: int = 3, max_labels: int = 256):
        self._per_label = per_label
        self._max_labels = max_labels
        self._samples: dict[str, deque[StackSample]] = {}
        self._counts: dict[str, int] = {}

    def add(self, stack: ProcessStack, raw: bytes, t: float) -> ProcessStack:
        """Store a sample, numbered per label (0, 1, 2, ...) and stamped with `t`; returns it."""
        label = stack.label
        number = self._counts.get(label, 0)
        self._counts[label] = number + 1
        if label not in self._samples and len(self._samples) >= self._max_labels:
            self._samples.pop(next(iter(self._samples)))
        stored = replace(stack, sample=number, t=round(t, 2))
        self._samples.setdefault(label, deque(maxlen=self._per_label)).append(StackSample(stored, raw))
        return stored

    def latest(self) -> dict[str, StackSample]:
        return {label: ring[-1] for label, ring in self._samples.items() if ring}

    def all(self) -> list[StackSample]:
        return [sample for ring in self._samples.values() for sample in ring]

    def labels(self) -> list[str]:
        return list(self._samples)


class GpuRing:
    def __init__(self, max_samples: int = 120):
        self.samples: deque[GpuSample] = deque(maxlen=max_samples)

    def add(self, sample: GpuSample) -> None:
        self.samples.append(sample)

    def latest(self) -> GpuSample | None:
        return self.samples[-1] if self.samples else None


@dataclass(frozen=True)
class VerdictChange:
    t: float  # seconds since the watch began
    wall: float  # epoch seconds
    verdict: Verdict

    def record(self) -> TransitionRecord:
        """As an `Observation` carries it (plain values, no verdict)."""
        v = self.verdict
        return TransitionRecord(self.t, self.wall, v.state.value, v.cause, v.rule, tuple(v.ranks),
                                v.phase.value if v.phase else None)

    def to_dict(self) -> dict[str, object]:
        v = self.verdict
        return {"t": round(self.t, 2), "wall": round(self.wall, 3), "state": v.state.value, "cause": v.cause,
                "rule": v.rule, "ranks": list(v.ranks), "phase": v.phase.value if v.phase else None}


def verdict_key(verdict: Verdict) -> tuple[object, ...]:
    """What makes a verdict 'new' for a transition (and for `--json` output)."""
    return (verdict.state, verdict.cause, verdict.rule, tuple(verdict.ranks))


class VerdictChanges:
    """Verdict changes, newest last; thread-safe to read while the loop appends."""

    def __init__(self, max_items: int = 1_000):
        self._items: deque[VerdictChange] = deque(maxlen=max_items)
        self._lock = threading.Lock()

    def offer(self, t: float, wall: float, verdict: Verdict) -> bool:
        """Record `verdict` if it differs from the last one; True when it did."""
        with self._lock:
            if self._items and verdict_key(self._items[-1].verdict) == verdict_key(verdict):
                return False
            self._items.append(VerdictChange(t, wall, verdict))
            return True

    def items(self) -> list[VerdictChange]:
        with self._lock:
            return list(self._items)
