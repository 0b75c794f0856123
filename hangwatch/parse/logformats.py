"""Phases from the engines' own log formats: the fallback of the hand-written phase markers.

The mined index (hangwatch/data/engine_words.json.gz, docs/engine-words.md) holds every `logger.*`
format of each sampled SGLang and vLLM release, with the module and function that logs it. A small
hand-kept table (hangwatch/data/log_phases.yaml) says which of those functions log during which
start-up phase (the weight loader, the KV pool, graph capture, the "ready" line). A line no hand
marker matched is matched against the formats of one release: the engine's own when it was
sampled, else the nearest sampled one, which the events name so the verdict can say so.

    read_phases(engine, lines, before=(), version=None) -> (PhaseEvent, ...)   markers, then formats
    formats_for(package) -> LogFormats | None        read once per process
    LogFormats.events(lines, version, positions, taken) -> (PhaseEvent, ...)
    formats_note(events) -> Missing | None           "phases read with SGLang 0.5.23's log formats (...)"

A fallback line never moves a rank back to an earlier phase: a hand marker knows when a JIT inside
graph capture is news, a whole function mapped to a phase does not. Matching is pure.
"""

from __future__ import annotations

import bisect
import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from hangwatch.engines import Engine, rank_positions
from hangwatch.engines.base import rank_key
from hangwatch.errors import RuleError, RuleLocation
from hangwatch.model import LogLine, Missing, Phase, PhaseEvent
from hangwatch.parse.engine_words import FORMAT, index_doc, split_template, template_regex
from hangwatch.parse.positioned_yaml import PositionedList, location, read_table

__all__ = ["TABLE_FILE", "Format", "FormatPhase", "LogFormats", "build", "formats_for",
           "formats_note", "load_table", "nearest_release", "read_phases"]  # fmt: skip

DATA = Path(__file__).resolve().parent.parent / "data"
TABLE_FILE = DATA / "log_phases.yaml"
_KEYS = {"site", "phase", "end", "match", "source"}
_LEVELS = ("info", "info_once", "warning", "warning_once")  # what a start prints at the default level
_HOLE = re.compile(r"\{\{|\}\}|\{(?:int|float|path|word|any):\w+\}")
_FIRST_WORD = re.compile(r"\S+")
MIN_LITERAL = 8  # a format that starts with a hole is found by its longest literal, this long at least
TITLES = {"sglang": "SGLang", "vllm": "vLLM"}
# detail keys of a fallback event: the format's code, the release whose formats were read, and the
# note when that release is not the engine's own
FORMAT_KEY, RELEASE_KEY, NOTE_KEY = "log_format", "formats_of", "formats_note"
UNKNOWN_HINT = "give the engine's version (meta.json engine_version) so its own release's formats are read"
UNSAMPLED_HINT = "add the release to tools/engine_words/inputs.txt and rebuild the index (docs/engine-words.md)"


@lru_cache(maxsize=256)
def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern))


@dataclass(frozen=True)
class FormatPhase:
    """One line of the table: the formats of `pattern` mark `phase`."""

    pattern: str  # glob over "module:function"
    phase: Phase
    source: str
    end: re.Pattern[str] | bool = False  # templates that finish the phase (True: every one)
    match: re.Pattern[str] | None = None  # the entry applies only to templates holding this
    location: RuleLocation = RuleLocation("?")

    def fits(self, module: str, function: str, template: str) -> bool:
        if _glob(self.pattern).match(f"{module}:{function}") is None:
            return False
        return self.match is None or self.match.search(template) is not None

    def ends(self, template: str) -> bool:
        return self.end if isinstance(self.end, bool) else self.end.search(template) is not None


@dataclass(frozen=True, eq=False)
class Format:
    """One mined log format of a start-up function, and the phase it marks."""

    module: str
    function: str
    template: str
    releases: frozenset[str]  # the sampled releases that log it
    phase: Phase
    end: bool
    literal: int  # characters of literal text: the longer of two matching formats wins

    @property
    def where(self) -> str:
        return f"{self.module}:{self.function}"

    @cached_property
    def regex(self) -> re.Pattern[str]:
        """Compiled on first use: a log meets a few dozen of the hundreds of formats."""
        return template_regex(self.template.strip())  # a message is read stripped


def load_table(path: Path | None = None) -> tuple[FormatPhase, ...]:
    """The table, validated; a bad entry is a RuleError naming its file and line."""
    path = path or TABLE_FILE
    doc = read_table(path, "log-format phase table")
    if not isinstance(doc, PositionedList):
        raise RuleError("the log-format phase table is a list of {site, phase, source}", RuleLocation(str(path)))
    return tuple(_entry(raw, location(str(path), mark)) for raw, mark in zip(doc, doc.marks, strict=True))


