"""Learned phase budgets and the ETA, from past starts of the same setup (docs/live.md).

A start that reaches ready leaves its phase durations in the history (SQLite, `sinks.store`),
keyed by the setup: engine, its version, the model (resolved path and config, not the flag's
text), the topology (tp, pp, dp, nodes) and GPU model. The next start of that setup:

* gets a budget per phase, `factor × the longest seen + margin_s` (at least `floor_s`): a phase
  past its budget with nothing moving is stalled then, not at the rules' fixed holds (the way
  NVIDIA's fault-tolerance package learns its timeouts from past runs);
* gets an ETA: the median past duration of the phases still ahead plus what is left of the
  current one ("ready in ~1m40s, from 6 starts").

Without history the fixed holds stay and there is no ETA. Pure apart from the `Book` it is handed.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from hangwatch.model import Eta, Phase

__all__ = ["Book", "BudgetPolicy", "PastStart", "Position", "SetupKey", "budgets", "eta", "phase_durations", "position",
           "setup_key_of"]


@dataclass(frozen=True)
class SetupKey:
    """What makes two starts comparable: the engine and its version, the model (its resolved path
    and config, sources.modelid: not the `--model-path` text), the topology and the GPU model."""

    engine: str
    version: str
    model: str
    tp: int
    gpu_model: str
    topology: str = ""  # "tp2 pp1 dp1 nnodes1": every parallel size, not only tp

    def as_tuple(self) -> tuple[str, str, str, int, str, str]:
        return (self.engine, self.version, self.model, self.tp, self.gpu_model, self.topology)


def _size(value: object) -> int:
    """A parallel size flag: 1 when absent or not a number (the engines' default)."""
    return int(value) if isinstance(value, str) and value.isdigit() else 1


def setup_key_of(engine: str, version: str, flags: Mapping[str, str | bool], model_id: str, gpu: str | None) -> SetupKey:
    """The one key of a setup, for the watcher's past starts and `run --remedy`'s learned changes alike:
    `model_id` is what the server loads (sources.modelid), the topology every parallel size."""
    tp = _size(flags.get("tp") or flags.get("tp-size") or flags.get("tensor-parallel-size"))
    topology = " ".join(f"{name}{_size(flags.get(name))}" for name in ("pp", "dp", "nnodes"))
    return SetupKey(engine, version, model_id, tp, gpu or "cpu", f"tp{tp} {topology}")


@dataclass(frozen=True)
class PastStart:
    ready_s: float  # launch (or first phase line) to ready
    phases: Mapping[str, float]  # phase -> seconds it took


class Book(Protocol):
    """Where past starts live (sinks.store.HistoryStore); tests may hand an in-memory one."""

    def past_starts(self, key: SetupKey, limit: int = 50) -> list[PastStart]: ...

    def record_start(self, key: SetupKey, start: PastStart, *, at: float) -> None: ...


@dataclass(frozen=True)
class BudgetPolicy:
    factor: float = 2.0  # × the longest duration seen of that phase
    margin_s: float = 5.0  # + this: a 1 s phase gets 7 s, not 2 s
    floor_s: float = 5.0


@dataclass(frozen=True)
class Position:
    """Where the start is: the phase of the rank furthest behind, and for how long."""

    phase: Phase
    in_phase_s: float


def budgets(past: Sequence[PastStart], policy: BudgetPolicy = BudgetPolicy()) -> dict[Phase, float]:
    longest: dict[Phase, float] = {}
    for start in past:
        for name, seconds in start.phases.items():
            phase = _phase(name)
            if phase is not None:
                longest[phase] = max(longest.get(phase, 0.0), seconds)
    return {phase: max(policy.floor_s, policy.factor * s + policy.margin_s) for phase, s in longest.items()}


def eta(past: Sequence[PastStart], where: Position | None, elapsed_s: float | None,
        policy: BudgetPolicy = BudgetPolicy(), *, stalled: bool = False) -> Eta | None:
    """None without history. Time told honestly: no `ready_in_s` while stalled, once the current
    phase is past its budget, or once the start is past the usual ready time; `overdue_s` then
    says by how much ("overdue by 1m20s; usually ready in 45s, from 6 starts")."""
    if not past:
        return None
    budget = budgets(past, policy).get(where.phase) if where else None
    usual = round(statistics.median(s.ready_s for s in past), 1)
    overdue = _overdue(past, where, elapsed_s, budget, usual)
    if stalled or overdue is not None:
        return Eta(None, len(past), budget, overdue, usual)
    if where is None:
        left = None if elapsed_s is None else max(0.0, usual - elapsed_s)
        return Eta(left, len(past), budget, None, usual)
    median = {phase: statistics.median(s.phases.get(phase.value, 0.0) for s in past) for phase in Phase}
    ahead = sum(median[p] for p in Phase if p.order > where.phase.order)
    left = max(0.0, median[where.phase] - where.in_phase_s) + ahead
    return Eta(round(left, 1), len(past), budget, None, usual)


def _overdue(past: Sequence[PastStart], where: Position | None, elapsed_s: float | None, budget: float | None,
             usual: float) -> float | None:
    """By how much the start is late: past the usual ready time, or its phase past its budget."""
    late = [elapsed_s - usual] if elapsed_s is not None and elapsed_s > usual else []
    if where is not None and budget is not None and where.in_phase_s > budget:
        longest = max(s.phases.get(where.phase.value, 0.0) for s in past)
        late.append(where.in_phase_s - longest)
    return round(max(late), 1) if late else None


def position(phases: Mapping[str, Sequence[tuple[str, float, float | None]]], t: float) -> Position | None:
    """From each rank's (phase, at, end) rows: the rank furthest behind, and how long it has been
    there (after a phase's end line, it is in the next phase since that line)."""
    where: list[tuple[int, Position]] = []
    for rows in phases.values():
        if not rows:
            continue
        name, at, end = rows[-1]
        phase = _phase(name)
        if phase is None:
            continue
        if end is not None:
            phase = list(Phase)[min(phase.order + 1, len(Phase) - 1)]
            at = end
        where.append((phase.order, Position(phase, max(0.0, t - at))))
    return min(where, key=lambda item: item[0])[1] if where else None


def phase_durations(phases: Mapping[str, Sequence[tuple[str, float, float | None]]], seen_from: float,
                    ready_t: float) -> dict[str, float]:
    """Per phase, the longest any rank took, counting only phases begun after `seen_from` (a phase
    already under way when hangwatch attached would be undercounted)."""
    out: dict[str, float] = {}
    for rows in phases.values():
        for index, (name, at, end) in enumerate(rows):
            if at <= seen_from:
                continue
            stop = end if end is not None else (rows[index + 1][1] if index + 1 < len(rows) else ready_t)
            out[name] = max(out.get(name, 0.0), round(max(0.0, stop - at), 2))
    return out


def _phase(name: str) -> Phase | None:
    try:
        return Phase(name)
    except ValueError:
        return None
