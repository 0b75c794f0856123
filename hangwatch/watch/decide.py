"""From one tick's `Observation` to the published verdict: classify, then the live layers.

    raw = classify(evidence, rules, memo) the rules, with their holds (cut short by a learned
                                          budget, or dropped for a deadlock: see below)
    + blocker                             the end of the wait-for chain (classify.waitfor)
    -> EpisodeTracker                     no flapping: stalled until real progress (episodes.py)
    + eta                                 from past starts of this setup (budgets.py)

Holds: a rule waits its `for:` while nothing moves, because many waits end by themselves. Two
kinds of evidence end that wait early: a wait-for *cycle* or a wait on a *dead or absent* rank,
seen the same in two stack rounds (it cannot end by itself: hold 0); and a phase running past its
budget learned from past starts with nothing moving (holds cut to the live floor).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hangwatch.classify import ScanMemo, classify
from hangwatch.classify.verdict.waitfor import final_blocker
from hangwatch.model import Blocker, Evidence, Fact, Phase, Source, State, Verdict
from hangwatch.watch.budgets import BudgetPolicy, PastStart, Position, budgets, eta
from hangwatch.watch.episodes import EpisodeTracker, Motion

__all__ = ["Decider", "Decision", "cut_holds"]


@dataclass(frozen=True)
class Decision:
    verdict: Verdict  # what is published
    raw: Verdict  # what the classifier alone said this tick
    early: str | None = None  # "deadlock" / "budget": why the holds were cut this tick


class Decider:
    """The watcher's verdict pipeline; keeps the episode state and the watcher's log caches
    (`memo`: they save work from tick to tick, never change a verdict), nothing else."""

    def __init__(self, rules: Sequence[Any], min_hold_s: float, policy: BudgetPolicy | None = None,
                 episodes: EpisodeTracker | None = None, memo: ScanMemo | None = None) -> None:
        self.rules = list(rules)
        self._immediate = {r.id for r in rules if r.immediate} | {"wait-for-graph"}
        self._no_hold = cut_holds(rules, 0.0)
        self._short_hold = cut_holds(rules, min_hold_s)
        self.min_hold_s = min_hold_s
        self.policy = policy or BudgetPolicy()
        self.episodes = episodes or EpisodeTracker()
        self.memo = memo

    def decide(self, evidence: Evidence, *, t: float, wall: float, motion: Iterable[Motion],
               wait_since: Mapping[str, float], steady: Mapping[str, int], past: Sequence[PastStart],
               where: Position | None, elapsed_s: float | None, stacks_at: float | None = None) -> Decision:
        """`stacks_at`: watch time of the newest Python stack round, None when stacks cannot be taken."""
        blocker = final_blocker(evidence, wait_since) if evidence.stacks else None
        learned = budgets(past, self.policy)
        early = _early(blocker, steady, learned, where, evidence.since_last_progress_s, self.min_hold_s)
        rules = {"deadlock": self._no_hold, "budget": self._short_hold}.get(early or "", self.rules)
        raw = classify(evidence, rules, now=wall, budgets=learned, memo=self.memo)
        if early == "deadlock" and raw.state not in (State.STALLED, State.CRASHED) and blocker is not None:
            raw = _deadlock_verdict(raw, blocker)
        if self.episodes.episode is None and self._unseen_quiet(raw, t, stacks_at):
            raw = _not_yet(raw)
        published = self.episodes.update(raw, motion, t, wall)
        shown = blocker if published.state is State.STALLED else None
        if shown is not None and shown.rank and not published.ranks:
            # the rank the wait-for chain ends at is the culprit every surface names (/verdict's ranks too)
            published = replace(published, ranks=(shown.rank,))
        ready_eta = None if published.state in (State.READY, State.CRASHED) else eta(
            past, where, elapsed_s, self.policy, stalled=published.state is State.STALLED)
        return Decision(replace(published, blocker=shown, eta=ready_eta), raw, early)


    def _unseen_quiet(self, raw: Verdict, t: float, stacks_at: float | None) -> bool:
        """A stall on a rule's hold alone, before any stack round was taken inside the quiet time:
        the ranks may be computing (a slow import on a loaded host), which only a stack that moved
        with CPU time can show. Such a stall waits one round (a few seconds); an `immediate` rule
        (its evidence proves the wait) does not."""
        if raw.state is not State.STALLED or stacks_at is None or raw.since_s is None:
            return False
        if raw.rule in self._immediate:
            return False
        return stacks_at < t - raw.since_s


def _not_yet(raw: Verdict) -> Verdict:
    return replace(raw, state=State.STARTING, cause=None, confidence=0.5, rule=None, title=None, message=None,
                   evidence=(), remedy=None, ranks=(), references=())


def cut_holds(rules: Sequence[Any], hold_s: float) -> list[Any]:
    """The rules with every hold above `hold_s` cut to it; `state: progressing` rules keep theirs."""
    return [replace(r, hold_s=hold_s) if r.state is not State.PROGRESSING and r.hold_s > hold_s else r for r in rules]


def _early(blocker: Blocker | None, steady: Mapping[str, int], learned: Mapping[Phase, float],
           where: Position | None, quiet_s: float | None, min_hold_s: float) -> str | None:
    if blocker is not None and blocker.definite and _confirmed(blocker, steady):
        return "deadlock"
    budget = learned.get(where.phase) if where else None
    quiet = quiet_s or 0.0
    # past the budget: in the phase longer than it, or nothing moved for longer (the classifier's
    # own test: a phase first seen in the watcher's first read began before the watch did)
    if budget is not None and where is not None and max(where.in_phase_s, quiet) > budget and quiet >= min_hold_s:
        return "budget"
    return None


def _confirmed(blocker: Blocker, steady: Mapping[str, int]) -> bool:
    """Every live rank of the chain showed the same stack in two rounds: two samples taken a few
    ms apart may catch ranks in different collectives of a healthy step, never twice the same way."""
    alive = [label for label in blocker.chain if label in steady]
    return bool(alive) and all(steady[label] >= 2 for label in alive)


def _deadlock_verdict(raw: Verdict, blocker: Blocker) -> Verdict:
    """No rule names it, yet it cannot end by itself: a stall, with the chain as the evidence."""
    gone = blocker.state in ("exited", "absent")
    who = blocker.rank or f"pid {blocker.pid}"
    title = f"{who} {'is gone' if gone else 'closes a wait-for cycle'}; the other ranks wait for it"
    fact = Fact(f"wait-for chain {' -> '.join(blocker.chain)}: {blocker.waits_on}", Source("stacks/", detail=who))
    return replace(raw, state=State.STALLED, cause="dead_rank" if gone else "unknown", confidence=0.6 if gone else 0.4,
                   rule="wait-for-graph", title=title, message=f"{who} waits on {blocker.waits_on}.",
                   evidence=(fact, *raw.evidence), ranks=(who,) if blocker.rank or blocker.pid else raw.ranks)
