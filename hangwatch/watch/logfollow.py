"""The log as the watch loop follows it: lines in a ring, phase lines timed, news told from repeats.

    follower.feed(t, reading.log, sources.engine_for)  -> the phase lines' progress (Motion)

The first read is the tail that was already there (a baseline: it moves nothing); a later read
is growth when it is news (lognews.py). Phase events are found once the engine is known; when it
becomes known after lines were read, they are re-derived from every line read so far. Lines the
engine's own phase markers miss are read with its release's mined log formats (parse/logformats.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hangwatch.model import LogLine
from hangwatch.parse.logformats import read_phases
from hangwatch.watch.episodes import Motion
from hangwatch.watch.livesources import EngineReleases
from hangwatch.watch.lognews import LogNews
from hangwatch.watch.progress import since_last_progress
from hangwatch.watch.rings import LineParser, LogRing
from hangwatch.watch.skim import phase_needles

__all__ = ["LogFollower"]

EngineFor = Callable[[Sequence[LogLine]], Any]


class LogFollower:
    def __init__(self, parse_lines: LineParser, *, max_lines: int, quiet_before_s: float = 0.0,
                 releases: EngineReleases | None = None) -> None:
        # the classifier sees the newest `max_lines` (phase events are kept apart): more would
        # only be parsed to sit unused
        self.ring = LogRing(parse_lines, max_lines=max_lines, overflow_needles=phase_needles())
        # attached to a server already stuck: how long its log had been silent before we came
        self.news = LogNews(quiet_before_s)
        self.engine: Any = None
        self.first_read_t: float | None = None  # watch time of the first read (the tail already there)
        self._news_t = 0.0  # watch time of the last read with news (or of the first read)
        self._grew = False  # some read after the first had news
        # the engine's release beside the launcher's Python picks the log formats; None: not known
        self._releases = releases

    def feed(self, t: float, data: bytes, engine_for: EngineFor) -> list[Motion]:
        """Take one reading's log bytes; returns the phase lines among them as progress."""
        if not data:
            return []
        lines = self.ring.feed(data)
        news = self.news.feed(lines, bytes_read=True)
        if news or self.first_read_t is None:
            self._news_t = t
        self._grew = self._grew or news > 0
        self.first_read_t = t if self.first_read_t is None else self.first_read_t
        engine, known = engine_for(self.ring.lines), self.engine is not None
        self.engine = engine
        if engine is None:
            return []
        if not known:
            # all lines read so far: this feed's when it alone overflowed the ring
            pool = lines if len(lines) >= len(self.ring.lines) else list(self.ring.lines)
            self.ring.reset_phases(t, read_phases(engine, pool, version=self._release(engine.name)))
            return []
        events = read_phases(engine, lines, before=(p.event for p in self.ring.phases),
                             version=self._release(engine.name)) if lines else []
        self.ring.add_phases(t, events)
        # a phase line is progress of the start (other lines may be a warning repeated forever)
        return [Motion(f"phase:{e.phase.value}", t) for e in events]

    def quiet_s(self, t: float) -> float:
        """Seconds since the log last had news; attached late, counted from before we came."""
        if not self._grew:
            return t + self.news.quiet_before_s
        return since_last_progress(self._news_t, 0.0, t)

    def since_news_s(self, t: float) -> float:
        """Seconds since the last read with news, or since the first read (the ladder's quiet time)."""
        return t - self._news_t

    def _release(self, engine: str) -> str | None:
        release = self._releases(engine) if self._releases is not None else "unknown"
        return None if release == "unknown" else release
