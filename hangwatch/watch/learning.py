"""Learned budgets from past starts of the same setup (budgets.py), as one watch uses them.

    learner.past(obs)                  the past starts of this setup (read from the book once)
    learner.mark_budget(obs, where)    when the current phase outruns its budget (the ladder's rung 3 cue)
    learner.learn(obs, verdict, ...)   the first time the start is ready: its phase durations recorded

No book (`--no-learn`, or none given): no past, nothing recorded.
"""

from __future__ import annotations

from hangwatch.model import State, Verdict
from hangwatch.sources.modelid import model_identity
from hangwatch.watch.budgets import (
    Book,
    BudgetPolicy,
    PastStart,
    Position,
    SetupKey,
    budgets,
    phase_durations,
    position,
    setup_key_of,
)
from hangwatch.watch.livesources import EngineReleases
from hangwatch.watch.observation import Observation

__all__ = ["BudgetLearner", "elapsed_s", "phase_rows", "where"]

Rows = dict[str, list[tuple[str, float, float | None]]]


class BudgetLearner:
    def __init__(self, book: Book | None, policy: BudgetPolicy, releases: EngineReleases) -> None:
        self._book, self.policy, self._releases = book, policy, releases
        self._setup: SetupKey | None = None
        self._past: list[PastStart] | None = None
        self._learned = False
        self._budget_end: float | None = None  # watch time the current phase outruns its learned budget

    def past(self, obs: Observation) -> list[PastStart]:
        if self._book is None:
            return []
        if self._past is None:
            key = self._setup_key(obs)
            if key is None:
                return []
            self._past = self._book.past_starts(key)
        return self._past

    def mark_budget(self, obs: Observation, at: Position | None) -> None:
        """Where the current phase's budget ends, by the decider's own test: in the phase, or
        without progress, longer than the budget."""
        budget = budgets(self._past or [], self.policy).get(at.phase) if at else None
        spent = max(at.in_phase_s, obs.progress.since_last_progress_s) if at else 0.0
        self._budget_end = obs.t + budget - spent if budget is not None else None

    def budget_left(self, t: float) -> float | None:
        """Seconds left of the current phase's learned budget, as of the last verdict; None without one."""
        return None if self._budget_end is None else self._budget_end - t

    def learn(self, obs: Observation, verdict: Verdict, first_read_t: float | None) -> None:
        """The first time the start is ready: keep its phase durations for the next start."""
        if self._book is None or self._learned or verdict.state is not State.READY:
            return
        self._learned = True
        key = self._setup_key(obs)
        elapsed = elapsed_s(obs)
        # phases already under way when we attached would be undercounted; from the launch, all count
        seen_from = -1.0 if elapsed is not None and elapsed - obs.t < 3.0 else (first_read_t or 0.0)
        durations = phase_durations(phase_rows(obs), seen_from, obs.t)
        if key is not None and durations:
            self._book.record_start(key, PastStart(elapsed if elapsed is not None else obs.t, durations), at=obs.wall)

    def _setup_key(self, obs: Observation) -> SetupKey | None:
        if self._setup is None and obs.server.engine:
            flags = obs.server.flags
            gpu = obs.gpus[-1].gpus[0].name if obs.gpus and obs.gpus[-1].gpus else None
            model = flags.get("model-path") or flags.get("model") or "unknown"
            self._setup = setup_key_of(obs.server.engine, self._releases(obs.server.engine),
                                       flags, model_identity(str(model), obs.server.launcher_pid), gpu)
        return self._setup


def elapsed_s(obs: Observation) -> float | None:
    """Seconds since the launcher started (the ETA counts from there); None when unknown."""
    launcher = next((p for p in obs.procs if p.role == "launcher" and p.create_time), None)
    return max(0.0, obs.wall - launcher.create_time) if launcher and launcher.create_time else None


def where(obs: Observation) -> Position | None:
    """The current phase and how long it has run (budgets.position)."""
    return position(phase_rows(obs), obs.t)


def phase_rows(obs: Observation) -> Rows:
    return {rank: [(s.phase, s.at, s.end) for s in spans] for rank, spans in obs.phases.items()}
