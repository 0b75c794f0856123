"""Text stack dumps -> `ProcessStack`s (private to `hangwatch.parse.stacks`).

One line-by-line state machine reads every text format, because a bug report pastes them mixed:
a header line opens a process (`Process N: title`) or a thread (py-spy, faulthandler, pystack,
gdb, `Traceback (most recent call last):`), and frame lines are read in the style of the thread
they belong to. Frames without any header open an implicit thread of the style they match.
Lines that match nothing (shell prompts, source lines of a traceback, locals) are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from hangwatch.model import (
    Frame,
    Origin,
    ProcessStack,
    Source,
    ThreadStack,
    rank_from_name,
)
from hangwatch.parse.failures import signal_of
from hangwatch.parse.frames import PYTHON_FRAME_LINE, TRACEBACK_HEAD, keep_ends, make_frame, with_source_line

__all__ = ["parse_text"]

# decimal runs that go through int() are capped: garbage must not reach int()'s digit limit
_PROCESS = re.compile(r"^Process (\d{1,12}): ?(.*)$")
_GDB_THREAD = re.compile(r'^Thread (\d{1,12}) \(Thread (0x[0-9a-fA-F]+)(?: \(LWP (\d{1,12})\))?\)?(?: "(.*)")?\)?:')
_PYSPY_THREAD = re.compile(r'^Thread (\S+) \(([^)]*)\)(?:: "(.*)")?\s*$')
# newer Pythons may print the thread name between the id and the parenthesis; it is not needed
_FAULT_THREAD = re.compile(r"(Current thread|Thread) (0x[0-9a-fA-F]+)[^(]{0,200}\(most recent call first\):")
_PYSTACK_THREAD = re.compile(r"^Traceback for thread (\d{1,12})(?: \((.*?)\))?.*\(most recent call last\):")
_PYSPY_FRAME = re.compile(r"^\s{2,}(?P<name>\S.*?) \((?P<where>[^()]*)\)\s*$")
_PYSPY_BARE = re.compile(r"^\s{2,}(?P<name>[\w.<>:]+?)(?:\.\.\.|…)?\s*$")  # a truncated paste
_WHERE = re.compile(r"^(?P<file>.+?):(?P<line>\d{1,12})$")
_GDB_FRAME = re.compile(r"^#\d+\s+(?:0x[0-9a-fA-F]+ in )?(?P<rest>.*\S)")  # lines come rstripped
_GDB_WHERE = re.compile(r" (?:at (?P<file>\S+):(?P<line>\d{1,12})|from (?P<lib>\S+))$")
_GDB_PID = re.compile(r"(?:Attaching to process|\(process) (\d{1,12})\b")
_KERNEL = re.compile(
    r"^\[<[0-9a-fA-F]+>\]\s+(?P<func>[^\s+\[]+?)(?:\.\.\.|…)?(?:\+0x[0-9a-fA-F]+/0x[0-9a-fA-F]+)?"
    r"(?:\s+\[(?P<mod>[\w-]+)\])?\s*$"
)
_KERNEL_PID = re.compile(r"/proc/(\d{1,12})/(?:task/\d+/)?stack")
# Crash handlers print a backtrace when a fatal signal arrives; each project its own way:
# UCX/Triton/HugeCTR `==== backtrace (tid: 381) ====` then ` 0 0x00143c0 func()  file:line`;
# glog/absl `*** SIGSEGV (@0x0) received by PID 7 (TID 0x7f..) ...; stack trace: ***` then
# `    @     0x7f.. func`; backward-cpp `Stack trace (most recent call last) in thread 42:` then
# `#1    Object "/lib/x.so", at 0x.., in func` / `#0    Source "a.cpp", line 3, in func`.
_UCX_THREAD = re.compile(r"^=+ ?backtrace \(tid:\s*(\d{1,12})\) ?=+$")
_UCX_FRAME = re.compile(r"^\s*\d{1,4}\s+0x[0-9a-fA-F]+\s+(?P<func>\S.*?)\s+(?P<file>\S+):(?P<line>\d{1,12})\s*$")
_GLOG_THREAD = re.compile(
    r"^\*\*\* (?P<sig>SIG[A-Z]+)(?: \(@0x[0-9a-fA-F]+\))? received\b(?:.*?by PID (?P<pid>\d{1,12}))?"
    r"(?:.*?\(TID (?P<tid>0x[0-9a-fA-F]+|\d{1,12})\))?"
)
_GLOG_FRAME = re.compile(r"^\s*(?:PC: )?@\s+0x[0-9a-fA-F]+(?:\s+\d+)?\s+(?P<func>\S.*?)\s*$")
_BACKWARD_THREAD = re.compile(r"^Stack trace \(most recent call last\)(?: in thread (\d{1,12}))?:")
_BACKWARD_FRAME = re.compile(
    r'^#\d+\s+(?:Object "(?P<obj>[^"]*)"(?:, at 0x[0-9a-fA-F]+)?, in (?P<func>.+)|'
    r'Source "(?P<src>[^"]*)", line (?P<line>\d{1,12}), in (?P<func2>.+))$'
)
# A line that reports the fatal signal itself, in the crash handlers' and debuggers' words.
_SIGNAL_LINE = re.compile(
    r"(?i)caught signal \d+ \(|received signal SIG[A-Z]+|^\*\*\* SIG[A-Z]+ |^\*\*\* Aborted at|"
    r"^Fatal Python error: (?:Segmentation fault|Bus error|Aborted|Illegal instruction)|"
    r"^(?:Segmentation fault|Bus error|Illegal instruction|Aborted|Floating point exception) \("
)
# styles whose frames are written outermost first (reversed when the thread closes)
_OUTERMOST_FIRST = frozenset({"traceback", "pystack", "backward"})


@dataclass
class _Thread:
    style: str  # pyspy, traceback, faulthandler, pystack, gdb, kernel
    name: str | None = None
    tid: int | None = None
    active: bool | None = None
    frames: list[Frame] = field(default_factory=list)
    signal: str | None = None

    def build(self) -> ThreadStack:
        frames = keep_ends(self.frames[::-1] if self.style in _OUTERMOST_FIRST else self.frames)
        name = self.name
        python = [f for f in frames if f.origin is not Origin.NATIVE]
        # faulthandler and pystack do not name threads; the one whose script is the entry is main
        if self.style in ("faulthandler", "pystack") and python and python[-1].function == "<module>":
            name = "MainThread"
        return ThreadStack(name=name, thread_id=self.tid, frames=tuple(frames), active=self.active, signal=self.signal)


@dataclass
class _Process:
    pid: int | None = None
    title: str | None = None
    line: int | None = None
    threads: list[_Thread] = field(default_factory=list)


class _Parser:
    def __init__(self) -> None:
        self.procs: list[_Process] = []
        self.locals_indent: int | None = None  # inside a py-spy `--locals` block
        self.pending_signal: str | None = None  # reported before the backtrace it belongs to

    @property
    def proc(self) -> _Process:
        if not self.procs:
            self.procs.append(_Process())
        return self.procs[-1]

    @property
    def thread(self) -> _Thread | None:
        threads = self.procs[-1].threads if self.procs else []
        return threads[-1] if threads else None

    def open_thread(self, style: str, name: str | None = None, tid: int | None = None, active: bool | None = None) -> None:
        self.proc.threads.append(_Thread(style, name, tid, active, signal=self.pending_signal))
        self.pending_signal = None
        self.locals_indent = None

    def feed(self, lineno: int, line: str) -> None:
        if not line.strip():
            self.locals_indent = None
            return
        if _SIGNAL_LINE.search(line) and not _GLOG_THREAD.match(line):
            self._signal(line)
            return
        if not self._header(lineno, line):
            self._frame(line)

    def _signal(self, line: str) -> None:
        """Most handlers name the signal before the backtrace; backward-cpp after its frames."""
        name = signal_of(line) or "SIGABRT"
        thread = self.thread
        if thread is not None and thread.style == "backward" and thread.frames and thread.signal is None:
            thread.signal = name
        else:
            self.pending_signal = name

    def finish(self) -> None:
        """A signal line with no backtrace after it belongs to the last thread read."""
        if self.pending_signal and self.thread is not None and self.thread.signal is None:
            self.thread.signal = self.pending_signal

    # ---------------------------------------------------------------- headers

    def _header(self, lineno: int, line: str) -> bool:
        m = _PROCESS.match(line)
        if m:
            self.procs.append(_Process(pid=int(m[1]), title=m[2].strip() or None, line=lineno))
            return True
        m = _GDB_THREAD.match(line)
        if m:
            lwp = int(m[3]) if m[3] else None
            if m[1] == "1" and self.proc.pid is None:
                self.proc.pid = lwp  # gdb's thread 1 is the process's main thread
            self.open_thread("gdb", m[4], lwp)
            return True
        m = _PYSPY_THREAD.match(line)
        if m:
            status = m[2]
            self.open_thread("pyspy", m[3], _int(m[1]), None if not status else "idle" not in status)
            return True
        m = _FAULT_THREAD.search(line)
        if m:
            self.open_thread("faulthandler", None if m[1] == "Current thread" else f"Thread {m[2]}", int(m[2], 16))
            return True
        m = _PYSTACK_THREAD.match(line.strip())
        if m:
            self.open_thread("pystack", m[2], int(m[1]))
            return True
        if TRACEBACK_HEAD.search(line):
            self.open_thread("traceback")
            return True
        m = _UCX_THREAD.match(line.strip())
        if m:
            self.open_thread("ucx", None, int(m[1]))
            return True
        m = _GLOG_THREAD.match(line.strip())
        if m:
            self.pending_signal = m["sig"]
            if m["pid"] and self.proc.pid is None:
                self.proc.pid = int(m["pid"])
            self.open_thread("glog", None, _int(m["tid"]) if m["tid"] else None)
            return True
        m = _BACKWARD_THREAD.match(line.strip())
        if m:
            self.open_thread("backward", None, int(m[1]) if m[1] else None)
            return True
        m = _KERNEL_PID.search(line) or _GDB_PID.search(line)
        if m and self.proc.pid is None:
            self.proc.pid = int(m[1])
        return False

    # ---------------------------------------------------------------- frames

    def _frame(self, line: str) -> None:
        thread = self.thread
        style = thread.style if thread else None
        frame = _READERS[style](self, line) if style in _READERS else None
        if frame is None and thread is None:
            style, frame = _guess(line)
            if frame is not None and style is not None:  # a frame always comes with its style
                self.open_thread(style)
        if frame is not None:
            self.thread.frames.append(frame)  # type: ignore[union-attr]

    def _pyspy(self, line: str) -> Frame | None:
        indent = len(line) - len(line.lstrip())
        if self.locals_indent is not None and indent > self.locals_indent:
            return None
        self.locals_indent = None
        if line.strip() in ("Arguments:", "Locals:"):
            self.locals_indent = indent
            return None
        return _pyspy_frame(line)


def _int(text: str) -> int | None:
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return None  # `Thread MainThread (active)` in an edited paste


def _pyspy_frame(line: str) -> Frame | None:
    m = _PYSPY_FRAME.match(line)
    if m:
        where = _WHERE.match(m["where"])
        file, lineno = (where["file"], int(where["line"])) if where else (m["where"], None)
        native = not (file.endswith(".py") or file.startswith("<"))
        return make_frame(m["name"], file, lineno, native)
    m = _PYSPY_BARE.match(line)
    return make_frame(m["name"], None, None, False) if m else None


def _python_frame(line: str) -> Frame | None:
    m = PYTHON_FRAME_LINE.search(line)
    if not m:
        return None
    native = m["kind"] == "C"
    file = None if native and m["file"] in ("???", "") else m["file"]
    return make_frame(m["func"], file, int(m["line"]), native, m["lib"] if native else None)


def _gdb_frame(line: str) -> Frame | None:
    m = _GDB_FRAME.match(line)
    if not m:
        return None
    rest = m["rest"]
    where = _GDB_WHERE.search(rest)
    file = lib = lineno = None
    if where:
        rest = rest[: where.start()]
        file, lib = where["file"], where["lib"]
        lineno = int(where["line"]) if file else None
    return make_frame(_call_name(rest), file, lineno, True, lib)


def _call_name(text: str) -> str:
    """`ncclCommInitRank (comm=0x1, ...)` -> `ncclCommInitRank`; keeps `<...>` and `(anonymous namespace)`."""
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch == "<") - (ch == ">" and depth > 0)
        if depth == 0 and text.startswith(" (", i):
            return text[:i]
    return text


def _native_name(text: str) -> str:
    """`ncclGroupEnd()` / `foo(int, char*) +0x12` / `foo + 0x12` -> the function's name."""
    text = re.sub(r"\s*\+\s*0x[0-9a-fA-F]+$", "", text.strip())
    name = _call_name(text)
    return name[: name.index("(")] if "(" in name and not name.startswith("(") else name


