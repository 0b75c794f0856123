"""History in SQLite: verdict transitions, stall episodes (with their refined causes), alert
deliveries, and past starts (phase durations per setup: the learned budgets and the ETA).

WAL mode, and every write in its own committed transaction, so that a daemon killed with -9 loses
at most the write in flight and a restarted daemon knows which episode is open and which alerts
already went out (it must not page anyone twice for one stall).

Retention (a daemon lives for weeks): `prune()` drops what is older than `Retention.days` or
beyond its row limits: transitions; ended episodes with their causes, alert records and outbox
rows; past starts. An open episode, and an alert still owed (`pending`), are never dropped. A
delivered alert's outbox payload (its record says `sent`, `failed` or `skipped`) is dropped at
once: it is kept only to re-send. The store prunes itself every `Retention.every_writes` writes;
`hangwatch history prune` does it by hand (docs/serving.md, Retention).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import stat
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hangwatch.errors import HangwatchError
from hangwatch.watch.budgets import PastStart, SetupKey

__all__ = ["DamagedHistory", "HistoryError", "HistoryStore", "Episode", "Transition", "AlertRecord", "Refinement",
           "Retention", "RemedyRecord"]

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
    phases TEXT NOT NULL,
    topology TEXT NOT NULL DEFAULT ''
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
    topology TEXT NOT NULL DEFAULT '',
    cause TEXT NOT NULL,
    change_id TEXT NOT NULL,
    what TEXT NOT NULL,
    cost TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS remedies_setup ON remedies (engine, version, model, tp, gpu_model, topology);
"""
# table -> its columns, read from _SCHEMA: a file whose tables lack one is not ours (or is damaged)
_COLUMNS = {m[1]: tuple(line.split()[0] for line in m[2].strip().splitlines() if not line.strip().startswith(("UNIQUE", "PRIMARY")))
            for m in re.finditer(r"CREATE TABLE IF NOT EXISTS (\w+) \((.*?)\n\);", _SCHEMA, re.S)}


@dataclass(frozen=True)
class Retention:
    """How much history the store keeps; rows go when older than `days` or beyond a limit."""

    days: float = 30.0
    max_transitions: int = 100_000
    max_episodes: int = 10_000  # ended ones, with their causes, alert records and outbox rows
    max_starts: int = 10_000
    every_writes: int = 1_000  # the store prunes itself after this many writes (0: never)


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


_DAMAGED = re.compile(r"malformed|not a database|no such column|no such table|disk image|corrupt|integrity")


class HistoryError(HangwatchError):
    help_text = "--history takes a writable SQLite file path (its folder must exist); omit it to keep no history."


