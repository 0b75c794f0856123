import json
import threading

import pytest

from hangwatch.model import Fact, Source, State
from hangwatch.redact import redacted_verdict
from hangwatch.sinks.alerts import (
    Alert,
    AlertDispatcher,
    DeliveryError,
    RetryPolicy,
    _check,
    slack_message,
)
from hangwatch.sinks.store import HistoryStore
from helpers.serve_fixtures import SECRET, make_verdict


class RecordingSink:
    """A sink that keeps what it was sent (or fails as told): the dispatcher's logic without HTTP."""

    def __init__(self, name="rec", fail: DeliveryError | None = None):
        self.name, self.fail, self.sent = name, fail, []

    def send(self, alert: Alert) -> None:
        if self.fail:
            raise self.fail
        self.sent.append(alert)


def firing(verdict=None, **kw) -> Alert:
    body = redacted_verdict(verdict or make_verdict())
    return Alert("firing", "srv", "ep1", body, at=1_000.0, started=990.0, **kw)


# ---------------------------------------------------------------- Block Kit


def test_firing_message_names_cause_phase_ranks_evidence_remedy():
    message = slack_message(firing())
    text = json.dumps(message)
    assert message["blocks"][0]["type"] == "header" and "STALLED" in message["blocks"][0]["text"]["text"]
    for needle in ("nccl_peer_exited", "dist_init", "TP1", "TP1 exited with code 1", "procs.json", "Remedy"):
        assert needle in text
    assert SECRET not in text and "nccl_peer_exited" in message["text"]


def test_links_only_with_a_public_url_and_without_its_credentials():
    assert not [b for b in slack_message(firing())["blocks"] if b["type"] == "actions"]
    blocks = slack_message(firing(), "https://u:pw@hw.example:9464/?token=x")["blocks"]
    urls = [e["url"] for b in blocks if b["type"] == "actions" for e in b["elements"]]
    assert urls[:3] == ["https://hw.example:9464/", "https://hw.example:9464/verdict", "https://hw.example:9464/bundle"]


def test_huge_evidence_stays_within_slack_limits():
    facts = tuple(Fact("frame " * 2000, Source(f"stacks/TP{i}.json", detail="x" * 500)) for i in range(300))
    verdict = make_verdict(evidence=facts, message="m" * 10_000, remedy="r" * 10_000, ranks=tuple(f"TP{i}" for i in range(300)))
    message = slack_message(firing(verdict), "http://h:1")
    assert len(message["blocks"]) <= 50
    for block in message["blocks"]:
        if block["type"] == "section":
            assert len(block.get("text", {}).get("text", "")) <= 3000
            assert all(len(f["text"]) <= 2000 for f in block.get("fields", []))
        if block["type"] == "header":
            assert len(block["text"]["text"]) <= 150
    assert "more in /verdict" in json.dumps(message)


def test_resolved_message():
    alert = Alert("resolved", "srv", "ep1", redacted_verdict(make_verdict(State.READY, None)), 1_090.0, 990.0)
    message = slack_message(alert)
    assert "RESOLVED" in message["blocks"][0]["text"]["text"] and "1m 40s" in json.dumps(message)


# ---------------------------------------------------------------- responses and retries


@pytest.mark.parametrize("status, permanent", [(500, False), (503, False), (408, False), (400, True), (404, True)])
def test_status_mapping(status, permanent):
    with pytest.raises(DeliveryError) as info:
        _check(status, {}, "garbage")
    assert info.value.permanent is permanent


def test_429_carries_retry_after():
    with pytest.raises(DeliveryError) as info:
        _check(429, {"Retry-After": "7"}, "")
    assert info.value.retry_after == 7.0 and not info.value.permanent
    _check(200, {}, "ok")


def test_retry_policy():
    policy = RetryPolicy(attempts=3, base_s=1.0, cap_s=4.0, max_retry_after_s=60)
    assert policy.delay(1, DeliveryError("x", permanent=True)) is None
    assert policy.delay(1, DeliveryError("x", retry_after=5)) == 5
    assert policy.delay(1, DeliveryError("x", retry_after=600)) == 60  # waited on up to the cap, never given up (probe W6)
    assert 0.8 <= policy.delay(1, DeliveryError("x")) <= 1.2
    assert policy.delay(3, DeliveryError("x")) is None


# ---------------------------------------------------------------- episodes


def run(dispatcher: AlertDispatcher, *verdicts) -> None:
    for verdict in verdicts:
        dispatcher.on_verdict(verdict, "srv")
        assert dispatcher.flush(5)


def test_one_alert_per_episode_and_a_resolved_message(tmp_path):
    # GIVEN a dispatcher with one sink
    sink = RecordingSink()
    dispatcher = AlertDispatcher([sink], HistoryStore(tmp_path / "h.db"))
    # WHEN the server stalls, keeps stalling, crashes, then becomes ready
    run(dispatcher, make_verdict(State.PROGRESSING, None), make_verdict(), make_verdict(),
        make_verdict(State.CRASHED, "oom"), make_verdict(State.READY, None))
    # THEN one firing and one resolved message for the same episode
    assert [a.kind for a in sink.sent] == ["firing", "resolved"]
    assert sink.sent[0].episode_id == sink.sent[1].episode_id
    states = [t.state for t in reversed(dispatcher.store.transitions())]
    assert states == ["progressing", "stalled", "crashed", "ready"]
    dispatcher.close()


