"""The stacks taken so far: the last few per process, and how long each process has shown its wait.

    book.store(t, round_, procs)   a finished round (stackrounds.py): kept, marked, its waits timed
    book.wait_since(t, quiet_s)    label -> seconds in its current stack (the final blocker's `for_s`)
    book.steady                    label -> rounds in a row with the same stack (a deadlock seen twice)

A process that is gone stops costing memory: its marks go with its samples (rings.StackRing).
"""

from __future__ import annotations

from collections.abc import Iterable

from hangwatch.model import Missing, ProcessRecord, ProcessStack
from hangwatch.watch.progress import StackMark, motion_signature, thread_marks, wait_signature
from hangwatch.watch.reading import StackRound
from hangwatch.watch.rings import StackRing

__all__ = ["StackBook"]


class StackBook:
    def __init__(self) -> None:
        self.ring = StackRing()
        self.marks: dict[str, StackMark] = {}  # label -> its latest Python stack's mark (progress.py)
        self.steady: dict[str, int] = {}  # label -> samples in a row with the same stack
        self._began: dict[str, float] = {}  # label -> t its current stack was first sampled
        self._first_wait: set[str] = set()  # labels still in the wait their first sample showed
        self.missing: Missing | None = None  # why stacks could not be taken, until every rank dumps fine
        self.timings: dict[str, float] = {}  # "stacks" / "stacks_native" -> seconds the last round took

    def store(self, t: float, round_: StackRound, procs: Iterable[ProcessRecord]) -> set[str]:
        """Keep a finished round; returns the labels still kept (the others are forgotten)."""
        cpu = {p.rank or str(p.pid): p.cpu_time_s for p in procs}
        for stack, raw in round_.dumps:
            stored = self.ring.add(stack, raw, t)
            if not stack.native:
                mark = StackMark(stored.sample, motion_signature(stored), cpu.get(stack.label), t,
                                 wait_signature(stored), thread_marks(stored))
                self._note_wait(stack.label, mark, t)
                self.marks[stack.label] = mark
        self._note_round(round_)
        kept = set(self.ring.labels())  # processes that are gone stop costing memory
        self.marks = {k: v for k, v in self.marks.items() if k in kept}
        self._began = {k: v for k, v in self._began.items() if k in kept}
        self.steady = {k: v for k, v in self.steady.items() if k in kept}
        self._first_wait &= kept
        return kept

    def _note_round(self, round_: StackRound) -> None:
        """Keep the first reason stacks could not be taken; forget it once every rank dumps fine."""
        if round_.took_s is not None:
            self.timings["stacks_native" if round_.native else "stacks"] = round_.took_s
        if round_.missing:
            first = round_.missing[0]
            extra = f" ({len(round_.missing)} processes)" if len(round_.missing) > 1 else ""
            self.missing = Missing("stacks", first.reason + extra, first.hint)
        elif round_.dumps:
            self.missing = None

    def _note_wait(self, label: str, mark: StackMark, t: float) -> None:
        """How long each process has shown the same stack: the final blocker's `for_s`."""
        before = self.marks.get(label)
        if before is not None and before.where == mark.where:
            self.steady[label] = self.steady.get(label, 1) + 1
            return
        self._began[label], self.steady[label] = t, 1
        # first seen in this wait: it may have waited since the last progress, before we came
        if before is None:
            self._first_wait.add(label)
        else:
            self._first_wait.discard(label)

    def wait_since(self, t: float, quiet_s: float) -> dict[str, float]:
        """How long each process has shown its stack; a wait seen since its first sample counts
        from the last progress (`quiet_s` ago: attached to a stuck server, "for 89s", not the 9 s we watched)."""
        return {label: round(max(t - began, quiet_s) if label in self._first_wait else t - began, 2)
                for label, began in self._began.items()}

    def latest(self) -> dict[str, ProcessStack]:
        return {label: sample.stack for label, sample in self.ring.latest().items()}

    def newest_round_t(self) -> float:
        """Watch time of the newest Python stack round; -inf before the first."""
        marks = [m.t for m in self.marks.values() if m.t is not None]
        return max(marks) if marks else float("-inf")