def _regular_or_absent(path: str) -> None:
    """A history is a regular file (or not there yet): SQLite would block for ever reading a FIFO,
    and a device is nobody's history to move aside."""
    if path == ":memory:" or path.startswith("file:"):
        return
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise HistoryError(f"cannot use the history file {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise HistoryError(f"cannot use the history file {path}: not a regular file")


class DamagedHistory(HistoryError):
    """The file is there and is (or was) a database, but it cannot be trusted: corrupt pages,
    missing tables or columns. `HistoryStore.open_or_recover` moves it aside."""


class HistoryStore:
    """One SQLite file; safe to share between the dispatcher thread and API request threads."""

    def __init__(self, path: str | Path, *, clock: Callable[[], float] = time.time,
                 retention: Retention = Retention()) -> None:
        self.path = str(path)
        self._clock = clock
        self.retention = retention
        self._writes = 0
        # One connection behind a lock: writes are rare (transitions, alerts) and reads are small.
        self._lock = threading.Lock()
        _regular_or_absent(self.path)
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=5.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL survives a process crash (kill -9); only a power loss may drop the last commit.
            self._db.execute("PRAGMA synchronous=NORMAL")
            with self._lock:
                self._db.executescript(_SCHEMA)
                self._add_topology()
                self._check()
        except sqlite3.DatabaseError as exc:
            with contextlib.suppress(sqlite3.Error, AttributeError):
                self._db.close()
            if isinstance(exc, sqlite3.OperationalError) and not _DAMAGED.search(str(exc)):
                raise HistoryError(f"cannot use the history file {self.path}: {exc}") from None  # a missing folder, a read-only or full disk
            raise DamagedHistory(f"the history file {self.path} is damaged ({exc})") from None
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot use the history file {self.path}: {exc}") from None

    def _check(self) -> None:
        """A damaged file fails here, at start, rather than on the first read of a request (a 500 on
        /snapshot, a blank page): the pages are checked, and every table has the columns we read."""
        row = self._db.execute("PRAGMA quick_check(1)").fetchone()
        if row is None or row[0] != "ok":
            raise sqlite3.DatabaseError(f"integrity check: {row[0] if row else 'no answer'}")
        for table, columns in _COLUMNS.items():
            self._db.execute(f"SELECT {', '.join(columns)} FROM {table} LIMIT 1").fetchall()

    @classmethod
    def open_or_recover(cls, path: str | Path) -> tuple[HistoryStore, str | None]:
        """The store at `path`; a damaged file is moved aside (with its -wal/-shm) and a fresh one
        started. Returns the store and, when that happened, the one line to tell the user."""
        try:
            return cls(path), None
        except DamagedHistory as exc:
            aside = f"{path}.damaged-{time.strftime('%Y%m%dT%H%M%S')}"
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    _regular_or_absent(f"{path}{suffix}")  # never move a device or a FIFO
                    os.replace(f"{path}{suffix}", f"{aside}{suffix}")
            return cls(path), f"{exc}: moved to {aside}, starting a fresh history"

    def _add_topology(self) -> None:
        """A file from before setups had a topology: its starts keep '' and match no new key
        (their model was the flag's literal text, which is no setup's identity)."""
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(starts)")}
        if "topology" not in columns:
            self._db.execute("ALTER TABLE starts ADD COLUMN topology TEXT NOT NULL DEFAULT ''")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _tx(self) -> _Tx:
        return _Tx(self._db, self._lock, self._wrote)

    def _wrote(self) -> None:
        """After each committed write (the lock released): prune every `every_writes` writes."""
        self._writes += 1
        every = self.retention.every_writes
        if every and self._writes % every == 0:
            self.prune()

    # ------------------------------------------------------------ retention

    def prune(self, retention: Retention | None = None, *, now: float | None = None) -> dict[str, int]:
        """Drop what `retention` (the store's own by default) does not keep; returns rows dropped per table."""
        keep = retention or self.retention
        cutoff = (self._clock() if now is None else now) - keep.days * 86400.0
        with _Tx(self._db, self._lock) as db:
            gone = {"transitions": db.execute(
                "DELETE FROM transitions WHERE at < ? OR id <= (SELECT id FROM transitions ORDER BY id DESC"
                " LIMIT 1 OFFSET ?)", (cutoff, keep.max_transitions)).rowcount}
            db.execute("CREATE TEMP TABLE IF NOT EXISTS pruned (id TEXT PRIMARY KEY)")
            db.execute("DELETE FROM pruned")
            db.execute(
                "INSERT INTO pruned SELECT id FROM episodes WHERE ended IS NOT NULL"
                " AND (ended < ? OR id IN (SELECT id FROM episodes ORDER BY started DESC LIMIT -1 OFFSET ?))"
                " AND id NOT IN (SELECT episode_id FROM alerts WHERE status = 'pending')", (cutoff, keep.max_episodes))
            gone["episodes"] = db.execute("DELETE FROM episodes WHERE id IN (SELECT id FROM pruned)").rowcount
            gone["episode_causes"] = db.execute(
                "DELETE FROM episode_causes WHERE episode_id IN (SELECT id FROM pruned)").rowcount
            gone["alerts"] = db.execute(
                "DELETE FROM alerts WHERE status != 'pending' AND (episode_id IN (SELECT id FROM pruned) OR (at < ?"
                " AND episode_id NOT IN (SELECT id FROM episodes WHERE ended IS NULL)))", (cutoff,)).rowcount
            # a payload is kept to re-send; once its record is final (or gone with its episode) it is not needed
            gone["outbox"] = db.execute(
                "DELETE FROM outbox WHERE episode_id IN (SELECT id FROM pruned) OR EXISTS (SELECT 1 FROM alerts a"
                " WHERE a.episode_id = outbox.episode_id AND a.sink = outbox.sink AND a.kind = outbox.kind"
                " AND a.status != 'pending')").rowcount
            gone["starts"] = db.execute(
                "DELETE FROM starts WHERE at < ? OR id <= (SELECT id FROM starts ORDER BY id DESC LIMIT 1 OFFSET ?)",
                (cutoff, keep.max_starts)).rowcount
        return gone

    def counts(self) -> dict[str, int]:
        """Rows per table (the soak bench and `hangwatch history prune` print them)."""
        with self._lock:
            return {table: self._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]  # noqa: S608 (fixed names)
                    for table in ("transitions", "episodes", "episode_causes", "alerts", "outbox", "starts")}

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

    def transitions(self, limit: int = 100, server: str | None = None) -> list[Transition]:
        """The newest `limit` transitions (of `server`, or of every server), newest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, at, server, state, prev_state, cause, rule, phase, episode_id"
                " FROM transitions WHERE ? IS NULL OR server = ? ORDER BY id DESC LIMIT ?",
                (server, server, limit)).fetchall()
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

    def refinements(self, limit: int = 100, server: str | None = None) -> list[Refinement]:
        with self._lock:
            rows = self._db.execute(
                "SELECT c.episode_id, c.at, c.cause, c.confidence FROM episode_causes c"
                " LEFT JOIN episodes e ON e.id = c.episode_id WHERE ? IS NULL OR e.server = ?"
                " ORDER BY c.id DESC LIMIT ?", (server, server, limit)).fetchall()
        return [Refinement(*row) for row in rows]

    def episodes(self, limit: int = 100, server: str | None = None) -> list[Episode]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, server, started, ended, state, cause FROM episodes WHERE ? IS NULL OR server = ?"
                " ORDER BY started DESC LIMIT ?", (server, server, limit)).fetchall()
        return [Episode(*row) for row in rows]

    def close_gone(self, gone: Callable[[Episode], bool], *, at: float | None = None) -> list[Episode]:
        """End the open episodes whose server is gone (`gone(episode)`): a file several servers
        share, or one kept across restarts, must not show a stall of a server long dead as open."""
        with self._lock:
            rows = self._db.execute("SELECT id, server, started, ended, state, cause FROM episodes"
                                    " WHERE ended IS NULL").fetchall()
        closed = [episode for episode in (Episode(*row) for row in rows) if gone(episode)]
        for episode in closed:
            self.end_episode(episode.id, at=at)
        return closed

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

    def alerts(self, limit: int = 100, server: str | None = None) -> list[AlertRecord]:
        """The newest `limit` delivery records (of `server`'s episodes, or of all), newest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT a.at, a.episode_id, a.sink, a.kind, a.status, a.attempts, a.detail FROM alerts a"
                " LEFT JOIN episodes e ON e.id = a.episode_id WHERE ? IS NULL OR e.server = ?"
                " ORDER BY a.at DESC, a.id DESC LIMIT ?", (server, server, limit)).fetchall()
        return [AlertRecord(*row) for row in rows]


    # ------------------------------------------------------------ past starts (watch.budgets.Book)

    def record_start(self, key: SetupKey, start: PastStart, *, at: float) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO starts (at, engine, version, model, tp, gpu_model, topology, ready_s, phases)"
                       " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (at, *key.as_tuple(), start.ready_s, json.dumps(dict(start.phases))))

    def past_starts(self, key: SetupKey, limit: int = 50) -> list[PastStart]:
        """The newest `limit` starts of this setup that reached ready."""
        with self._lock:
            rows = self._db.execute(
                "SELECT ready_s, phases FROM starts WHERE engine = ? AND version = ? AND model = ? AND tp = ?"
                " AND gpu_model = ? AND topology = ? ORDER BY id DESC LIMIT ?", (*key.as_tuple(), limit)).fetchall()
        return [PastStart(ready_s, _phases(text)) for ready_s, text in rows]


    # ------------------------------------------------------------ changes that made a setup start (watch.relaunch)

    def record_remedy(self, key: SetupKey, remedy: RemedyRecord, *, at: float) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO remedies (at, engine, version, model, tp, gpu_model, topology, cause, change_id, what,"
                       " cost) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (at, *key.as_tuple(), remedy.cause, remedy.change_id, remedy.what, remedy.cost))

    def remedies(self, key: SetupKey, limit: int = 20) -> list[RemedyRecord]:
        """The changes that made this setup start after a relaunch, newest first, one per change."""
        with self._lock:
            rows = self._db.execute(
                "SELECT cause, change_id, what, cost, MAX(at) FROM remedies WHERE engine = ? AND version = ?"
                " AND model = ? AND tp = ? AND gpu_model = ? AND topology = ? GROUP BY change_id ORDER BY MAX(at) DESC"
                " LIMIT ?",
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

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock, after: Callable[[], None] | None = None) -> None:
        self._db, self._lock, self._after = db, lock, after

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
        if self._after is not None and exc_type is None:
            self._after()
