"""Bytes of a server log -> cleaned `LogLine`s.

The same stream carries the launcher, every SGLang scheduler (or vLLM process), uvicorn, NCCL's
own INFO lines and tqdm bars, so a line is cleaned first (ANSI, `\\r` updates, bad UTF-8, length)
and then its prefix is read to learn which rank or process wrote it. Formats are those of
../shared/reference/sglang-startup.md §1.4 (SGLang) and §9.1 (vLLM).

Whole-buffer operations (decode, ANSI strip, split) run in C; the per-line work is a dispatch on
the first character (each engine's log prefixes, engines/) and at most three anchored regex matches, so a 5 MiB log stays fast.
"""

from __future__ import annotations

import re
from functools import lru_cache

from hangwatch.engines import Engine, LogPrefix, ParsedPrefix, engines, strip_uvicorn
from hangwatch.model import LogLine, normalise_rank, rank_from_name

__all__ = ["MAX_TEXT", "matched_text", "read_log_lines", "normalise_rank", "rank_from_name"]

MAX_TEXT = 1024  # chars kept per line: bounds memory and each rule regex's worst case per line (docs/serving.md)

# CSI (colours, cursor moves that tqdm uses for nested bars), OSC (titles) and two-byte escapes.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")

# NCCL_DEBUG=INFO: `host:pid:tid [cudaDev] NCCL INFO ...`.
_NCCL = re.compile(r"[\w.\-]+:(?P<pid>\d+):\d+ \[(?P<dev>\d+)\] (?P<msg>NCCL (?:INFO|WARN) .*)", re.S)



def matched_text(data: bytes) -> int:
    """About how many characters the rules will search in these log bytes: each line cut to MAX_TEXT."""
    return sum(min(len(segment), MAX_TEXT) + 1 for segment in data.split(b"\n"))


def read_log_lines(data: bytes, start_lineno: int = 1) -> tuple[LogLine, ...]:
    """Parse a whole log buffer. A trailing newline does not make an extra empty line."""
    text = _ANSI.sub("", data.decode("utf-8", "replace")).replace("\r\n", "\n")
    if not text:
        return ()
    raw_lines = text.split("\n")
    if text.endswith("\n"):
        raw_lines.pop()
    out: list[LogLine] = []
    append, parse = out.append, _parse_prefix  # hot loop: one iteration per line of a multi-MiB log
    table = _prefix_table(engines())  # the registered engines' prefixes, by first character
    for lineno, raw in enumerate(raw_lines, start_lineno):
        updates = 1
        if "\r" in raw:
            raw, updates = _last_segment(raw)
        if len(raw) > MAX_TEXT:
            raw = raw[:MAX_TEXT]
        rank, process, ts, msg, pid = parse(raw, table)
        append(LogLine(lineno, raw, rank, process, ts, msg, updates, pid))
    return tuple(out)


def _last_segment(raw: str) -> tuple[str, int]:
    """tqdm rewrites its bar with `\\r`; blank segments are tqdm clearing the line, not updates."""
    segments = [s for s in raw.split("\r") if s and not s.isspace()]
    if not segments:
        return "", 1
    return segments[-1], len(segments)


@lru_cache(maxsize=8)
def _prefix_table(registered: tuple[Engine, ...]) -> dict[str, tuple[LogPrefix, ...]]:
    """First character -> the registered engines' prefix parsers that a line so starting may have."""
    table: dict[str, list[LogPrefix]] = {}
    for engine in registered:
        for prefix in engine.log_prefixes:
            for first in prefix.starts:
                table.setdefault(first, []).append(prefix)
    return {first: tuple(prefixes) for first, prefixes in table.items()}


def _parse_prefix(text: str, table: dict[str, tuple[LogPrefix, ...]]) -> ParsedPrefix:
    first = text[:1]
    for prefix in table.get(first, ()):
        parsed = prefix.parse(text)
        if parsed is not None:
            return parsed
    if first and first in "DIWEC":
        return None, None, None, strip_uvicorn(text), None  # a level word first: uvicorn's, or plain text
    if ":" in text[:64] and " NCCL " in text[:96]:
        m = _NCCL.match(text)
        if m:
            # NCCL's [N] is the local CUDA device; on one node with base GPU 0 it is the TP rank,
            # the common case. The pid stays on the line for an exact mapping to a process.
            return f"TP{m['dev']}", None, None, m["msg"], int(m["pid"])
    return None, None, None, text, None
