"""Stall episodes: what the live verdict says between "stalled" and real progress (docs/live.md).

The classifier decides each tick afresh, and a rule's hold restarts whenever anything moves, so a
raw verdict can go stalled → starting → stalled while the server never moved: a stack that
changed on the way *into* the hang, or a second rule that needs its own hold before it takes over.
`EpisodeTracker.update` turns raw verdicts into published ones:

* the first stalled verdict opens an episode (`id`, `started_at`, its cause and confidence);
* a raw verdict that is no longer stalled, while nothing moved *inside* the episode, keeps it
  stalled: the published verdict is the episode's last stalled one, its `since_s` still growing;
* the cause is refined when a stalled verdict names another cause with higher confidence (each
  change is kept in `refined`); a lower-confidence cause does not replace it;
* the episode ends on real progress dated inside it (`Motion.since_t` after its start) while
  the raw verdict is no longer stalled ("resolved"), on ready, on a crash ("crashed"), or on a
  stop someone asked for ("stopped");
* an episode an earlier run of the daemon left open in the history is `resume`d: it stays
  stalled until progress this process saw across its own ticks (its first reading of the server
  is a baseline, never progress), and its first stalled verdict takes over the cause silently
  (a restart is no new information: no refinement, so no message).

Pure apart from the id generator: times come in as arguments.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from hangwatch.model import Refinement, StallEpisode, State, Verdict

__all__ = ["EpisodeTracker", "Motion"]


@dataclass(frozen=True)
class Motion:
    """One progress signal and the start of the interval it was measured over (watch time, s):
    a stack that differs from the one sampled 5 s ago moved somewhere in those 5 s."""

    signal: str  # "phase:weight_load", "stack:TP0", "io:TP1", "gpu_memory", "ready", ...
    since_t: float


class EpisodeTracker:
    """Holds the open episode of one watched server; called once per tick by the watch loop."""

    def __init__(self, new_id: Callable[[], str] = lambda: uuid.uuid4().hex[:16]) -> None:
        self._new_id = new_id
        self.episode: StallEpisode | None = None  # the open one, or the last one while crashed
        self._opened_t = 0.0  # watch time the episode opened
        self._stall_began_t = 0.0  # watch time nothing moved since, per the first stalled verdict
        self._held: Verdict | None = None  # the last stalled verdict of the episode
        self.ended: list[StallEpisode] = []  # episodes closed in this process, oldest first
        self._resumed = False  # the open episode came from the history, not from this process

    def update(self, raw: Verdict, motion: Iterable[Motion], t: float, wall: float) -> Verdict:
        """The verdict to publish for this tick's raw verdict; `t` watch time, `wall` epoch seconds."""
        moved = [m for m in motion if m.since_t >= self._opened_t]
        if raw.state is State.CRASHED:
            return self._crashed(raw, t, wall)
        if raw.state is State.STOPPED:
            return self._stopped(raw, wall)
        if self.episode is None or self.episode.state != "stalled":
            self.episode = None if raw.state is not State.STALLED else self.episode
            return self._open(raw, t, wall) if raw.state is State.STALLED else raw
        if raw.state is State.STALLED:
            return self._stalled(raw, t, wall)
        if raw.state is State.READY or moved:
            return self._resolve(raw, wall)
        return self._hold(raw, t)

    def resume(self, episode: StallEpisode, t: float, wall: float) -> None:
        """Carry on a stall episode an earlier run left open (`t` watch time, `wall` epoch now)."""
        self.episode = replace(episode, state="stalled", ended_at=None)
        self._opened_t = t
        self._stall_began_t = t - max(0.0, wall - episode.started_at)
        self._held = Verdict(
            state=State.STALLED, cause=episode.cause, confidence=episode.confidence, episode=self.episode,
            title="Still stalled (the episode an earlier watch opened; nothing has moved since this one began)",
        )
        self._resumed = True

    # ---------------------------------------------------------------- transitions

    def _open(self, raw: Verdict, t: float, wall: float) -> Verdict:
        self.episode = StallEpisode(self._new_id(), wall, "stalled", raw.cause, raw.confidence)
        self._opened_t = t
        self._stall_began_t = t - (raw.since_s or 0.0)
        self._held = raw
        return replace(raw, episode=self.episode)

    def _stalled(self, raw: Verdict, t: float, wall: float) -> Verdict:
        episode = self.episode
        assert episode is not None and self._held is not None
        if self._resumed:  # the restarted daemon's first stalled verdict: its cause, no refinement
            self._resumed = False
            episode = replace(episode, cause=raw.cause, confidence=raw.confidence)
            self.episode = episode
        if raw.cause != episode.cause and raw.confidence <= episode.confidence:
            return self._hold(raw, t)  # a weaker explanation never replaces the one given
        if raw.cause != episode.cause:
            refined = (*episode.refined, Refinement(wall, raw.cause or "unknown", raw.confidence))
            episode = replace(episode, cause=raw.cause, confidence=raw.confidence, refined=refined)
            self.episode = episode
        self._held = raw
        return replace(raw, episode=episode, since_s=self._since(raw, t))

    def _hold(self, raw: Verdict, t: float) -> Verdict:
        """Nothing moved inside the episode: still stalled, whatever the raw verdict says."""
        held = self._held
        assert held is not None
        return replace(held, episode=self.episode, since_s=self._since(raw, t), phases=raw.phases or held.phases,
                       missing=raw.missing)

    def _resolve(self, raw: Verdict, wall: float) -> Verdict:
        assert self.episode is not None
        self.ended.append(replace(self.episode, state="resolved", ended_at=wall))
        self.episode, self._held, self._resumed = None, None, False
        return replace(raw, episode=None)

    def _stopped(self, raw: Verdict, wall: float) -> Verdict:
        """A stop someone asked for ends an open stall episode as "stopped"; it opens none."""
        if self.episode is not None and self.episode.state == "stalled":
            self.ended.append(replace(self.episode, state="stopped", ended_at=wall))
        self.episode, self._held = None, None
        return replace(raw, episode=None)

    def _crashed(self, raw: Verdict, t: float, wall: float) -> Verdict:
        """A crash ends a stall episode (or is one, when none was open); it stays shown while crashed."""
        if self.episode is not None and self.episode.state == "crashed":
            return replace(raw, episode=self.episode)
        if self.episode is None:
            self.episode = StallEpisode(self._new_id(), wall, "crashed", raw.cause, raw.confidence, ended_at=wall)
            self._opened_t = t
        else:
            cause = raw.cause or self.episode.cause
            self.episode = replace(self.episode, state="crashed", cause=cause, ended_at=wall)
        self.ended.append(self.episode)
        self._held, self._resumed = None, False
        return replace(raw, episode=self.episode)

    def _since(self, raw: Verdict, t: float) -> float:
        return round(max(raw.since_s or 0.0, t - self._stall_began_t), 2)
