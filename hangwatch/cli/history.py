"""`hangwatch history prune`: apply the history file's retention now (sinks/store.py, Retention).

A daemon prunes itself every 1 000 writes with the default retention; this is for a file another
run left, or for a tighter retention than the default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hangwatch.cli.remedy import default_history_path
from hangwatch.errors import TargetError

__all__ = ["prune"]


def prune(
    history: Annotated[Path | None, typer.Option("--history", help="The SQLite history file (default: the one `attach`/`run` learn into).")] = None,
    days: Annotated[float, typer.Option("--days", min=0.0, help="Drop what is older than this many days.")] = 30.0,
    max_transitions: Annotated[int, typer.Option("--max-transitions", min=0, help="Keep at most this many transitions.")] = 100_000,
    max_episodes: Annotated[int, typer.Option("--max-episodes", min=0, help="Keep at most this many ended episodes (with their alert records).")] = 10_000,
    max_starts: Annotated[int, typer.Option("--max-starts", min=0, help="Keep at most this many past starts (learned budgets).")] = 10_000,
) -> None:
    """Drop old history: transitions, ended episodes and their delivered alerts, past starts.
    An open episode and an alert still owed are kept."""
    from hangwatch.sinks.store import HistoryStore, Retention

    path = history or default_history_path()
    if not path.is_file():
        raise TargetError(f"no history file at {path}")
    store = HistoryStore(str(path), retention=Retention(every_writes=0))
    try:
        before = store.counts()
        gone = store.prune(Retention(days=days, max_transitions=max_transitions, max_episodes=max_episodes,
                                     max_starts=max_starts, every_writes=0))
        after = store.counts()
    finally:
        store.close()
    for table, rows in after.items():
        print(f"{table}: {before[table]} -> {rows} ({gone.get(table, 0)} dropped)")