def _ucx_frame(line: str) -> Frame | None:
    m = _UCX_FRAME.match(line)
    if not m:
        return None
    file = None if m["file"].startswith("?") else m["file"]
    return make_frame(_native_name(m["func"]), file, int(m["line"]) or None if file else None, True)


def _glog_frame(line: str) -> Frame | None:
    m = _GLOG_FRAME.match(line)
    if not m or m["func"].startswith("(unknown)"):
        return None
    func, _, lib = m["func"].partition(" (in ")  # `func (in /lib/x.so)`
    return make_frame(_native_name(func), None, None, True, lib.rstrip(")") or None)


def _backward_frame(line: str) -> Frame | None:
    m = _BACKWARD_FRAME.match(line.strip())
    if not m:
        return None
    if m["func"] is not None:
        return make_frame(_native_name(m["func"]), None, None, True, m["obj"] or None)
    src = m["src"]
    python = src.endswith(".py")
    return make_frame(_native_name(m["func2"]) if not python else m["func2"].strip(), src, int(m["line"]), not python)


def _kernel_frame(line: str) -> Frame | None:
    m = _KERNEL.match(line.strip())
    if not m:
        return None
    return make_frame(m["func"], None, None, True, m["mod"] or "kernel")


_READERS: dict[str, Callable[[_Parser, str], Frame | None]] = {
    "pyspy": _Parser._pyspy,
    "traceback": lambda _p, line: _python_frame(line),
    "faulthandler": lambda _p, line: _python_frame(line),
    "pystack": lambda _p, line: _python_frame(line),
    "gdb": lambda _p, line: _gdb_frame(line),
    "kernel": lambda _p, line: _kernel_frame(line),
    "ucx": lambda _p, line: _ucx_frame(line),
    "glog": lambda _p, line: _glog_frame(line),
    "backward": lambda _p, line: _backward_frame(line),
}


