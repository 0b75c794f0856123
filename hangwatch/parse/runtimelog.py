"""Container runtime log files → the bytes the server wrote (pure: no I/O).

Two formats carry a container's stdout/stderr on disk:

* CRI (kubelet with containerd or CRI-O, podman's `k8s-file`): one record per line,
  `TIMESTAMP STREAM TAGS MESSAGE`, e.g. `2026-11-30T23:10:01.123456789Z stderr F Load weight end.`
  The first tag is `P` (a partial line: the runtime cut a long line, or the writer had not ended
  it yet) or `F` (the record ends a line). Partials of one stream are joined until its `F`.
* Docker's `json-file`: one JSON object per line, `{"log": "...\\n", "stream": "stderr",
  "time": "..."}`. A `log` without a final "\\n" is a piece of a longer line (Docker cuts at
  16 KiB); pieces of one stream are joined until one ends the line.

A decoder is fed complete lines of the file (what `LogTail` hands out) and returns the server's
own bytes, complete lines only. A record that is not in the format (a file that is not what
discovery thought, a torn last line after a crash) is passed through unchanged: nothing is lost.
"""

from __future__ import annotations

import json
import re
from typing import Protocol

__all__ = ["FORMATS", "CriDecoder", "DockerJsonDecoder", "LogDecoder", "decoder_for", "sniff_format"]

FORMATS = ("plain", "cri", "docker-json", "journald")

# RFC 3339 time, stream, tags (`F`, `P`, or `F:more` for future tags), one space, the message
_CRI = re.compile(rb"^(?P<time>\d{4}-\d{2}-\d{2}T\S+) (?P<stream>stdout|stderr) (?P<tags>[A-Z](?::\S*)?) ?(?P<msg>.*)$")
_MAX_PARTIAL = 1 << 20  # joined pieces of one line beyond this are flushed as a line anyway


class LogDecoder(Protocol):
    def feed(self, data: bytes) -> bytes:
        """Complete lines of the file in, complete lines of the server's output out."""
        ...

    def flush(self) -> bytes:
        """The pieces still waiting for their line's end, as lines (the file ended: rotated)."""
        ...


class _Joiner:
    """Pieces of a line per stream, until the piece that ends it."""

    def __init__(self) -> None:
        self._pending: dict[bytes, list[bytes]] = {}
        self._sizes: dict[bytes, int] = {}

    def piece(self, stream: bytes, data: bytes, ends_line: bool) -> bytes:
        parts = self._pending.setdefault(stream, [])
        parts.append(data)
        self._sizes[stream] = self._sizes.get(stream, 0) + len(data)
        if not ends_line and self._sizes[stream] < _MAX_PARTIAL:
            return b""
        del self._pending[stream], self._sizes[stream]
        line = b"".join(parts)
        return line if line.endswith(b"\n") else line + b"\n"

    def flush(self) -> bytes:
        return b"".join(self.piece(stream, b"", True) for stream in list(self._pending))


class CriDecoder:
    def __init__(self) -> None:
        self._joiner = _Joiner()

    def feed(self, data: bytes) -> bytes:
        out = []
        for record in data.splitlines():
            m = _CRI.match(record)
            if m is None:
                out.append(record + b"\n")
                continue
            partial = m["tags"].split(b":", 1)[0] == b"P"
            out.append(self._joiner.piece(m["stream"], m["msg"], not partial))
        return b"".join(out)

    def flush(self) -> bytes:
        return self._joiner.flush()


class DockerJsonDecoder:
    def __init__(self) -> None:
        self._joiner = _Joiner()

    def feed(self, data: bytes) -> bytes:
        out = []
        for record in data.splitlines():
            entry = _json_record(record)
            if entry is None:
                out.append(record + b"\n")
                continue
            text, stream = entry
            out.append(self._joiner.piece(stream, text, text.endswith(b"\n")))
        return b"".join(out)

    def flush(self) -> bytes:
        return self._joiner.flush()


def _json_record(record: bytes) -> tuple[bytes, bytes] | None:
    try:
        entry = json.loads(record)
    except ValueError:
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("log"), str):
        return None
    # surrogateescape: Docker writes the server's invalid UTF-8 as U+FFFD already; keep what it gave
    text = entry["log"].encode("utf-8", "surrogateescape")
    return text, str(entry.get("stream", "stdout")).encode()


def sniff_format(head: bytes) -> str:
    """The format of a log file from its first line: a file given by hand (`--log
    /var/log/pods/.../0.log`) is decoded like one that discovery found."""
    first = head.split(b"\n", 1)[0]
    if _CRI.match(first):
        return "cri"
    if first.startswith(b'{"log":') and _json_record(first) is not None:
        return "docker-json"
    return "plain"


class _Plain:
    def feed(self, data: bytes) -> bytes:
        return data

    def flush(self) -> bytes:
        return b""


def decoder_for(fmt: str) -> LogDecoder:
    """A fresh decoder for one file of format `fmt` ("plain" and "journald" pass bytes through)."""
    if fmt == "cri":
        return CriDecoder()
    if fmt == "docker-json":
        return DockerJsonDecoder()
    if fmt in ("plain", "journald"):
        return _Plain()
    raise ValueError(f"unknown log format {fmt!r}; one of: {', '.join(FORMATS)}")