def _entry(raw: Any, where: RuleLocation) -> FormatPhase:
    if not isinstance(raw, dict) or not {"site", "phase", "source"} <= set(raw) or set(raw) - _KEYS:
        keys = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
        raise RuleError(f"an entry has the keys site, phase, source and optionally end, match (got {keys})", where)
    try:
        phase = Phase(raw["phase"])
    except ValueError:
        raise RuleError(f"unknown phase {raw['phase']!r} (one of {', '.join(p.value for p in Phase)})", where) from None
    if not str(raw["site"]).strip() or not str(raw["source"]).strip():
        raise RuleError("site and source must not be empty", where)
    end, match = raw.get("end", False), raw.get("match")
    try:
        end_rx = end if isinstance(end, bool) else re.compile(str(end))
        match_rx = re.compile(str(match)) if match is not None else None
    except re.error as exc:
        raise RuleError(f"end/match is not a valid regex: {exc}", where) from None
    return FormatPhase(str(raw["site"]), phase, str(raw["source"]), end_rx, match_rx, where)


def nearest_release(version: str | None, releases: Sequence[str]) -> str | None:
    """The sampled release whose formats stand for `version`: itself when sampled; else the newest
    sampled one not after it (a format lasts until a release changes it); else the oldest. None: the
    version is unknown or not a version."""
    if not version or not releases:
        return None
    if version in releases:
        return version
    try:
        wanted = Version(version)
        ordered = sorted(releases, key=Version)
    except InvalidVersion:
        return None
    if wanted.public in releases:  # a local build of a sampled release (vLLM's `0.32.0+cpu`)
        return wanted.public
    keys = [Version(release) for release in ordered]
    at = bisect.bisect_right(keys, wanted)
    return ordered[at - 1] if at else ordered[0]


def _public(version: str | None) -> str | None:
    try:
        return Version(version).public if version else None
    except InvalidVersion:
        return None


class LogFormats:
    """The start-up log formats of one engine package, filed by the first word they print."""

    def __init__(self, package: str, releases: Sequence[str], formats: Iterable[Format]):
        self.package = package
        self.releases = tuple(releases)
        self.formats = tuple(formats)
        self._by_word: dict[str, list[Format]] = {}
        self._searched: list[tuple[str, Format]] = []  # formats that start with a hole: found by a literal
        for fmt in self.formats:
            head = _HOLE.split(fmt.template, 1)[0]
            word = _FIRST_WORD.match(head)
            whole = word is not None and (len(head) > word.end() or head == fmt.template)
            if word is not None and whole:
                self._by_word.setdefault(word.group(0), []).append(fmt)
                continue
            literal = max((part.strip() for part in _HOLE.split(fmt.template)), key=len, default="")
            if len(literal) >= MIN_LITERAL and "\n" not in literal:
                self._searched.append((literal, fmt))

    @property
    def title(self) -> str:
        return TITLES.get(self.package, self.package)

    def matches(self, message: str, searched: Iterable[Format] | None = None) -> list[Format]:
        """Every format (of any release) that prints `message`, from its start. `searched`: the
        formats starting with a hole whose literal the message holds (None: look for them here)."""
        word = _FIRST_WORD.match(message)
        found = [fmt for fmt in self._by_word.get(word.group(0), ()) if fmt.regex.match(message)] if word else []
        if searched is None:
            searched = [fmt for literal, fmt in self._searched if literal in message]
        found += [fmt for fmt in searched if fmt.regex.match(message)]
        return found

    def _hole_led(self, messages: Sequence[str]) -> dict[int, list[Format]]:
        """message index -> the hole-led formats whose literal it holds, found with one C-level
        `str.find` per literal over the joined messages, not a Python loop per line and literal."""
        joined = "\n".join(messages)  # a literal holds no newline: a find never spans two messages
        starts, offset = [], 0
        for message in messages:
            starts.append(offset)
            offset += len(message) + 1
        hits: dict[int, list[Format]] = {}
        for literal, fmt in self._searched:
            pos = joined.find(literal)
            while pos >= 0:
                index = bisect.bisect_right(starts, pos) - 1
                hits.setdefault(index, []).append(fmt)
                pos = joined.find(literal, starts[index + 1]) if index + 1 < len(starts) else -1
        return hits

    def release_for(self, version: str | None, matched: Sequence[Sequence[Format]]) -> tuple[str, str | None]:
        """(the release whose formats are read, the note saying so when it is not the engine's own)."""
        title = self.title
        release = nearest_release(version, self.releases)
        if release is not None:
            same = release == version or release == _public(version)
            note = None if same else f"phases read with {title} {release}'s log formats (nearest to {version})"
            return release, note
        # the version is unknown: the release whose formats print the most of these lines (a tie: the newest)
        counts = {r: sum(any(r in fmt.releases for fmt in fmts) for fmts in matched) for r in self.releases}
        best = max(reversed(self.releases), key=lambda r: counts[r])
        return best, f"phases read with {title} {best}'s log formats ({title} version unknown; they fit the log best)"

    def events(
        self,
        lines: Sequence[LogLine],
        version: str | None = None,
        positions: Mapping[str, tuple[Phase, bool]] | None = None,
        taken: Iterable[PhaseEvent] = (),
    ) -> tuple[PhaseEvent, ...]:
        """Phase events of the lines no hand marker read. `taken`: the hand markers' events of these
        lines (they keep their lines and move ranks as they do); `positions`: where each rank stood
        before these lines, (phase, ended). A line that does not move its rank on is left out."""
        hand = {event.lineno: event for event in taken}
        rest = [line for line in lines if line.lineno not in hand]
        messages = [(line.message or line.text).strip() for line in rest]
        hole_led = self._hole_led(messages)
        found: list[tuple[LogLine, list[Format]]] = []
        for index, (line, message) in enumerate(zip(rest, messages, strict=True)):
            fmts = self.matches(message, hole_led.get(index, ())) if message else []
            if fmts:
                found.append((line, fmts))
        if not found:
            return ()
        release, note = self.release_for(version, [fmts for _, fmts in found])
        picked: dict[int, tuple[LogLine, Format]] = {}
        for line, fmts in found:
            mine = [fmt for fmt in fmts if release in fmt.releases]
            if mine:
                picked[line.lineno] = (line, max(mine, key=lambda fmt: (fmt.literal, fmt.where)))
        where = dict(positions or {})
        out: list[PhaseEvent] = []
        for lineno in sorted({*hand, *picked}):
            if lineno in hand:
                event = hand[lineno]
                if where.get(rank_key(event.rank), (None,))[0] is not Phase.READY:
                    where[rank_key(event.rank)] = (event.phase, event.end)
                continue
            line, fmt = picked[lineno]
            key = rank_key(line.rank)
            if not _news(where.get(key), fmt):
                continue
            where[key] = (fmt.phase, fmt.end)
            detail = {FORMAT_KEY: fmt.where, RELEASE_KEY: f"{self.title} {release}"}
            if note:
                detail[NOTE_KEY] = note
            out.append(PhaseEvent(fmt.phase, line.rank, line.lineno, line.text, fmt.end, None, detail))
        return tuple(out)