def _guess(line: str) -> tuple[str | None, Frame | None]:
    """The style of a frame line seen before any header."""
    frame = _kernel_frame(line)
    if frame:
        return "kernel", frame
    if line.startswith("#"):
        frame = _gdb_frame(line)
        return ("gdb", frame) if frame else (None, None)
    m = PYTHON_FRAME_LINE.search(line)
    if m:
        # `File "x", line 3, in f` is a traceback (outermost first); without the comma, faulthandler
        style = "pystack" if m["kind"] else "traceback" if m["comma"] else "faulthandler"
        return style, _python_frame(line)
    m = _PYSPY_FRAME.match(line)
    if m and (_WHERE.match(m["where"]) or ".so" in m["where"]):
        return "pyspy", _pyspy_frame(line)
    return None, None


def parse_text(text: str, label: str, source: Source, sample: int) -> list[ProcessStack]:
    """Every process in a text dump; `[]` when no line reads as a frame."""
    parser = _Parser()
    for lineno, line in enumerate(text.splitlines(), 1):
        parser.feed(lineno, line.rstrip())
    parser.finish()
    procs = [p for p in parser.procs if p.threads]
    if not any(t.frames for p in procs for t in p.threads):
        return []
    return [_build(p, i, label, source, sample, len(procs)) for i, p in enumerate(procs)]


def _build(proc: _Process, index: int, label: str, source: Source, sample: int, count: int) -> ProcessStack:
    threads = tuple(t.build() for t in proc.threads)
    pid = proc.pid if proc.pid is not None else (int(label) if label.isdigit() and count == 1 else None)
    return ProcessStack(
        label=_label(proc, index, label, count),
        pid=pid,
        threads=threads,
        source=with_source_line(source, proc.line, None),
        sample=sample,
        native=any(f.origin is Origin.NATIVE for t in threads for f in t.frames),
    )


def _label(proc: _Process, index: int, label: str, count: int) -> str:
    """The rank tag of an engine process title (`sglang::scheduler_TP3` -> `TP3`), else the file's."""
    first = proc.title.split()[0] if proc.title else ""
    rank = rank_from_name(first) if "::" in first else None
    if rank:
        return rank
    if count == 1:
        return label
    return str(proc.pid) if proc.pid is not None else f"{label}-{index}"
