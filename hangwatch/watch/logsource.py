"""The server's log as the watch loop reads it: bytes, within a tick's budget.

At attach, the start tail at once (with the phase lines before it, found by seeking: a big log is
never read whole); after, what it gained, in steps bounded by the text the rules must search; a
burst (more unread than a few ticks can take) skimmed for what a rule or a phase marker could
match (watch/skim.py), or skipped unread past the skim rate, the skip said in `missing`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from hangwatch.errors import SourceUnavailable
from hangwatch.model import Missing
from hangwatch.parse.logs import matched_text
from hangwatch.parse.runtimelog import sniff_format
from hangwatch.sources.logfind import LogLocation
from hangwatch.sources.logreader import LogReader, open_log
from hangwatch.sources.logtail import LogTail
from hangwatch.watch.reading import transient
from hangwatch.watch.skim import TRACEBACK_LINES, phase_needles, rule_needles, skim

__all__ = ["LogSource"]

_LOG_BYTES_PER_TICK = 4 << 20  # a flooding log is read in steps (docs/serving.md, Bounds)
# What a tick costs is the text every rule regex searches: each new line, cut to MAX_TEXT. 5 000
# lines of 4 KB in one tick took seconds on a loaded host (probe L8); 256 KiB is one logscan chunk.
_LOG_TEXT_PER_TICK = 256 << 10
# Attaching to a big log: its phase lines before the start tail are looked for by seeking, never
# by reading it all: in its first few MiB (the first start) and in the stretch before the tail.
_SEEK_HEAD = 4 << 20
_SEEK_BACK = 4 << 20
_SEEK_LINES = 2_000  # phase lines kept from each stretch (a serving log's access lines are markers)
# A burst: more unread than this at a tick is skimmed (watch/skim.py) instead of read in 256 KiB
# steps of text: in pieces, for up to _SKIM_TICK_S of a tick (the newest 256 KiB read whole); a
# backlog of more than _SKIM_BEHIND_S of skimming is skipped unread, the skip stated in `missing`
# (docs/live.md, Bursts). So a burst leaves the loop a few seconds behind at most.
_BURST_BACKLOG = 1 << 20  # 4 ticks of text: past it, a tick reads all that it may
_SKIM_PIECE = 4 << 20
_SKIM_TICK_S = 0.5
_SKIM_BEHIND_S = 2.0
_SKIM_RATE = 32 << 20  # bytes/s skimmed, until measured
# ... but the tracebacks of a skipped stretch are still found: one needle searched at C speed
_TRACEBACK = b"Traceback (most recent call last)"
_RESCUE_S = 1.0
_RESCUE_PIECE = 16 << 20
_RESCUE_BYTES = 64 << 10  # of a traceback: its first TRACEBACK_LINES lines within these



class LogSource:
    """The log of one server, read in bounded steps; its failures are the "log" and "log_burst"
    entries of the sources' `missing` (the dict is theirs, shared)."""

    def __init__(self, server: Any, config: Any, rules: Sequence[Any] | None, missing: dict[str, Missing]) -> None:
        self.server, self.config = server, config
        # the rules a skimmed line is kept for (watch/skim.py); None: a burst is read in steps,
        # and no phase lines are looked for before a start tail
        self._rules = rules
        self._missing = missing
        self._skim_needles: frozenset[str] | None = None  # made at the first burst (0.1 s)
        self.skipped_bytes = 0  # of bursts, unread (said in missing)
        self._skim_rate = float(_SKIM_RATE)  # measured while skimming: how much a tick can take
        self._caught_up = False
        self._tail = self._open_log()

    @property
    def path(self) -> str | None:
        return self.config.log_path or getattr(self.server, "log_path", None)

    @property
    def opened(self) -> bool:
        return self._tail is not None

    @property
    def bytes_seen(self) -> int:
        return self._tail.bytes_seen if self._tail is not None else 0

    def unreadable(self) -> bool:
        return self._tail is None or "log" in self._missing

    def close(self) -> None:
        """Stop what the log reader runs (journalctl)."""
        if self._tail is not None:
            self._tail.close()

    def _open_log(self) -> LogReader | None:
        location = self._log_location()
        if location is None:
            reason = getattr(self.server, "log_missing", None) or "no log file found: the server writes to a terminal or a pipe"
            self._missing["log"] = Missing("log", reason, "pass --log PATH, or start the server with `hangwatch run -- CMD` (it keeps a copy of the output)")
            return None
        try:
            return open_log(location, start_tail_bytes=self.config.initial_log_bytes)
        except SourceUnavailable as exc:
            self._missing[exc.source] = Missing(exc.source, exc.reason, exc.hint)
            return None

    def _log_location(self) -> LogLocation | None:
        """--log wins; else what discovery found (a file, a tee's file, a runtime's, the journal)."""
        if self.config.log_path:
            return LogLocation(self.config.log_path, _sniffed(self.config.log_path), via="--log")
        found = getattr(self.server, "log", None)
        if found is not None:
            return found
        path = getattr(self.server, "log_path", None)
        return LogLocation(path) if path else None

    def read(self) -> bytes:
        if self._tail is None:
            return b""
        try:
            return self._read_available()
        except SourceUnavailable as exc:
            self._missing[exc.source] = Missing(exc.source, exc.reason, exc.hint)
            return b""
        except OSError as exc:  # EMFILE and the like: this tick has no log, the next one may
            self._missing["log"] = transient("log", exc)
            return b""

    def _read_available(self) -> bytes:
        """What the log gained, up to a per-tick budget: LogTail reads a bounded chunk per call
        and may hand back nothing for a chunk without a line end (a sparse or binary stretch)."""
        assert self._tail is not None
        if not self._caught_up:
            return self._earlier_phase_lines() + self._read_steps()
        if self._rules is not None and isinstance(self._tail, LogTail) and self._tail.backlog() > _BURST_BACKLOG:
            if self._skim_needles is None:
                self._skim_needles = phase_needles() | rule_needles(self._rules)[0]
            return self._read_burst(self._tail, self._skim_needles)
        return self._read_steps()

    def _read_steps(self) -> bytes:
        assert self._tail is not None
        start, chunks, text = self._tail.bytes_seen, [], 0
        while True:
            before = self._tail.bytes_seen
            chunks.append(self._tail.read_new())
            if self._caught_up:  # the start tail is read whole: its text is not counted (a Python pass per line)
                text += matched_text(chunks[-1])
            if (self._tail.bytes_seen == before or self._tail.bytes_seen - start >= _LOG_BYTES_PER_TICK
                    or (text >= _LOG_TEXT_PER_TICK and self._caught_up)):
                self._caught_up = True  # the first read (attach) takes the whole start tail at once
                return b"".join(chunks)

    def _earlier_phase_lines(self) -> bytes:
        """The phase lines of a big log before its start tail, found by seeking: its first
        _SEEK_HEAD bytes and the _SEEK_BACK before the tail, skimmed for phase needles."""
        tail = self._tail
        # a start tail of 0 (`run` on an existing log: only what this run appends) wants none
        if (self._rules is None or not self.config.initial_log_bytes or not isinstance(tail, LogTail)
                or tail.start_offset <= 0):
            return b""
        end = tail.start_offset + 1  # the tail's first line starts after the first "\n" from there
        if end <= _SEEK_HEAD + _SEEK_BACK:
            stretches = [(0, end, False)]
        else:
            stretches = [(0, _SEEK_HEAD, False), (end - _SEEK_BACK, end, True)]
        found: list[bytes] = []
        needles = phase_needles()
        for offset, stop, cut_front in stretches:
            data = _whole_lines(tail.read_at(offset, stop - offset), cut_front)
            skimmed = skim(data, needles) if data else None
            if skimmed is None:
                continue  # nothing there, or lines that never repeat: the tail alone decides
            kept = skimmed.kept[-_SEEK_LINES:] if cut_front else skimmed.kept[:_SEEK_LINES]
            found.extend(kept)
        return b"".join(line + b"\n" for line in found)

    def _read_burst(self, tail: LogTail, needles: frozenset[str]) -> bytes:
        """A backlog too big to read in steps: skimmed for what a rule or phase marker could match
        (watch/skim.py) in pieces, for up to _SKIM_TICK_S of the tick, the newest text read whole.
        A backlog of more than _SKIM_BEHIND_S of skimming (at the rate measured here) is skipped
        unread, as are lines that never repeat; `missing` says how much."""
        behind = max(2 * _SKIM_PIECE, int(self._skim_rate * _SKIM_BEHIND_S))
        out, started, skipped = [], time.monotonic(), 0
        if tail.backlog() > behind:
            offset = tail.offset
            skipped = tail.skip(tail.backlog() - behind)
            out.append(_rescued_tracebacks(tail, offset, offset + skipped))
        while time.monotonic() - started < _SKIM_TICK_S:
            before = tail.bytes_seen
            piece = self._read_piece(tail)
            if tail.bytes_seen == before:
                break
            caught_up = tail.backlog() <= _LOG_TEXT_PER_TICK
            cut = piece.rfind(b"\n", 0, max(0, len(piece) - _LOG_TEXT_PER_TICK)) + 1 if caught_up else len(piece)
            t0 = time.monotonic()
            skimmed = skim(piece[:cut], needles) if cut else None
            if cut:
                spent = max(time.monotonic() - t0, 1e-3)
                self._skim_rate = 0.5 * self._skim_rate + 0.5 * cut / spent
            if cut and skimmed is None:
                skipped += cut
            out.append((skimmed.data if skimmed is not None else b"") + piece[cut:])
            if caught_up:
                break
        self.skipped_bytes += skipped
        if self.skipped_bytes:
            self._missing["log_burst"] = Missing(
                "log_burst", f"a log burst outran the reader: {self.skipped_bytes / 2**20:.0f} MiB skipped unread",
                "lines beyond the skim rate (docs/live.md, Bursts) are not read; the log file still has them")
        return b"".join(out)

    @staticmethod
    def _read_piece(tail: LogTail) -> bytes:
        start, chunks = tail.bytes_seen, []
        while tail.bytes_seen - start < _SKIM_PIECE:
            before = tail.bytes_seen
            chunks.append(tail.read_new())
            if tail.bytes_seen == before:
                break
        return b"".join(chunks)


