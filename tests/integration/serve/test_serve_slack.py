"""Alerts posted by slack-sdk's WebhookClient to a real HTTP receiver on loopback."""

import time

from hangwatch.model import State
from hangwatch.sinks.alerts import (
    AlertDispatcher,
    RetryPolicy,
    SlackSink,
    WebhookSink,
    slack_client,
)
from hangwatch.sinks.store import HistoryStore
from helpers.serve_support import SECRET, Receiver, free_port, make_verdict

FAST = RetryPolicy(attempts=4, base_s=0.1, cap_s=0.5)


def dispatcher_for(url: str, tmp_path, *, public_url=None, timeout=2.0, policy=FAST) -> AlertDispatcher:
    sink = SlackSink(slack_client(url, timeout=timeout), public_url)
    return AlertDispatcher([sink], HistoryStore(tmp_path / "h.db"), policy=policy)


def statuses(dispatcher):
    return [(a.kind, a.status) for a in reversed(dispatcher.store.alerts())]


def test_up_one_block_kit_message_per_episode_then_resolved(receiver, tmp_path):
    # GIVEN a receiver that answers "ok"
    dispatcher = dispatcher_for(receiver.url, tmp_path, public_url="http://hw.example:9464")
    # WHEN a stall is seen on many ticks, then the server becomes ready
    for _ in range(5):
        dispatcher.on_verdict(make_verdict(), "sglang-a")
    dispatcher.on_verdict(make_verdict(State.READY, None), "sglang-a")
    assert dispatcher.flush(10)
    # THEN one firing and one resolved message
    assert len(receiver.bodies) == 2
    firing, resolved = receiver.bodies
    assert firing["blocks"][0]["type"] == "header" and "STALLED" in firing["blocks"][0]["text"]["text"]
    assert any(b["type"] == "actions" for b in firing["blocks"])
    assert "RESOLVED" in resolved["blocks"][0]["text"]["text"]
    assert SECRET not in str(receiver.bodies)
    assert statuses(dispatcher) == [("firing", "sent"), ("resolved", "sent")]
    dispatcher.close()


def test_down_then_up_is_retried_with_backoff(tmp_path):
    # GIVEN nothing listening yet
    port = free_port()
    dispatcher = dispatcher_for(f"http://127.0.0.1:{port}/hook", tmp_path, policy=RetryPolicy(attempts=8, base_s=0.2, cap_s=0.4))
    dispatcher.on_verdict(make_verdict(), "srv")
    time.sleep(0.5)
    assert statuses(dispatcher) == [("firing", "pending")]
    # WHEN the receiver comes up on that port
    rx = Receiver(port)
    try:
        # THEN the alert arrives once
        assert dispatcher.flush(10) and rx.wait_for(1)
        assert len(rx.bodies) == 1 and statuses(dispatcher) == [("firing", "sent")]
        assert dispatcher.store.alerts()[0].attempts >= 2
    finally:
        rx.close()
        dispatcher.close()


def test_429_honours_retry_after(tmp_path):
    rx = Receiver(mode="ratelimit", limited=1, retry_after="1")
    try:
        dispatcher = dispatcher_for(rx.url, tmp_path)
        start = time.monotonic()
        dispatcher.on_verdict(make_verdict(), "srv")
        assert dispatcher.flush(10)
        assert len(rx.bodies) == 1 and rx.hits == 2
        assert rx.times[0] - start >= 0.95  # waited Retry-After, not the 0.1 s backoff
        dispatcher.close()
    finally:
        rx.close()


def test_slow_receiver_within_timeout_delivers_and_never_holds_the_loop(tmp_path):
    rx = Receiver(mode="slow", delay=1.0)
    try:
        dispatcher = dispatcher_for(rx.url, tmp_path, timeout=3.0)
        start = time.perf_counter()
        dispatcher.on_verdict(make_verdict(), "srv")
        assert time.perf_counter() - start < 0.05
        assert dispatcher.flush(10) and len(rx.bodies) == 1
        dispatcher.close()
    finally:
        rx.close()


def test_slow_receiver_past_timeout_is_retried_then_given_up(tmp_path):
    rx = Receiver(mode="slow", delay=3.0)
    try:
        dispatcher = dispatcher_for(rx.url, tmp_path, timeout=1.0, policy=RetryPolicy(attempts=2, base_s=0.1, after_timeout_s=0.1))
        dispatcher.on_verdict(make_verdict(), "srv")
        assert dispatcher.flush(15)
        record = dispatcher.store.alerts()[0]
        assert (record.status, record.attempts) == ("failed", 2) and "timed out" in record.detail.lower()
        dispatcher.close()
    finally:
        rx.close()


def test_garbage_and_500_are_retried_then_recorded_as_failed(tmp_path):
    for mode in ("garbage", "error"):
        rx = Receiver(mode=mode)
        try:
            dispatcher = dispatcher_for(rx.url, tmp_path / mode if (tmp_path / mode).mkdir() is None else None)
            dispatcher.on_verdict(make_verdict(), "srv")
            assert dispatcher.flush(10)
            record = dispatcher.store.alerts()[0]
            assert record.status == "failed" and record.attempts == FAST.attempts and rx.hits == FAST.attempts
            assert record.detail
            dispatcher.close()
        finally:
            rx.close()


def test_generic_webhook_posts_the_json_verdict(receiver, tmp_path):
    dispatcher = AlertDispatcher([WebhookSink(receiver.url)], HistoryStore(tmp_path / "h.db"), policy=FAST)
    dispatcher.on_verdict(make_verdict(), "srv")
    assert dispatcher.flush(10)
    body = receiver.bodies[0]
    assert body["event"] == "firing" and body["server"] == "srv"
    assert body["verdict"]["cause"] == "nccl_peer_exited" and SECRET not in str(body)
    dispatcher.close()