def test_a_new_stall_is_a_new_episode(tmp_path):
    sink = RecordingSink()
    dispatcher = AlertDispatcher([sink], HistoryStore(tmp_path / "h.db"))
    run(dispatcher, make_verdict(), make_verdict(State.PROGRESSING, None), make_verdict())
    assert [a.kind for a in sink.sent] == ["firing", "resolved", "firing"]
    assert sink.sent[0].episode_id != sink.sent[2].episode_id
    dispatcher.close()


def test_restart_does_not_alert_an_alerted_episode_again(tmp_path):
    first = RecordingSink()
    dispatcher = AlertDispatcher([first], HistoryStore(tmp_path / "h.db"))
    run(dispatcher, make_verdict())
    dispatcher.close()
    # WHEN a new dispatcher on the same file sees the same stall
    second = RecordingSink()
    again = AlertDispatcher([second], HistoryStore(tmp_path / "h.db"))
    run(again, make_verdict(), make_verdict(State.READY, None))
    # THEN no second firing, but the recovery is announced; history has no duplicate transition
    assert [a.kind for a in first.sent] == ["firing"]
    assert [a.kind for a in second.sent] == ["resolved"]
    assert [t.state for t in reversed(again.store.transitions())] == ["stalled", "ready"]
    again.close()


def test_pending_alert_of_a_killed_daemon_is_sent_after_restart(tmp_path):
    store = HistoryStore(tmp_path / "h.db")
    episode = store.start_episode("srv", "stalled", "nccl_peer_exited")
    store.record_alert(episode.id, "rec", "firing", "pending")
    sink = RecordingSink()
    dispatcher = AlertDispatcher([sink], store)
    run(dispatcher, make_verdict())
    assert [(a.kind, a.episode_id) for a in sink.sent] == [("firing", episode.id)]
    dispatcher.close()


def test_permanent_failure_is_recorded_and_resolved_skipped(tmp_path):
    sink = RecordingSink(fail=DeliveryError("HTTP 404: no_service", permanent=True))
    dispatcher = AlertDispatcher([sink], HistoryStore(tmp_path / "h.db"))
    run(dispatcher, make_verdict(), make_verdict(State.READY, None))
    records = {(a.kind, a.status) for a in dispatcher.store.alerts()}
    assert records == {("firing", "failed"), ("resolved", "skipped")}
    dispatcher.close()


def test_on_verdict_never_waits_on_a_slow_sink(tmp_path):
    release, entered = threading.Event(), threading.Event()

    class Stuck(RecordingSink):
        def send(self, alert):
            entered.set()
            release.wait(30)  # a peer that does not answer until the test lets it
            super().send(alert)

    sink = Stuck()
    dispatcher = AlertDispatcher([sink], HistoryStore(tmp_path / "h.db"))
    verdicts = [make_verdict(State.STALLED if i % 2 else State.PROGRESSING, "c" if i % 2 else None) for i in range(50)]
    try:
        for verdict in verdicts:
            dispatcher.on_verdict(verdict, "srv")  # returns although the sink is stuck: behaviour, not a clock
        assert entered.wait(10)  # the sink really is blocked in a send while the loop went on
        assert sink.sent == []
    finally:
        release.set()
        dispatcher.close(timeout=5)


def test_cause_refined_sends_one_message_per_more_confident_cause(tmp_path):
    # GIVEN the live loop's episode: first "unknown", refined to nccl_init, then a weaker cause
    # that the loop does not adopt (docs/live.md): the verdicts it publishes
    from hangwatch.watch.episodes import EpisodeTracker

    tracker = EpisodeTracker(new_id=lambda: "live-ep")
    raw = [make_verdict(cause="unknown", confidence=0.2), make_verdict(cause="nccl_init", confidence=0.7),
           make_verdict(cause="nccl_init", confidence=0.7), make_verdict(cause="jit_compile_slow", confidence=0.4)]
    published = [tracker.update(v, [], t=float(i), wall=1_000.0 + i) for i, v in enumerate(raw)]
    sink = RecordingSink()
    dispatcher = AlertDispatcher([sink], HistoryStore(tmp_path / "h.db"))
    # WHEN they reach the dispatcher
    run(dispatcher, *published)
    # THEN one firing, one "cause refined", all under the live loop's episode id
    assert [a.kind for a in sink.sent] == ["firing", "refined:nccl_init"]
    assert {a.episode_id for a in sink.sent} == {"live-ep"}
    message = slack_message(sink.sent[1])
    assert "cause refined to nccl_init" in message["text"]
    assert [r.cause for r in dispatcher.store.refinements()] == ["nccl_init"]
    dispatcher.close()