def _news(now: tuple[Phase, bool] | None, fmt: Format) -> bool:
    """Whether a format's line moves its rank: to a later phase, or to the end of the current one. An
    earlier phase is not news (a function mapped whole to a phase can log late), nor another line of
    the phase the rank is in."""
    if now is None:
        return True
    phase, ended = now
    if phase is Phase.READY or fmt.phase.order < phase.order:
        return False
    return fmt.phase is not phase or (fmt.end and not ended)


def build(package: str, doc: Mapping[str, Any], table: Sequence[FormatPhase]) -> LogFormats:
    """The formats of `package` that the table maps, from the index document."""
    if doc.get("format") != FORMAT:
        raise ValueError(f"engine words index: format {doc.get('format')!r}, expected {FORMAT}")
    releases = tuple(doc["versions"].get(package, ()))
    formats = []
    for row in doc["sites"]:
        pkg, module, function, _line, kind, label, template, mask = row
        if pkg != package or kind != "log" or label not in _LEVELS:
            continue
        entry = next((e for e in table if e.fits(module, function, template)), None)
        if entry is None:
            continue
        versions = frozenset(v for bit, v in enumerate(releases) if mask >> bit & 1)
        literal = sum(len(part) for part in split_template(template) if isinstance(part, str))
        formats.append(Format(module, function, template, versions, entry.phase, entry.ends(template), literal))
    return LogFormats(package, releases, formats)


@lru_cache(maxsize=8)
def formats_for(package: str) -> LogFormats | None:
    """The package's start-up formats, read once per process; None when the index has no release of it."""
    doc = index_doc()
    if package not in doc.get("versions", {}):
        return None
    return build(package, doc, load_table())


def formats_note(events: Iterable[PhaseEvent]) -> Missing | None:
    """The verdict's word on phases read with another release's formats, when any were."""
    for event in events:
        note = event.detail.get(NOTE_KEY)
        if note:
            hint = UNKNOWN_HINT if "version unknown" in note else UNSAMPLED_HINT
            return Missing("phases", note, hint)
    return None


def read_phases(
    engine: Engine, lines: Iterable[LogLine], before: Iterable[PhaseEvent] = (), version: str | None = None
) -> tuple[PhaseEvent, ...]:
    """The log's phase events: the engine's hand markers (`Engine.phase_events`), then its own log
    format for each line they did not read, with the formats of `version` (the engine's release; None:
    the one the log names, vLLM's `Initializing a V1 LLM engine (v0.11.0)`, else unknown). `before`:
    the events of the lines already read, when a live tail feeds the log in pieces."""
    lines, before = list(lines), tuple(before)
    events = engine.phase_events(lines, before)
    formats = formats_for(engine.name) if engine.name else None
    if formats is None:
        return events
    key = f"{engine.name}_version"
    version = version or next((e.detail[key] for e in (*before, *events) if e.detail.get(key)), None)
    extra = formats.events(lines, version, rank_positions(before), taken=events)
    # a format event carries no bar and no step: the markers' cross-line hooks (_attribute_bars,
    # vLLM's readiness in _finish) read the same with it merged after them
    return tuple(sorted((*events, *extra), key=lambda event: event.lineno)) if extra else events
