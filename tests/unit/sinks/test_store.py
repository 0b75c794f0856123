import sqlite3

from hangwatch.sinks.store import HistoryStore


def test_wal_mode(tmp_path):
    HistoryStore(tmp_path / "h.db")
    assert sqlite3.connect(tmp_path / "h.db").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_transitions_newest_first_with_limit(tmp_path):
    store = HistoryStore(tmp_path / "h.db")
    for i, state in enumerate(["starting", "progressing", "stalled"]):
        store.record_transition("srv", state, at=float(i), verdict={"state": state})
    got = store.transitions(limit=2)
    assert [t.state for t in got] == ["stalled", "progressing"]
    assert store.last_transition("srv").state == "stalled"
    assert store.last_transition("other") is None


def test_episode_open_then_ended(tmp_path):
    store = HistoryStore(tmp_path / "h.db")
    episode = store.start_episode("srv", "stalled", "nccl_peer_exited", at=10.0)
    assert store.open_episode("srv") == episode
    store.end_episode(episode.id, at=20.0)
    assert store.open_episode("srv") is None
    assert store.episodes()[0].ended == 20.0


def test_one_record_per_episode_sink_kind_and_alerted_only_when_sent(tmp_path):
    store = HistoryStore(tmp_path / "h.db")
    store.record_alert("e1", "slack", "firing", "pending")
    assert not store.alerted("e1")
    store.record_alert("e1", "slack", "firing", "sent", attempts=2)
    assert store.alerted("e1") and not store.alerted("e1", "resolved")
    assert [(a.status, a.attempts) for a in store.alerts()] == [("sent", 2)]
    assert store.alert_status("e1", "slack") == "sent"
    assert store.alert_status("e1", "webhook") is None


def test_history_survives_reopening(tmp_path):
    store = HistoryStore(tmp_path / "h.db")
    episode = store.start_episode("srv", "crashed", None)
    store.record_alert(episode.id, "slack", "firing", "sent")
    store.close()
    again = HistoryStore(tmp_path / "h.db")
    assert again.open_episode("srv").id == episode.id and again.alerted(episode.id)
