"""Repeated log lines: a wait announced again and again is not progress (docs/live.md).

Progress in a log is new information: a line of a kind not seen before, or a counter that moved
("Loading shards: 3/8" → "4/8", "Waiting for 2 remote" → "1 remote"). A line that comes back
the same modulo its timestamps, durations, addresses and ids ("Waiting for READY message from DP
Coordinator..." every 10 s, a retry loop's "attempt 7", a keep-alive) is the heartbeat of a wait.

* `template(text)`: the line with timestamps, durations, hex ids, addresses and numbers replaced;
  two lines of one kind share it.
* `counters(text)`: the numbers that carry news (counts, sizes, fractions): what is left after
  the timestamps, durations, ids and a retry's own attempt number are taken out.
* `LineNews`: per watched log, says of each new line whether it is news (the watch loop).
* `repeated_waits(lines)`: the waits a log repeats, with their period and span (the classifier's
  `log.waits` atom, from a live log or a bundle's alike).

What a wait waits *for* is the text after "waiting for"/"waits on"/...; `wait_family` maps it
to a cause family with the table in hangwatch/data/waits.yaml. Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from hangwatch.model import LogLine

__all__ = [
    "LineNews", "RepeatedWait", "WaitFamily", "counters", "is_wait", "line_seconds", "repeated_waits",
    "template", "wait_families", "wait_family", "wait_object",
]

# Order matters: dates and times before bare numbers, addresses before hex, durations before numbers.
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?|\b\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d+)?")
_TIME = re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b")
_ADDR = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b|\[[0-9a-f:]+\](?::\d+)?|\b[\w.-]++:\d{2,5}\b", re.I)
_HEX = re.compile(r"\b0x[0-9a-f]+\b|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b", re.I)
_DURATION = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|us|µs|ns|s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)\b"
                       r"|\b(?:\d+h)?(?:\d+m)?\d+(?:\.\d+)?s\b", re.I)
_PID = re.compile(r"\b(?:pid|tid|port|attempt|retry|retries|try|tries|iteration|round)[ =:#]*\d+(?:\s*/\s*\d+)?", re.I)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SPACES = re.compile(r"\s+")
_DIGIT = re.compile(r"\d")
# words every wait line has one of: a cheap test before the full pattern
_WAIT_WORDS = re.compile(r"wait|retr|attempt|not |keep|heartbeat|poll|watchdog|still|blocked", re.I)

# A line that announces a wait, a retry or a keep-alive. Generic wording, not one engine's.
_WAIT = re.compile(
    r"\b(?:still\s+)?waiting\b|\bwait(?:s|ed)?\s+(?:for|on|until)\b|\bretry(?:ing)?\b|\bretries\b|\battempt\s*#?\d"
    r"|\bnot\s+(?:yet\s+)?(?:ready|available|up|reachable)\b|\bkeep-?alive\b|\bheartbeat\b|\bpolling\b|\bwatchdog\b"
    r"|\bstill\s+(?:loading|downloading|compiling|initiali[sz]ing)\b|\bblocked\s+(?:on|by)\b|\bhas not (?:yet )?(?:joined|connected|started)\b",
    re.I,
)
_OBJECT = re.compile(
    r"\b(?:waiting|wait(?:s|ed)?|blocked)\s+(?:for|on|until)\s+(?P<what>.+)"
    r"|\bretry(?:ing)?\s+(?P<retry>.+)|\bnot\s+(?:yet\s+)?(?:ready|available|up|reachable)\b(?P<after>.*)",
    re.I,
)
_OBJECT_MAX = 120

DATA = Path(__file__).resolve().parent.parent / "data" / "waits.yaml"


# One pass over a line: each alternative is one kind of token; the first that matches at a
# position wins, so dates come before times, addresses before hex and numbers, durations before
# numbers, and a retry's attempt number before a bare number.
_TOKENS = re.compile("|".join(f"(?P<{name}>{pattern.pattern})" for name, pattern in (
    ("date", _DATE), ("time", _TIME), ("addr", _ADDR), ("hex", _HEX), ("dur", _DURATION), ("own", _PID),
    ("num", _NUMBER),
)), re.I)
_ROUGH = re.compile(r"0x[0-9a-f]+|\d+", re.I)


@lru_cache(maxsize=65536)
def _counters(text: str) -> tuple[str, ...]:
    """The numbers left once times, addresses, ids and a retry's attempt are taken out (one pass)."""
    if _DIGIT.search(text) is None:
        return ()
    return tuple(m.group() for m in _TOKENS.finditer(text) if m.lastgroup == "num")


@lru_cache(maxsize=65536)
def template(text: str) -> str:
    """The kind of line: every number and hex id replaced (so timestamps, durations, addresses too)."""
    return _SPACES.sub(" ", _ROUGH.sub("#", text)).strip()


@lru_cache(maxsize=65536)
def _numbers(text: str) -> tuple[str, ...]:
    return tuple(_ROUGH.findall(text))


def counters(text: str) -> tuple[str, ...]:
    """The numbers of a line that carry news: counts and fractions, not times, ids or attempts."""
    return _counters(text)


def _moved(before: tuple[tuple[str, ...], str] | None, numbers: tuple[str, ...], text: str) -> bool:
    """News against the kind's last line: new kind, or a counter that changed. Most repeats carry
    the very same numbers (the cheap test); only when some differ are the counters compared."""
    if before is None:
        return True
    if before[0] == numbers:
        return False
    return counters(text) != counters(before[1])


@lru_cache(maxsize=65536)
def is_wait(text: str) -> bool:
    return _WAIT_WORDS.search(text) is not None and _WAIT.search(text) is not None


