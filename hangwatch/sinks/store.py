"""History in SQLite: verdict transitions, stall episodes (with their refined causes), alert
deliveries, and past starts (phase durations per setup: the learned budgets and the ETA).

WAL mode, and every write in its own committed transaction, so that a daemon killed with -9 loses
at most the write in flight and a restarted daemon knows which episode is open and which alerts
already went out (it must not page anyone twice for one stall).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hangwatch.errors import HangwatchError
from hangwatch.watch.budgets import PastStart, SetupKey

__all__ = ["HistoryError", "HistoryStore", "Episode", "Transition", "AlertRecord", "Refinement", "RemedyRecord"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS transitions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    server TEXT NOT NULL,
    state TEXT NOT NULL,
    prev_state TEXT,
    cause TEXT,
    rule TEXT,
    phase TEXT,
    episode_id TEXT,
    verdict TEXT
);
CREATE TABLE IF NOT EXISTS episodes (
    id TEXT PRIMARY KEY,
    server TEXT NOT NULL,
    started REAL NOT NULL,
    ended REAL,
    state TEXT NOT NULL,
    cause TEXT
);
CREATE TABLE IF NOT EXISTS alerts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    episode_id TEXT NOT NULL,
    sink TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    detail TEXT,
    UNIQUE (episode_id, sink, kind)
);
CREATE INDEX IF NOT EXISTS episodes_open ON episodes (server, ended);
CREATE TABLE IF NOT EXISTS outbox (
    episode_id TEXT NOT NULL,
    sink TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (episode_id, sink, kind)
);
CREATE TABLE IF NOT EXISTS episode_causes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    episode_id TEXT NOT NULL,
    at REAL NOT NULL,
    cause TEXT NOT NULL,
    confidence REAL NOT NULL,
    UNIQUE (episode_id, cause)
);
CREATE TABLE IF NOT EXISTS starts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    engine TEXT NOT NULL,
    version TEXT NOT NULL,
    model TEXT NOT NULL,
    tp INTEGER NOT NULL,
    gpu_model TEXT NOT NULL,
    ready_s REAL NOT NULL,
    phases TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS starts_setup ON starts (engine, version, model, tp, gpu_model);
CREATE TABLE IF NOT EXISTS remedies (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    engine TEXT NOT NULL,
    version TEXT NOT NULL,
    model TEXT NOT NULL,
    tp INTEGER NOT NULL,
    gpu_model TEXT NOT NULL,
    cause TEXT NOT NULL,
    change_id TEXT NOT NULL,
    what TEXT NOT NULL,
    cost TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS remedies_setup ON remedies (engine, version, model, tp, gpu_model);
"""


@dataclass(frozen=True)
class RemedyRecord:
    """A safe launch change after which a setup started (hangwatch/data/remedies.yaml)."""

    cause: str
    change_id: str
    what: str  # as done: "added --disable-cuda-graph"
    cost: str


@dataclass(frozen=True)
class Episode:
    id: str
    server: str
    started: float
    ended: float | None
    state: str
    cause: str | None


@dataclass(frozen=True)
class Refinement:
    episode_id: str
    at: float
    cause: str
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Transition:
    id: int
    at: float
    server: str
    state: str
    prev_state: str | None
    cause: str | None
    rule: str | None
    phase: str | None
    episode_id: str | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class AlertRecord:
    at: float
    episode_id: str
    sink: str
    kind: str  # "firing" | "resolved"
    status: str  # "pending" | "sent" | "failed"
    attempts: int
    detail: str | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class HistoryError(HangwatchError):
    help_text = "--history takes a writable SQLite file path (its folder must exist); omit it to keep no history."


