"""Stall episodes (docs/live.md): stalled until real progress, causes refined, never resolved without progress."""

from __future__ import annotations

import itertools

from hangwatch.model import State, Verdict
from hangwatch.watch.episodes import EpisodeTracker, Motion


def _v(state: State, cause: str | None = None, confidence: float = 0.5, since: float = 0.0) -> Verdict:
    return Verdict(state=state, cause=cause, confidence=confidence, since_s=since)


def _tracker() -> EpisodeTracker:
    ids = itertools.count(1)
    return EpisodeTracker(new_id=lambda: f"e{next(ids)}")


def test_a_rule_dropping_out_while_nothing_moved_stays_stalled() -> None:
    tracker = _tracker()
    first = tracker.update(_v(State.STALLED, "weight_loading_io", 0.7, since=30), [], t=100, wall=1000)
    assert first.episode is not None and first.episode.id == "e1"
    held = tracker.update(_v(State.STARTING), [], t=101, wall=1001)
    assert held.state is State.STALLED and held.cause == "weight_loading_io" and held.episode.id == "e1"
    assert held.since_s == 31  # the stall goes on from when it began, not from the raw verdict's reset


def test_progress_dated_before_the_episode_does_not_end_it_but_progress_inside_does() -> None:
    tracker = _tracker()
    tracker.update(_v(State.STALLED, "x", 0.7), [], t=100, wall=1000)
    old = tracker.update(_v(State.STARTING), [Motion("stack:TP0", since_t=95)], t=101, wall=1001)
    assert old.state is State.STALLED
    new = tracker.update(_v(State.STARTING), [Motion("phase:kv_cache", since_t=102)], t=102, wall=1002)
    assert new.state is State.STARTING and new.episode is None
    assert tracker.ended[-1].state == "resolved" and tracker.ended[-1].id == "e1"


def test_still_stalled_raw_with_progress_keeps_the_episode() -> None:
    tracker = _tracker()
    tracker.update(_v(State.STALLED, "x", 0.7), [], t=100, wall=1000)
    out = tracker.update(_v(State.STALLED, "x", 0.7), [Motion("io:TP0", 100.5)], t=101, wall=1001)
    assert out.state is State.STALLED and out.episode.id == "e1" and not tracker.ended


def test_cause_refined_only_to_a_more_confident_one() -> None:
    tracker = _tracker()
    tracker.update(_v(State.STALLED, "unknown", 0.2), [], t=100, wall=1000)
    refined = tracker.update(_v(State.STALLED, "nccl_init", 0.7), [], t=101, wall=1001)
    assert refined.cause == "nccl_init" and refined.episode.cause == "nccl_init"
    assert [(r.cause, r.confidence) for r in refined.episode.refined] == [("nccl_init", 0.7)]
    weaker = tracker.update(_v(State.STALLED, "jit_compile_slow", 0.4), [], t=102, wall=1002)
    assert weaker.cause == "nccl_init" and len(weaker.episode.refined) == 1
    assert weaker.episode.to_dict()["refined"] == [{"at": 1001, "cause": "nccl_init", "confidence": 0.7}]


def test_ready_ends_it_and_a_crash_ends_it_as_crashed() -> None:
    tracker = _tracker()
    tracker.update(_v(State.STALLED, "x", 0.7), [], t=1, wall=1)
    assert tracker.update(_v(State.READY), [], t=2, wall=2).episode is None
    tracker.update(_v(State.STALLED, "y", 0.7), [], t=3, wall=3)
    crashed = tracker.update(_v(State.CRASHED, "dead_rank", 0.9), [], t=4, wall=4)
    assert crashed.episode.id == "e2" and crashed.episode.state == "crashed" and crashed.episode.cause == "dead_rank"
    assert [e.state for e in tracker.ended] == ["resolved", "crashed"]


def test_a_stop_ends_an_open_stall_as_stopped_and_opens_none() -> None:
    tracker = _tracker()
    tracker.update(_v(State.STALLED, "x", 0.7), [], t=1, wall=1)
    stopped = tracker.update(_v(State.STOPPED, None, 1.0), [], t=2, wall=2)
    assert stopped.state is State.STOPPED and stopped.episode is None
    assert [(e.state, e.ended_at) for e in tracker.ended] == [("stopped", 2)]
    assert tracker.update(_v(State.STOPPED, None, 1.0), [], t=3, wall=3).episode is None
    assert len(tracker.ended) == 1


def test_healthy_verdicts_carry_no_episode() -> None:
    tracker = _tracker()
    assert tracker.update(_v(State.STARTING), [Motion("log", 0)], t=1, wall=1).episode is None


def _resumed(tracker: EpisodeTracker) -> None:
    from hangwatch.model import StallEpisode

    tracker.resume(StallEpisode("old", started_at=900.0, state="stalled", cause="weight_loading_io"), t=0.0, wall=1000.0)


def test_a_resumed_episode_stays_stalled_on_a_first_look_that_says_progressing() -> None:
    """A daemon restarted mid-stall (issue 26): its first verdicts know nothing moved yet."""
    tracker = _tracker()
    _resumed(tracker)
    out = tracker.update(_v(State.PROGRESSING, "weight_loading_io", 0.62), [], t=1.0, wall=1001.0)
    assert out.state is State.STALLED and out.episode.id == "old" and out.since_s == 101.0
    assert not tracker.ended


def test_a_resumed_episode_takes_the_first_stalled_cause_silently() -> None:
    tracker = _tracker()
    _resumed(tracker)
    out = tracker.update(_v(State.STALLED, "nccl_init", 0.4), [], t=1.0, wall=1001.0)
    assert out.cause == "nccl_init" and out.episode.id == "old" and out.episode.refined == ()
    weaker = tracker.update(_v(State.STALLED, "unknown", 0.2), [], t=2.0, wall=1002.0)
    assert weaker.cause == "nccl_init"


def test_a_resumed_episode_ends_only_on_progress_seen_by_this_process() -> None:
    tracker = _tracker()
    _resumed(tracker)
    still = tracker.update(_v(State.STARTING), [Motion("io:TP0", since_t=-5.0)], t=1.0, wall=1001.0)
    assert still.state is State.STALLED
    moved = tracker.update(_v(State.STARTING), [Motion("phase:kv_cache", since_t=2.0)], t=2.0, wall=1002.0)
    assert moved.state is State.STARTING and tracker.ended[-1].id == "old" and tracker.ended[-1].state == "resolved"
