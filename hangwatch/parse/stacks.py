"""Stack dumps of every format we meet -> `ProcessStack`s.

    parse_stack_file(name, data, source) -> [ProcessStack]   picks the format by content
    parse_pyspy_json(data, label, source, sample=0) -> ProcessStack
    frame_origin(filename, function, native) -> Origin
    stack_signature(stack, depth=8) -> str;  group_by_signature(stacks) -> {signature: [labels]}

Formats: py-spy `--json`; py-spy text (with or without `--native`, `--locals`, several processes
from `--subprocesses`); Python tracebacks; faulthandler dumps; gdb `bt` / pystack backtraces;
/proc/PID/stack kernel stacks. Text formats are read line by line by one small state machine
(`hangwatch.parse.stacktext`), because bug reports paste them mixed, truncated and with log prefixes.
Nothing here raises on bad input: an unreadable file gives `[]` and the caller records it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath
from typing import Any

from hangwatch.model import Frame, Origin, ProcessStack, Source, ThreadStack
from hangwatch.parse.frames import frame_origin, keep_ends, make_frame, relative_file, split_name
from hangwatch.parse.stacktext import parse_text

__all__ = [
    "frame_origin",
    "group_by_signature",
    "make_frame",
    "parse_pyspy_json",
    "parse_stack_file",
    "relative_file",
    "split_name",
    "stack_signature",
]

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]+$")
_FILE_NAME = re.compile(r"^(?P<stem>.+?)(?:\.native)?(?:\.(?P<sample>\d{1,9}))?(?:\.(?:json|txt|log|out))?$")


# ---------------------------------------------------------------- py-spy JSON


def parse_pyspy_json(data: Any, label: str, source: Source, sample: int = 0) -> ProcessStack:
    """py-spy `dump --json` output (a list of thread objects, frames innermost first)."""
    threads = tuple(_json_thread(t) for t in data if isinstance(t, dict))
    pids = [t.get("pid") for t in data if isinstance(t, dict) and isinstance(t.get("pid"), int)]
    return ProcessStack(
        label=label,
        pid=pids[0] if pids else None,
        threads=threads,
        source=source,
        sample=sample,
        native=_has_native(threads),
    )


def _json_thread(obj: dict[str, Any]) -> ThreadStack:
    tid = obj.get("os_thread_id") or obj.get("thread_id")
    raw = obj.get("frames")
    frames = tuple(_json_frame(f) for f in keep_ends(raw if isinstance(raw, list) else ()) if isinstance(f, dict))
    active = obj.get("active")
    return ThreadStack(
        name=obj.get("thread_name") if isinstance(obj.get("thread_name"), str) else None,
        thread_id=tid if isinstance(tid, int) else None,
        frames=frames,
        active=active if isinstance(active, bool) else None,
    )


def _json_frame(obj: dict[str, Any]) -> Frame:
    # py-spy sets `module` (the .so path) only on native frames; Python frames have null
    module = obj.get("module") if isinstance(obj.get("module"), str) else None
    native = module is not None
    short = obj.get("short_filename") if isinstance(obj.get("short_filename"), str) else None
    filename = obj.get("filename") if isinstance(obj.get("filename"), str) else short
    line = obj.get("line")
    return make_frame(
        str(obj.get("name") or "?"),
        short if native else filename,
        line if isinstance(line, int) else None,
        native,
        module,
        short,
    )


def _has_native(threads: Iterable[ThreadStack]) -> bool:
    return any(f.origin is Origin.NATIVE for t in threads for f in t.frames)


# ---------------------------------------------------------------- files


def parse_stack_file(name: str, data: bytes, source: Source) -> list[ProcessStack]:
    """All processes in one stack file; `[]` when nothing in it reads as a stack."""
    label, sample = label_and_sample(name)
    text = data.decode("utf-8", "replace").lstrip("\ufeff")
    if text.lstrip()[:1] in ("[", "{"):
        stacks = _parse_json_text(text, label, source, sample)
        if stacks is not None:
            return stacks
    return parse_text(text, label, source, sample)


def label_and_sample(name: str) -> tuple[str, int]:
    """`TP0.json` -> ("TP0", 0); `TP0.native.1.json` -> ("TP0", 1); `stacks/1234.txt` -> ("1234", 0)."""
    base = PurePosixPath(name.replace("\\", "/")).name
    m = _FILE_NAME.match(base)
    if not m:
        return base or "?", 0
    return m["stem"], int(m["sample"]) if m["sample"] else 0


def _parse_json_text(text: str, label: str, source: Source, sample: int) -> list[ProcessStack] | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict):
        data = [data] if "frames" in data else data.get("threads")
    if not isinstance(data, list):
        return None
    groups: dict[Any, list[dict[str, Any]]] = {}
    for thread in data:
        if isinstance(thread, dict):
            groups.setdefault(thread.get("pid"), []).append(thread)
    many = len(groups) > 1
    return [
        parse_pyspy_json(threads, str(pid) if many and pid is not None else label, source, sample)
        for pid, threads in groups.items()
    ]


# ---------------------------------------------------------------- cross-rank view


def stack_signature(stack: ProcessStack, depth: int = 8) -> str:
    """The top `depth` frames of the main thread, as qualnames, innermost first.

    Line numbers, files and addresses are dropped, and native frames are skipped when Python
    frames exist: ranks on one code path then match even when only some had `--native` dumps
    or py-spy printed their paths differently (text vs JSON).
    """
    thread = stack.main
    if thread is None:
        return ""
    python = [f for f in thread.frames if f.origin is not Origin.NATIVE]
    frames = python or [f for f in thread.frames if not _ADDRESS.match(f.qualname)]
    return " < ".join(_normalise(f.qualname) for f in frames[:depth])


def _normalise(qualname: str) -> str:
    # lambdas and comprehensions are numbered differently across versions; `<lambda>` is enough
    return re.sub(r"<(lambda|genexpr|listcomp|dictcomp|setcomp)>\w*", r"<\1>", qualname)


def group_by_signature(stacks: Sequence[ProcessStack]) -> dict[str, list[str]]:
    """signature -> labels, using the latest sample of each label; biggest group first."""
    latest: dict[str, ProcessStack] = {}
    for stack in stacks:
        if stack.label not in latest or stack.sample >= latest[stack.label].sample:
            latest[stack.label] = stack
    groups: dict[str, list[str]] = {}
    for label, stack in latest.items():
        groups.setdefault(stack_signature(stack), []).append(label)
    ordered = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    return {sig: labels for sig, labels in ordered}