class HistoryStore:
    """One SQLite file; safe to share between the dispatcher thread and API request threads."""

    def __init__(self, path: str | Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = str(path)
        self._clock = clock
        # One connection behind a lock: writes are rare (transitions, alerts) and reads are small.
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=5.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL survives a process crash (kill -9); only a power loss may drop the last commit.
            self._db.execute("PRAGMA synchronous=NORMAL")
            with self._lock:
                self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:  # a missing folder, a read-only or full disk, not a database
            raise HistoryError(f"cannot use the history file {self.path}: {exc}") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _tx(self) -> _Tx:
        return _Tx(self._db, self._lock)

    # ------------------------------------------------------------ transitions

    def record_transition(
        self,
        server: str,
        state: str,
        *,
        prev_state: str | None = None,
        cause: str | None = None,
        rule: str | None = None,
        phase: str | None = None,
        episode_id: str | None = None,
        verdict: dict[str, Any] | None = None,
        at: float | None = None,
    ) -> int:
        row = (self._clock() if at is None else at, server, state, prev_state, cause, rule, phase, episode_id,
               None if verdict is None else json.dumps(verdict))
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO transitions (at, server, state, prev_state, cause, rule, phase, episode_id, verdict)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
            assert cur.lastrowid is not None  # an INSERT into a rowid table always sets it
            return cur.lastrowid

    def transitions(self, limit: int = 100) -> list[Transition]:
        """The newest `limit` transitions, newest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, at, server, state, prev_state, cause, rule, phase, episode_id"
                " FROM transitions ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return [Transition(*row) for row in rows]

    def last_transition(self, server: str) -> Transition | None:
        with self._lock:
            row = self._db.execute(
                "SELECT id, at, server, state, prev_state, cause, rule, phase, episode_id"
                " FROM transitions WHERE server = ? ORDER BY id DESC LIMIT 1", (server,)).fetchone()
        return Transition(*row) if row else None

    # ------------------------------------------------------------ episodes

    def open_episode(self, server: str) -> Episode | None:
        """The stall episode of `server` that has not ended, if any."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, server, started, ended, state, cause FROM episodes"
                " WHERE server = ? AND ended IS NULL ORDER BY started DESC LIMIT 1", (server,)).fetchone()
        return Episode(*row) if row else None

    def start_episode(self, server: str, state: str, cause: str | None, *, at: float | None = None,
                      episode_id: str | None = None) -> Episode:
        """A new episode; `episode_id`: the live loop's own (so /verdict and /history agree)."""
        episode = Episode(episode_id or uuid.uuid4().hex[:16], server, self._clock() if at is None else at, None,
                          state, cause)
        with self._tx() as db:
            db.execute("INSERT INTO episodes (id, server, started, ended, state, cause) VALUES (?, ?, ?, ?, ?, ?)",
                       (episode.id, server, episode.started, None, state, cause))
        return episode

    def end_episode(self, episode_id: str, *, at: float | None = None) -> None:
        with self._tx() as db:
            db.execute("UPDATE episodes SET ended = ? WHERE id = ?", (self._clock() if at is None else at, episode_id))

    def refine_episode(self, episode_id: str, cause: str, confidence: float, *, at: float | None = None) -> bool:
        """Record the episode's new cause; False when this cause was already recorded for it."""
        with self._tx() as db:
            cur = db.execute("INSERT OR IGNORE INTO episode_causes (episode_id, at, cause, confidence) VALUES (?, ?, ?, ?)",
                             (episode_id, self._clock() if at is None else at, cause, confidence))
            db.execute("UPDATE episodes SET cause = ? WHERE id = ?", (cause, episode_id))
            return cur.rowcount > 0

    def refinements(self, limit: int = 100) -> list[Refinement]:
        with self._lock:
            rows = self._db.execute("SELECT episode_id, at, cause, confidence FROM episode_causes"
                                    " ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return [Refinement(*row) for row in rows]

    def episodes(self, limit: int = 100) -> list[Episode]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, server, started, ended, state, cause FROM episodes ORDER BY started DESC LIMIT ?",
                (limit,)).fetchall()
        return [Episode(*row) for row in rows]

    # ------------------------------------------------------------ alerts

    def record_alert(
        self,
        episode_id: str,
        sink: str,
        kind: str,
        status: str,
        *,
        attempts: int = 0,
        detail: str | None = None,
        at: float | None = None,
    ) -> None:
        """Insert or update the one delivery record of (episode, sink, kind)."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO alerts (at, episode_id, sink, kind, status, attempts, detail)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (episode_id, sink, kind) DO UPDATE SET"
                " at = excluded.at, status = excluded.status, attempts = excluded.attempts, detail = excluded.detail",
                (self._clock() if at is None else at, episode_id, sink, kind, status, attempts, detail))

    def put_outbox(self, episode_id: str, sink: str, kind: str, payload: dict[str, Any]) -> None:
        """Keep the alert itself until it is delivered: a restarted daemon re-sends what it still owes."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO outbox (episode_id, sink, kind, payload) VALUES (?, ?, ?, ?)",
                       (episode_id, sink, kind, json.dumps(payload)))

    def owed_alerts(self, sink: str) -> list[dict[str, Any]]:
        """Payloads of `sink`'s alerts still pending, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT o.payload FROM outbox o JOIN alerts a ON a.episode_id = o.episode_id AND a.sink = o.sink"
                " AND a.kind = o.kind WHERE o.sink = ? AND a.status = 'pending' ORDER BY a.id", (sink,)).fetchall()
        return [json.loads(row[0]) for row in rows]

    def alert_status(self, episode_id: str, sink: str, kind: str = "firing") -> str | None:
        with self._lock:
            row = self._db.execute("SELECT status FROM alerts WHERE episode_id = ? AND sink = ? AND kind = ?",
                                   (episode_id, sink, kind)).fetchone()
        return row[0] if row else None

    def alerted(self, episode_id: str, kind: str = "firing") -> bool:
        """True when an alert of `kind` for this episode reached at least one sink."""
        with self._lock:
            row = self._db.execute("SELECT 1 FROM alerts WHERE episode_id = ? AND kind = ? AND status = 'sent'",
                                   (episode_id, kind)).fetchone()
        return row is not None

    def alert_record(self, episode_id: str, sink: str, kind: str) -> AlertRecord | None:
        with self._lock:
            row = self._db.execute(
                "SELECT at, episode_id, sink, kind, status, attempts, detail FROM alerts"
                " WHERE episode_id = ? AND sink = ? AND kind = ?", (episode_id, sink, kind)).fetchone()
        return AlertRecord(*row) if row else None

    def alerts(self, limit: int = 100) -> list[AlertRecord]:
        """The newest `limit` delivery records, newest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT at, episode_id, sink, kind, status, attempts, detail FROM alerts"
                " ORDER BY at DESC, id DESC LIMIT ?", (limit,)).fetchall()
        return [AlertRecord(*row) for row in rows]


    # ------------------------------------------------------------ past starts (watch.budgets.Book)

    def record_start(self, key: SetupKey, start: PastStart, *, at: float) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO starts (at, engine, version, model, tp, gpu_model, ready_s, phases)"
                       " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (at, *key.as_tuple(), start.ready_s, json.dumps(dict(start.phases))))

    def past_starts(self, key: SetupKey, limit: int = 50) -> list[PastStart]:
        """The newest `limit` starts of this setup that reached ready."""
        with self._lock:
            rows = self._db.execute(
                "SELECT ready_s, phases FROM starts WHERE engine = ? AND version = ? AND model = ? AND tp = ?"
                " AND gpu_model = ? ORDER BY id DESC LIMIT ?", (*key.as_tuple(), limit)).fetchall()
        return [PastStart(ready_s, _phases(text)) for ready_s, text in rows]


    # ------------------------------------------------------------ changes that made a setup start (watch.relaunch)

    def record_remedy(self, key: SetupKey, remedy: RemedyRecord, *, at: float) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO remedies (at, engine, version, model, tp, gpu_model, cause, change_id, what, cost)"
                       " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (at, *key.as_tuple(), remedy.cause, remedy.change_id, remedy.what, remedy.cost))

    def remedies(self, key: SetupKey, limit: int = 20) -> list[RemedyRecord]:
        """The changes that made this setup start after a relaunch, newest first, one per change."""
        with self._lock:
            rows = self._db.execute(
                "SELECT cause, change_id, what, cost, MAX(at) FROM remedies WHERE engine = ? AND version = ?"
                " AND model = ? AND tp = ? AND gpu_model = ? GROUP BY change_id ORDER BY MAX(at) DESC LIMIT ?",
                (*key.as_tuple(), limit)).fetchall()
        return [RemedyRecord(*row[:4]) for row in rows]


def _phases(text: str) -> dict[str, float]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return {str(k): float(v) for k, v in value.items() if isinstance(v, (int, float))} if isinstance(value, dict) else {}


class _Tx:
    """`with store._tx() as db:` — the lock plus BEGIN IMMEDIATE/COMMIT (ROLLBACK on error)."""

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock) -> None:
        self._db, self._lock = db, lock

    def __enter__(self) -> sqlite3.Connection:
        self._lock.acquire()
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except BaseException:  # a locked or read-only file: no transaction, and the lock must not stay held
            self._lock.release()
            raise
        return self._db

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self._db.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self._lock.release()
