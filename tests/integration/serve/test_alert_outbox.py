"""Alert delivery against real HTTP receivers and a real SQLite history (probe W2, W3, W6, W10, C2, C4, A18, C3)."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from hangwatch.model import State
from hangwatch.sinks.alerts import (
    Alert,
    AlertDispatcher,
    RetryPolicy,
    SlackSink,
    WebhookSink,
    slack_client,
    slack_message,
)
from hangwatch.sinks.store import HistoryError, HistoryStore
from helpers.serve_support import Receiver, free_port, make_verdict

UNTIL_DELIVERED = RetryPolicy(base_s=0.1, cap_s=0.3, max_retry_after_s=0.5)  # attempts=None: never gives up


def _statuses(store: HistoryStore) -> list[tuple[str, str]]:
    return [(a.kind, a.status) for a in reversed(store.alerts())]


def _wait(predicate, timeout: float = 20.0) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_a_redirect_is_not_followed_and_not_sent(tmp_path: Path) -> None:
    elsewhere = Receiver()
    rx = Receiver(mode="redirect", retry_after=f"http://127.0.0.1:{elsewhere.port}/elsewhere")
    try:
        dispatcher = AlertDispatcher([WebhookSink(rx.url)], HistoryStore(tmp_path / "h.db"), policy=UNTIL_DELIVERED)
        dispatcher.on_verdict(make_verdict(), "srv")
        assert dispatcher.flush(10)
        record = dispatcher.store.alerts()[0]
        assert record.status == "failed" and "302" in (record.detail or "")
        assert elsewhere.gets == 0 and not elsewhere.bodies and rx.hits == 1
        dispatcher.close()
    finally:
        rx.close()
        elsewhere.close()


def test_a_long_retry_after_is_waited_on_up_to_the_cap_not_given_up(tmp_path: Path) -> None:
    rx = Receiver(mode="ratelimit", limited=1, retry_after="3600")
    try:
        dispatcher = AlertDispatcher([WebhookSink(rx.url)], HistoryStore(tmp_path / "h.db"), policy=UNTIL_DELIVERED)
        dispatcher.on_verdict(make_verdict(), "srv")
        assert rx.wait_for(1, 10) and dispatcher.flush(10)
        assert _statuses(dispatcher.store) == [("firing", "sent")] and len(rx.bodies) == 1
        dispatcher.close()
    finally:
        rx.close()


def test_a_slow_receiver_gets_one_copy_with_an_idempotency_key(tmp_path: Path) -> None:
    rx = Receiver(mode="slow", delay=1.5)
    try:
        sink = WebhookSink(rx.url, timeout=5.0)
        dispatcher = AlertDispatcher([sink], HistoryStore(tmp_path / "h.db"), policy=UNTIL_DELIVERED)
        dispatcher.on_verdict(make_verdict(), "srv")
        assert dispatcher.flush(20)
        assert rx.hits == 1 and len(rx.bodies) == 1
        episode = rx.bodies[0]["episode_id"]
        assert rx.headers[0].get("Idempotency-Key") == f"{episode}:firing"
        dispatcher.close()
    finally:
        rx.close()


def test_a_receiver_down_across_a_restart_gets_the_page_once_when_back(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/hook"
    history = tmp_path / "h.db"
    first = AlertDispatcher([WebhookSink(url, timeout=1.0)], HistoryStore(history), policy=UNTIL_DELIVERED)
    first.on_verdict(make_verdict(), "srv")
    assert _wait(lambda: any(a.attempts >= 2 for a in first.store.alerts()))  # refused, and retried
    first.close()  # the daemon stops (a kill -9 leaves the same rows: each write is its own transaction)
    assert _statuses(HistoryStore(history)) == [("firing", "pending")]
    rx = Receiver(port)
    try:
        second = AlertDispatcher([WebhookSink(url)], HistoryStore(history), policy=UNTIL_DELIVERED)
        assert rx.wait_for(1, 20)
        assert _wait(lambda: _statuses(second.store) == [("firing", "sent")])
        second.on_verdict(make_verdict(), "srv")  # the same stall seen again by the new run
        assert second.flush(10)
        time.sleep(0.5)
        assert len(rx.bodies) == 1
        second.close()
    finally:
        rx.close()


def test_restarting_during_a_stall_pages_once(tmp_path: Path) -> None:
    rx = Receiver()
    history = tmp_path / "h.db"
    try:
        for _ in range(3):  # each restart's watcher says "starting" first, then "stalled" again
            dispatcher = AlertDispatcher([WebhookSink(rx.url)], HistoryStore(history), policy=UNTIL_DELIVERED)
            dispatcher.on_verdict(make_verdict(State.STARTING, cause=None), "srv")
            dispatcher.on_verdict(make_verdict(), "srv")
            assert dispatcher.flush(10)
            dispatcher.close()
        assert [b["event"] for b in rx.bodies] == ["firing"]
    finally:
        rx.close()


def test_a_failing_history_write_delays_the_resolved_message_never_drops_it(tmp_path: Path) -> None:
    rx = Receiver()
    try:
        store = HistoryStore(tmp_path / "h.db")
        dispatcher = AlertDispatcher([WebhookSink(rx.url)], store, policy=UNTIL_DELIVERED)
        dispatcher.on_verdict(make_verdict(), "srv")
        assert rx.wait_for(1) and dispatcher.flush(10)
        store._db.execute("PRAGMA query_only = ON")  # every write now fails in SQLite itself, as on a full disk
        ready = make_verdict(State.READY, cause=None)
        dispatcher.on_verdict(ready, "srv")
        assert dispatcher.flush(10)
        assert len(rx.bodies) == 1  # nothing could be recorded, so nothing was sent
        store._db.execute("PRAGMA query_only = OFF")  # space again
        dispatcher.on_verdict(ready, "srv")  # the next tick
        assert rx.wait_for(2) and dispatcher.flush(10)
        assert [b["event"] for b in rx.bodies] == ["firing", "resolved"]
        dispatcher.close()
    finally:
        rx.close()


def test_slack_text_from_the_log_cannot_mention_or_disguise_links() -> None:
    verdict = make_verdict()
    body = {**verdict.to_dict(), "message": "boom <!channel> see <https://evil.example/login|the runbook>",
            "evidence": [{"text": "<!here> & <@U123>", "source": "server.log:3"}]}
    payload = str(slack_message(Alert("firing", "srv <!everyone>", "ep1", body, 0.0, 0.0)))
    for live in ("<!channel>", "<!here>", "<https://evil", "<@U123>", "<!everyone>"):
        assert live not in payload
    assert "&lt;!channel&gt;" in payload


def test_a_bad_history_path_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "notadb").write_bytes(b"x" * 4096)
    for path in (tmp_path / "missing" / "h.db", tmp_path):
        with pytest.raises(HistoryError, match="cannot use the history file"):
            HistoryStore(path)
    # a file that is no database is damaged: `open_or_recover` moves it aside (tests/unit/sinks/test_store.py)
    with pytest.raises(HistoryError, match="is damaged"):
        HistoryStore(tmp_path / "notadb")


def test_slack_sink_does_not_follow_redirects_either(tmp_path: Path) -> None:
    elsewhere = Receiver()
    rx = Receiver(mode="redirect", retry_after=f"http://127.0.0.1:{elsewhere.port}/x")
    try:
        sink = SlackSink(slack_client(rx.url))
        dispatcher = AlertDispatcher([sink], HistoryStore(tmp_path / "h.db"), policy=UNTIL_DELIVERED)
        dispatcher.on_verdict(make_verdict(), "srv")
        assert dispatcher.flush(10)
        assert dispatcher.store.alerts()[0].status == "failed" and elsewhere.gets == 0
        dispatcher.close()
    finally:
        rx.close()
        elsewhere.close()


def test_a_receiver_slower_than_the_timeout_gets_one_copy_until_the_long_backoff(tmp_path: Path) -> None:
    # Before: the 1 s client timeout, then a retry 0.1 s later: a second copy while the first was still
    # being handled. Now a timeout means "the peer may have it": not resent before after_timeout_s,
    # not even by a restarted daemon; then resent with the same Idempotency-Key (at-least-once).
    rx = Receiver(mode="slow", delay=2.5)
    history = tmp_path / "h.db"
    patient = RetryPolicy(base_s=0.05, cap_s=0.1, after_timeout_s=3600)
    try:
        first = AlertDispatcher([WebhookSink(rx.url, timeout=1.0)], HistoryStore(history), policy=patient)
        first.on_verdict(make_verdict(), "srv")
        assert rx.wait_for(1, 30)  # the slow receiver finished handling its one copy
        assert _wait(lambda: "may have it" in (first.store.alerts()[0].detail or ""))
        record = first.store.alerts()[0]
        assert record.status == "pending" and "not sent again for 3600 s" in (record.detail or "")
        time.sleep(1.0)  # twenty of the old backoffs
        assert rx.hits == 1
        first.close()

        again = AlertDispatcher([WebhookSink(rx.url, timeout=1.0)], HistoryStore(history), policy=patient)
        time.sleep(1.0)
        assert rx.hits == 1, "a restart sent the timed-out alert again at once"
        again.close()

        rx.mode = "ok"  # the receiver is fast again; the backoff has run out
        last = AlertDispatcher([WebhookSink(rx.url, timeout=1.0)], HistoryStore(history),
                               policy=replace(patient, after_timeout_s=0.0))  # fmt: skip
        assert rx.wait_for(2, 30)
        assert _wait(lambda: _statuses(last.store) == [("firing", "sent")])
        keys = {h.get("Idempotency-Key") for h in rx.headers}
        assert len(keys) == 1 and len(rx.bodies) == 2
        last.close()
    finally:
        rx.close()
