"""Stack dumps the engines and Python print into their own log, read like py-spy stacks.

Three writers put whole stacks into the server's log: Python's faulthandler (`Fatal Python error`,
`faulthandler.dump_traceback`, `dump_traceback_later` as a watchdog: `Thread 0x... (most recent
call first):` then `  File "...", line N in func`), SGLang's scheduler watchdog (`Pyspy dump for
PID N:` then py-spy's own text: `Process N: title`, `Thread N (active): "MainThread"`, `    func
(file:line)`), and per-process watchdog dumps that a wrapper tees into the log in either shape.
A monitor that cannot attach py-spy (no ptrace in the container) still sees where each thread
waits. `dumps_in(lines)` cuts the log into those blocks; `stacks_in(lines)` parses them with the
stack readers, one source line per process. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from hangwatch.model import LogLine, ProcessStack, Source
from hangwatch.parse.stacks import parse_stack_file

__all__ = ["MAX_DUMP_LINES", "dumps_in", "stacks_in"]

# A line that opens a dump: a faulthandler thread, py-spy's process or thread header, the
# watchdog's own announcement of the py-spy text that follows.
_HEAD = re.compile(
    r"(?:Current thread|Thread) 0x[0-9a-fA-F]+[^(]{0,200}\(most recent call first\):|"
    r"^Process \d{1,12}: \S|^Thread (?:0x[0-9a-fA-F]+|\d{1,12}) \((?:active|idle|[^)]{0,40})\)(?:: \".*\")?\s*$|"
    r"^Stack \(most recent call first\):"
)
# Lines a dump goes on with: faulthandler and traceback frames, py-spy frames and headers, the
# interpreter line py-spy prints, blank lines between threads
_BODY = re.compile(
    r"^\s+File \"[^\"]+\", line \d+|^\s{2,}\S.*\([^()]*:\d+\)\s*$|^\s{2,}\S.*\(\S+\)\s*$|^Python v\d|"
    r"^\s*$|^\s{2,}<no Python frame>|^\s{2,}\.\.\.|^Thread |^Current thread |^Process \d|^Stack "
)
MAX_DUMP_LINES = 4000  # one dump of a busy process is a few hundred lines; a log is not parsed whole


def _text(line: LogLine) -> str:
    return line.message or line.text


def dumps_in(lines: Sequence[LogLine]) -> list[tuple[LogLine, str]]:
    """Each dump in the log: the line that opens it and its text, the writer's prefix taken off."""
    out: list[tuple[LogLine, str]] = []
    i = 0
    while i < len(lines):
        text = _text(lines[i])
        if not _HEAD.search(text):
            i += 1
            continue
        start, body = lines[i], [text]
        i += 1
        while i < len(lines) and len(body) < MAX_DUMP_LINES and _BODY.search(_text(lines[i])):
            body.append(_text(lines[i]))
            i += 1
        out.append((start, "\n".join(body).rstrip() + "\n"))
    return out


def stacks_in(lines: Sequence[LogLine]) -> tuple[ProcessStack, ...]:
    """The processes those dumps show. A faulthandler dump has no process header: it is labelled by
    the rank its log line carries (else `log`) and its line number."""
    stacks: list[ProcessStack] = []
    for start, text in dumps_in(lines):
        label = start.rank or (f"pid{start.pid}" if start.pid else "log")
        name = f"{label}-{start.lineno}.txt" if not start.rank else f"{label}.txt"
        for stack in parse_stack_file(name, text.encode(), Source("server.log", start.lineno)):
            # the reader numbers lines within the dump; the evidence points into the log
            at = start.lineno + (stack.source.line or 1) - 1
            stacks.append(replace(stack, source=Source("server.log", at, "stack dump in the log")))
    return tuple(stacks)