def _rescued_tracebacks(tail: LogTail, start: int, end: int) -> bytes:
    """The tracebacks in a skipped stretch (a crash is what a burst must not hide): one C-level
    search for their first line, in pieces, for at most _RESCUE_S; each kept with the lines after
    it (its frames and exception, as watch/skim.py keeps them)."""
    out, began, offset = [], time.monotonic(), start
    while offset < end and time.monotonic() - began < _RESCUE_S:
        piece = tail.read_at(offset, min(_RESCUE_PIECE, end - offset) + len(_TRACEBACK))
        found = piece.find(_TRACEBACK)
        while found >= 0 and offset + found < end:
            line_start = piece.rfind(b"\n", 0, found) + 1
            if line_start == 0 and offset > start:
                line_start = found  # its line began in the previous piece: from the marker on
            block = tail.read_at(offset + line_start, _RESCUE_BYTES)
            lines = block.split(b"\n")[:TRACEBACK_LINES]
            out.append(b"\n".join(lines[:-1]) + b"\n" if len(lines) > 1 else b"")
            found = piece.find(_TRACEBACK, found + 1)
        offset += _RESCUE_PIECE
    return b"".join(out)


def _whole_lines(data: bytes, cut_front: bool) -> bytes:
    """`data` from its first line start (when it begins mid-file) to its last line end."""
    if cut_front:
        data = data[data.find(b"\n") + 1 :]
    return data[: data.rfind(b"\n") + 1]


def _sniffed(path: str) -> str:
    """--log names a file; a runtime's (CRI, Docker json-file) is decoded like a found one."""
    try:
        with open(path, "rb") as fh:
            return sniff_format(fh.read(4096))
    except OSError:
        return "plain"  # not there yet, or unreadable: the reader says so
