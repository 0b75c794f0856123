"""Retention of the history file (sinks/store.py, issue 25): old and surplus rows go, an open
episode and an owed alert never do, a delivered alert's outbox payload goes at once."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from hangwatch.sinks.store import HistoryStore, Retention
from hangwatch.watch.budgets import PastStart, SetupKey

DAY = 86400.0
KEY = SetupKey("sglang", "0.5.23", "tiny", 1, "cpu")


def _store(path: Path, **retention: float) -> HistoryStore:
    return HistoryStore(path, clock=lambda: 100 * DAY, retention=Retention(every_writes=0, **retention))  # type: ignore[arg-type]


def _episode(store: HistoryStore, name: str, started: float, *, ended: bool, alert: str = "sent") -> str:
    episode = store.start_episode("srv", "stalled", "nccl_init", at=started, episode_id=name)
    store.refine_episode(episode.id, "dead_rank", 0.9, at=started + 1)
    store.put_outbox(episode.id, "slack", "firing", {"episode_id": episode.id})
    store.record_alert(episode.id, "slack", "firing", alert, at=started + 2)
    store.record_transition("srv", "stalled", episode_id=episode.id, at=started)
    if ended:
        store.end_episode(episode.id, at=started + 10)
    return episode.id


def test_old_rows_go_and_open_episodes_and_owed_alerts_stay(tmp_path: Path) -> None:
    store = _store(tmp_path / "h.sqlite", days=30)
    _episode(store, "old-ended", 10 * DAY, ended=True)
    _episode(store, "old-open", 10 * DAY, ended=False)
    _episode(store, "old-owed", 10 * DAY, ended=True, alert="pending")
    _episode(store, "new-ended", 99 * DAY, ended=True)
    store.record_start(KEY, PastStart(10.0, {"weight_load": 5.0}), at=10 * DAY)
    store.record_start(KEY, PastStart(11.0, {"weight_load": 6.0}), at=99 * DAY)
    gone = store.prune()
    assert {e.id for e in store.episodes()} == {"old-open", "old-owed", "new-ended"}
    assert gone["episodes"] == 1 and gone["starts"] == 1 and gone["transitions"] == 3
    assert store.alert_status("old-ended", "slack") is None  # its record went with it
    assert store.alert_status("old-open", "slack") == "sent" and store.alert_status("old-owed", "slack") == "pending"
    assert store.owed_alerts("slack") == [{"episode_id": "old-owed"}]  # the owed payload is still there to re-send
    assert store.counts()["outbox"] == 1  # delivered payloads went at once
    assert [s.ready_s for s in store.past_starts(KEY)] == [11.0]
    assert [r.episode_id for r in store.refinements()] == ["new-ended", "old-owed", "old-open"]


def test_row_limits_keep_the_newest(tmp_path: Path) -> None:
    store = _store(tmp_path / "h.sqlite", max_transitions=5, max_episodes=3, max_starts=2)
    for n in range(10):
        _episode(store, f"e{n}", 99 * DAY + n, ended=True)
        store.record_start(KEY, PastStart(float(n), {}), at=99 * DAY + n)
    store.prune()
    assert [e.id for e in store.episodes()] == ["e9", "e8", "e7"]
    assert [t.episode_id for t in store.transitions()] == ["e9", "e8", "e7", "e6", "e5"]
    assert [s.ready_s for s in store.past_starts(KEY)] == [9.0, 8.0]
    assert store.counts() == {"transitions": 5, "episodes": 3, "episode_causes": 3, "alerts": 3, "outbox": 0, "starts": 2}


def test_the_store_prunes_itself_every_n_writes(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite", retention=Retention(max_transitions=10, every_writes=20))
    for n in range(200):
        store.record_transition("srv", "starting" if n % 2 else "progressing")
    assert store.counts()["transitions"] <= 10 + 20


def test_history_prune_command(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    store = HistoryStore(path)
    for n in range(30):
        store.record_transition("srv", "starting", at=time.time() - 60 + n)
    store.close()
    done = subprocess.run([str(Path(sys.executable).parent / "hangwatch"), "history", "prune", "--history", str(path),
                           "--max-transitions", "7"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "transitions: 30 -> 7 (23 dropped)" in done.stdout
    missing = subprocess.run([str(Path(sys.executable).parent / "hangwatch"), "history", "prune", "--history",
                              str(tmp_path / "none.sqlite")], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "no history file" in missing.stderr
