"""Bytes of a server log -> cleaned `LogLine`s.

The same stream carries the launcher, every SGLang scheduler (or vLLM process), uvicorn, NCCL's
own INFO lines and tqdm bars, so a line is cleaned first (ANSI, `\\r` updates, bad UTF-8, length)
and then its prefix is read to learn which rank or process wrote it. Formats are those of
shared/reference/sglang-startup.md §1.4 (SGLang) and §9.1 (vLLM).

Whole-buffer operations (decode, ANSI strip, split) run in C; the per-line work is a dispatch on
the first character and at most three anchored regex matches, so a 5 MiB log stays fast.
"""

from __future__ import annotations

import re
from functools import lru_cache

from hangwatch.model import LogLine, normalise_rank, rank_from_name

__all__ = ["MAX_TEXT", "read_log_lines", "normalise_rank", "rank_from_name"]

MAX_TEXT = 1024  # chars kept per line: bounds memory and each rule regex's worst case per line (docs/serving.md)

# CSI (colours, cursor moves that tqdm uses for nested bars), OSC (titles) and two-byte escapes.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")

# SGLang: `[2026-11-29 23:43:26.123 DP0 TP3] msg`; rank tags in any order (0.4.6 wrote DP TP PP),
# date-less stamps (`[23:17:01 TP7]`) from 2024 logs.
_SGLANG = re.compile(
    r"\[(?P<ts>(?:\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?)"
    r"(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] ?(?P<msg>.*)",
    re.S,
)
# vLLM process prefix `(EngineCore pid=123) `, `(Worker_TP1 pid=9) `, `(VllmWorker TP0 pid=9) `,
# Ray's `(RayWorkerWrapper pid=9, ip=10.0.0.1) `; corpus copies redact the pid as `pid=...`.
_VLLM_PROC = re.compile(r"\((?P<proc>[\w.\- ]+?) pid=(?P<pid>\d+|\.\.\.)(?:, ip=[^)]*)?\) ?(?P<rest>.*)", re.S)
# vLLM logger body: 0.11+/0.33 `INFO 08-14 10:01:27 [file.py:12] msg`; old `INFO 08-14 10:01:27
# model_runner.py:692] msg`; the timestamp is optional because redacted copies drop it.
_VLLM_BODY = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) "
    r"(?:(?P<ts>\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:\.\d+)? )?"
    r"(?:\[[^\]\s]+?:\d+\]|[\w.\-]+\.py:\d+\]) ?(?P<msg>.*)",
    re.S,
)
# uvicorn's own level prefix: `INFO:     Uvicorn running on ...` (also inside an SGLang prefix).
_UVICORN = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL|TRACE):\s+(?P<msg>.*)", re.S)
# NCCL_DEBUG=INFO: `host:pid:tid [cudaDev] NCCL INFO ...`.
_NCCL = re.compile(r"[\w.\-]+:(?P<pid>\d+):\d+ \[(?P<dev>\d+)\] (?P<msg>NCCL (?:INFO|WARN) .*)", re.S)

# Canonical order for rank tags, so that a log prefix (any version's order) and a process title
# for the same rank give the same key. SGLang 0.5.x order with vLLM's PCP/DCP slotted in.
_RANK_TAG = re.compile(r"(?<![A-Za-z])(ATTN_CP|MOE_DP|PCP|DCP|DP|PP|TP|EP)(\d+)")

_Parsed = tuple[str | None, str | None, str | None, str, int | None]  # rank, process, timestamp, message, pid


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
    for lineno, raw in enumerate(raw_lines, start_lineno):
        updates = 1
        if "\r" in raw:
            raw, updates = _last_segment(raw)
        if len(raw) > MAX_TEXT:
            raw = raw[:MAX_TEXT]
        rank, process, ts, msg, pid = parse(raw)
        append(LogLine(lineno, raw, rank, process, ts, msg, updates, pid))
    return tuple(out)


def _last_segment(raw: str) -> tuple[str, int]:
    """tqdm rewrites its bar with `\\r`; blank segments are tqdm clearing the line, not updates."""
    segments = [s for s in raw.split("\r") if s and not s.isspace()]
    if not segments:
        return "", 1
    return segments[-1], len(segments)


def _parse_prefix(text: str) -> _Parsed:
    first = text[:1]
    if first == "[":
        m = _SGLANG.match(text)
        if m:
            ts, ranks, msg = m.group("ts", "ranks", "msg")
            return _sglang_rank(ranks), None, ts, _strip_uvicorn(msg), None
    elif first == "(":
        m = _VLLM_PROC.match(text)
        if m:
            return _parse_vllm_process(m)
    elif first in "DIWEC":
        m = _VLLM_BODY.match(text)
        if m:
            return None, None, m["ts"], m["msg"], None
        return None, None, None, _strip_uvicorn(text), None
    if ":" in text[:64] and " NCCL " in text[:96]:
        m = _NCCL.match(text)
        if m:
            # NCCL's [N] is the local CUDA device; on one node with base GPU 0 it is the TP rank,
            # the common case. The pid stays on the line for an exact mapping to a process.
            return f"TP{m['dev']}", None, None, m["msg"], int(m["pid"])
    return None, None, None, text, None


def _parse_vllm_process(m: re.Match[str]) -> _Parsed:
    proc, rest = m["proc"], m["rest"]
    pid = int(m["pid"]) if m["pid"].isdigit() else None
    body = _VLLM_BODY.match(rest)
    if body:
        return rank_from_name(proc), proc, body["ts"], body["msg"], pid
    return rank_from_name(proc), proc, None, _strip_uvicorn(rest), pid


def _strip_uvicorn(msg: str) -> str:
    if msg[:1] in "DIWECT" and ":" in msg[:10]:
        m = _UVICORN.match(msg)
        if m:
            return m["msg"]
    return msg


@lru_cache(maxsize=1024)
def _sglang_rank(ranks: str) -> str | None:
    """` TP3 DP0` -> `DP0_TP3`; cached: a log has a handful of distinct prefixes."""
    return normalise_rank(ranks.split()) if ranks else None
