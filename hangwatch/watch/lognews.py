"""The watched log's news: which reads moved the start, and how long it had been quiet before we came.

`LogNews.feed` is handed every read of the log. The first read is the baseline (the tail that was
there before the watch began: it tells what kinds of line exist, never that anything moved);
after that, a read is news when one of its lines is of a new kind or moved a counter
(`parse.repeats.LineNews`), or when it only redrew an unterminated line (a tqdm bar's `\\r`).
A wait printed again ("Waiting for READY message from DP Coordinator..." every 10 s) is not.

`quiet_before_s`: attached late, how long the log had carried no news before the first read:
the log file's age (its mtime) plus, when the lines carry timestamps, the time between the last
news line and the last line of that tail (a wait repeated for five minutes keeps the file young,
its news old). Only differences of the log's own timestamps are used: its timezone is unknown.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from hangwatch.model import LogLine
from hangwatch.parse.repeats import LineNews, line_seconds

__all__ = ["BASELINE_LINES", "LogNews", "file_age"]

# Of the tail read at attach (up to 8 MiB), the newest lines say which kinds exist and when the
# log last had news; a kind only in older lines is news once when it comes back (never missed).
BASELINE_LINES = 5000


class LogNews:
    def __init__(self, quiet_before_s: float = 0.0) -> None:
        self._lines = LineNews()
        self.total = 0  # reads' news lines so far (the progress snapshot compares it)
        self.quiet_before_s = quiet_before_s
        self._baseline = False

    def feed(self, lines: Sequence[LogLine], *, bytes_read: bool) -> int:
        """News in one read: 0 for the first (the baseline) and for a read of repeats only."""
        if not self._baseline:
            lines = lines[-BASELINE_LINES:]
        news = self._lines.observe(lines)
        if not self._baseline:
            self._baseline = True
            self.quiet_before_s += _stale_news_s(lines, self._lines.last_news)
            return 0
        if not lines and bytes_read:
            news = 1  # an unterminated line redrawn: a tqdm bar moves without a newline
        self.total += news
        return news


def _stale_news_s(lines: Sequence[LogLine], last_news: LogLine | None) -> float:
    """Seconds between the tail's last news line and its last line, by the log's timestamps."""
    if not lines or last_news is None:
        return 0.0
    newest = next((s for s in (line_seconds(line) for line in reversed(lines)) if s is not None), None)
    news_at = line_seconds(last_news)
    if newest is None or news_at is None:
        return 0.0
    return max(0.0, newest - news_at)


def file_age(path: str | None, wall_now: float) -> float:
    """Seconds since the file was last written; 0 when there is none (or it is newer)."""
    if not path:
        return 0.0
    try:
        return max(0.0, wall_now - os.stat(path).st_mtime)
    except OSError:
        return 0.0