def wait_object(text: str) -> str | None:
    """What the line says it waits for ("READY message from DP Coordinator..."); None if unsaid."""
    match = _OBJECT.search(text)
    if match is None:
        return None
    what = (match.group("what") or match.group("retry") or match.group("after") or "").strip(" .:;,-")
    return what[:_OBJECT_MAX] or None


@dataclass(frozen=True)
class WaitFamily:
    """One row of data/waits.yaml: what a wait waits on, and the cause family that names."""

    name: str
    pattern: re.Pattern[str]
    cause: str
    also: tuple[str, ...] = ()  # other causes of the family (the differential)


@lru_cache(maxsize=1)
def wait_families() -> tuple[WaitFamily, ...]:
    rows = yaml.safe_load(DATA.read_text(encoding="utf-8"))["families"]
    return tuple(WaitFamily(r["name"], re.compile(r["matches"], re.I), r["cause"], tuple(r.get("also", ())))
                 for r in rows)


def wait_family(text: str) -> WaitFamily | None:
    """The family of what a wait line waits on (the whole line when it names no object)."""
    what = wait_object(text) or text
    return next((f for f in wait_families() if f.pattern.search(what)), None)


# ---------------------------------------------------------------- live: which lines are news


class LineNews:
    """Remembers, per kind of line, the counters it last carried; bounded (least recently seen
    kinds are forgotten first, so a forgotten kind is news again: never a missed progress)."""

    def __init__(self, max_kinds: int = 4096) -> None:
        self._seen: OrderedDict[tuple[str | None, str], tuple[tuple[str, ...], str]] = OrderedDict()
        self._max = max_kinds
        self.last_news: LogLine | None = None  # the latest line that was news

    def observe(self, lines: Iterable[LogLine]) -> int:
        """How many of these lines are news; every line is remembered."""
        news = 0
        for line in lines:
            text = line.message or line.text
            if not text.strip():
                continue
            kind, numbers = _kind(line, text), _numbers(text)
            before = self._seen.pop(kind, None)
            self._seen[kind] = (numbers, text)
            if len(self._seen) > self._max:
                self._seen.popitem(last=False)
            if _moved(before, numbers, text):
                news += 1
                self.last_news = line
        return news


def _kind(line: LogLine, text: str) -> tuple[str | None, str]:
    """Each writer's lines apart: two ranks printing the same wait are two repeats, not news."""
    return (line.rank or line.process, template(text))


# ---------------------------------------------------------------- evidence: the waits a log repeats


@dataclass(frozen=True)
class RepeatedWait:
    """A wait line the log repeats: how often, every how long, over how long (None: no timestamps)."""

    line: LogLine  # the latest one
    kind: str  # its template
    count: int
    every_s: float | None
    span_s: float | None
    family: WaitFamily | None

    def describe(self) -> str:
        text = (self.line.message or self.line.text).strip()
        parts = [f"the log repeats '{text[:160]}' {self.count} times"]
        if self.every_s is not None:
            parts.append(f"every {_short(self.every_s)}")
        if self.span_s is not None:
            parts.append(f"for {_short(self.span_s)}")
        return " ".join(parts)


def repeated_waits(lines: Sequence[LogLine], min_count: int = 3, *, trailing_only: bool = True) -> list[RepeatedWait]:
    """Wait lines that came back at least `min_count` times with the same counters. With
    `trailing_only`, only waits still going on: no line of another kind that is news after
    the wait's last repeat but one (a wait that ended and was followed by progress is history)."""
    groups: dict[tuple[str | None, str], list[LogLine]] = {}
    seen: dict[tuple[str | None, str], tuple[tuple[str, ...], str]] = {}
    newest_news = 0  # line number of the latest line that was news
    for line in lines:
        text = line.message or line.text
        if not text.strip():
            continue
        kind, numbers = _kind(line, text), _numbers(text)
        if _moved(seen.get(kind), numbers, text):
            newest_news = line.lineno
            groups.pop(kind, None)  # a counter moved: the repeats start again
        seen[kind] = (numbers, text)
        if is_wait(text):
            groups.setdefault(kind, []).append(line)
    out = []
    for kind, hits in groups.items():
        if len(hits) < min_count or (trailing_only and newest_news > hits[-1].lineno):
            continue
        times = [s for s in (line_seconds(h) for h in hits) if s is not None]
        span = times[-1] - times[0] if len(times) >= 2 else None
        every = span / (len(times) - 1) if span else None
        out.append(RepeatedWait(hits[-1], kind[1], len(hits), every, span or None, wait_family(hits[-1].message or hits[-1].text)))
    return sorted(out, key=lambda w: -w.count)


_STAMP_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%m-%d %H:%M:%S")


def line_seconds(line: LogLine) -> float | None:
    """The line's own timestamp as seconds on an arbitrary but consistent origin; None without one.
    Only differences between lines of one log are meaningful (the log's timezone is unknown)."""
    stamp = line.timestamp
    if not stamp:
        return None
    stamp = stamp.strip("[] ").replace(",", ".")
    whole, _, frac = stamp.partition(".")
    for fmt in _STAMP_FORMATS:
        try:
            parsed = time.strptime(whole, fmt)
        except ValueError:
            continue
        year = parsed.tm_year if "%Y" in fmt else 2000
        days = _days(year, parsed.tm_mon, parsed.tm_mday)
        seconds = days * 86400 + parsed.tm_hour * 3600 + parsed.tm_min * 60 + parsed.tm_sec
        return seconds + (float(f"0.{frac}") if frac.isdigit() else 0.0)
    return None


def _days(year: int, month: int, day: int) -> int:
    import datetime

    return datetime.date(year, month, day).toordinal()


def _short(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, rest = divmod(seconds, 60)
    return f"{minutes}m{rest:02d}s" if rest else f"{minutes}m"
