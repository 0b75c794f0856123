"""Errors in a server log, read as failures: what failed, where, and which failure came first.

A start that fails prints its story in a few shapes, whatever the engine: a Python traceback
(frames, then `Type: message`, possibly chained with "During handling of the above exception"
or "The above exception was the direct cause"), a C++ `terminate called after throwing`, NCCL's
`NCCL WARN` line and its `ncclUnhandledCudaError`-style result, a CUDA runtime error, a signal
(`SIGBUS`, `Caught signal 7`), an errno (`EADDRINUSE`, `[Errno 98]`), and then the launcher's
consequences: "child failed", "died unexpectedly", SIGQUIT, the tree killed.

`read_failures(lines, memo)` is pure: it turns cleaned `LogLine`s (prefix already split off into
`message`) into `Failure`s in log order and marks one of them the root: the earliest failure
that is not itself a consequence (a consequence only says that something else failed first).
A `FailureMemo`, owned by the caller that reads one growing log tick after tick, only saves work.
"""

from __future__ import annotations

import bisect
import operator
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from hangwatch.model import LogLine
from hangwatch.parse.frames import PYTHON_FRAME_LINE, TRACEBACK_HEAD, engine_packages
from hangwatch.parse.shapes import shape

__all__ = ["Failure", "FailureMemo", "TraceFrame", "cuda_error", "errno_family", "read_failures", "root_of", "signal_of"]


@dataclass(frozen=True)
class TraceFrame:
    """One `File "...", line N, in func` of a Python traceback; `module` is the dotted path
    from the package root when the file sits in site-packages (`vllm.distributed.parallel_state`)."""

    file: str
    line: int | None
    function: str
    module: str | None = None

    @property
    def display(self) -> str:
        where = self.module or self.file.rsplit("/", 1)[-1]
        return f"{self.function} ({where}:{self.line})" if self.line else f"{self.function} ({where})"


# What a rule regex may search in one failure: the summary, chained causes and frames of even a
# deep traceback fit; a hostile one (thousands of continuation lines) does not make a match cost more.
MAX_HAYSTACK = 8 * 1024


@dataclass(frozen=True)
class Failure:
    """One failure the log reports. `lines` are the log line numbers it spans (a traceback spans
    many); `lineno` is its summary line (the exception line, else its first line)."""

    kind: str  # exception | terminate | nccl | cuda | signal | errno | exit | timeout | consequence
    text: str  # the summary as printed: "RuntimeError: CUDA error: invalid argument"
    lineno: int
    lines: tuple[int, ...]
    rank: str | None = None
    process: str | None = None
    timestamp: str | None = None
    exc_type: str | None = None
    message: str = ""
    frames: tuple[TraceFrame, ...] = ()  # innermost first, like model.Frame
    chained: tuple[str, ...] = ()  # earlier exceptions of the same chain, first printed first
    locations: tuple[str, ...] = ()  # source locations the message names ("custom_all_reduce.cuh:37")
    errno: str | None = None  # canonical family: EADDRINUSE, ENOSPC, ...
    cuda: str | None = None  # canonical CUDA error text: "invalid argument", "peer access is not supported"
    signal: str | None = None  # SIGBUS, SIGSEGV, SIGKILL, ...
    consequence: bool = False  # says only that something else failed (child died, tree killed)
    warning: bool = False  # logged at warning level: the writer carried on
    role: str | None = None  # "root" | "consequence", set by `read_failures`

    @property
    def where(self) -> str:
        """Innermost first: the locations the message names, then the frames (module and function)."""
        parts = list(self.locations) + [f"{f.module or f.file}:{f.function}" for f in self.frames]
        return " ".join(parts)[:MAX_HAYSTACK]

    @property
    def haystack(self) -> str:
        """Everything a rule may match: summary, chained causes, locations, frames."""
        return "\n".join((self.text, *self.chained, self.where))[:MAX_HAYSTACK]


# ---------------------------------------------------------------- vocabulary (mechanism, not wording of one report)

# errno families: the symbolic name, the number on Linux (and macOS for EADDRINUSE), the strerror text
_ERRNO: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(rx, re.IGNORECASE))
    for name, rx in (
        ("EADDRINUSE", (r"EADDRINUSE|errno:? ?(?:98|48)\b|\[errno (?:98|48)\]|address already in use|"
                       r"port \d+ is (?:already )?in use|WinError 10048|only one usage of each socket address")),
        ("EADDRNOTAVAIL", r"EADDRNOTAVAIL|\[errno 99\]|cannot assign requested address"),
        ("EAFNOSUPPORT", r"EAFNOSUPPORT|\[errno 97\]|address family not supported"),
        ("ECONNREFUSED", r"ECONNREFUSED|\[errno 111\]|\(111\)|connection refused"),
        ("ETIMEDOUT", r"ETIMEDOUT|\[errno 110\]|connection timed out"),
        ("ENOSPC", r"ENOSPC|\[errno 28\]|no space left on device"),
        ("ENOMEM", r"ENOMEM|\[errno 12\]|cannot allocate memory"),
        ("ENOENT", r"ENOENT|\[errno 2\]|no such file or directory"),
        ("EACCES", r"EACCES|\[errno 13\]|permission denied"),
        ("EBUSY", r"EBUSY|\[errno 16\]|device or resource busy"),
        ("EAGAIN", r"EAGAIN|\[errno 11\]|resource temporarily unavailable"),
        ("ECONNRESET", r"ECONNRESET|\[errno 104\]|connection reset by peer"),
    )
)  # fmt: skip

# CUDA runtime/driver error names -> the text cudaGetErrorString prints, so both spellings meet
_CUDA_NAMES = {
    "cudaErrorInvalidValue": "invalid argument", "CUDA_ERROR_INVALID_VALUE": "invalid argument",
    "cudaErrorInvalidDevice": "invalid device ordinal", "CUDA_ERROR_INVALID_DEVICE": "invalid device ordinal",
    "cudaErrorPeerAccessUnsupported": "peer access is not supported between these two devices",
    "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED": "peer access is not supported between these two devices",
    "cudaErrorMemoryAllocation": "out of memory", "CUDA_ERROR_OUT_OF_MEMORY": "out of memory",
    "cudaErrorNoKernelImageForDevice": "no kernel image is available for execution on the device",
    "CUDA_ERROR_NO_BINARY_FOR_GPU": "no kernel image is available for execution on the device",
    "cudaErrorSystemNotReady": "system not yet initialized", "CUDA_ERROR_SYSTEM_NOT_READY": "system not yet initialized",
    "cudaErrorIllegalAddress": "an illegal memory access was encountered",
    "CUDA_ERROR_ILLEGAL_ADDRESS": "an illegal memory access was encountered",
    "cudaErrorLaunchTimeout": "the launch timed out and was terminated",
    "cudaErrorUnknown": "unknown error", "CUDA_ERROR_UNKNOWN": "unknown error",
    "cudaErrorDevicesUnavailable": "CUDA-capable device(s) is/are busy or unavailable",
    "cudaErrorNoDevice": "no CUDA-capable device is detected",
    "cudaErrorInsufficientDriver": "CUDA driver version is insufficient for CUDA runtime version",
    "cudaErrorStreamCaptureUnsupported": "operation not permitted when stream is capturing",
    "cudaErrorStreamCaptureInvalidated": "operation failed due to a previous error during capture",
    "cudaErrorUnsupportedPtxVersion": "the provided PTX was compiled with an unsupported toolchain",
}  # fmt: skip
_CUDA_NAME = re.compile(r"\b(cudaError\w+|CUDA_ERROR_[A-Z_]+)\b")
# "CUDA error: X", "Cuda failure 1 'X'", "Cuda error custom_all_reduce.cuh:455 'X'", "CUDA runtime error ...: X",
# "CUDA driver error: X", "CUDART error ...: X"
_CUDA_TEXT = re.compile(
    r"(?i)\bcuda(?:rt)?(?: runtime| driver)?(?: api)? (?:error|failure)\b[^'\n:]*?(?:'(?P<q>[^'\n]+)'|:\s*(?P<c>[^.;\n(<']+))"
)
_CUDA_KNOWN = re.compile(
    r"(?i)(invalid argument|invalid device ordinal|peer access is not supported[a-z ]*|out of memory|"
    r"no kernel image is available[a-z ]*|system not yet initialized|an illegal memory access[a-z ]*|"
    r"unknown error|operation not permitted when stream is capturing|"
    r"operation failed due to a previous error during capture|unsupported toolchain|"
    r"device-side assert triggered|misaligned address|unspecified launch failure|"
    r"initialization error|CUDA driver version is insufficient[a-z ]*|busy or unavailable)"
)

_SIGNALS = {"1": "SIGHUP", "2": "SIGINT", "3": "SIGQUIT", "4": "SIGILL", "6": "SIGABRT", "7": "SIGBUS",
            "9": "SIGKILL", "11": "SIGSEGV", "15": "SIGTERM"}  # fmt: skip
_SIGNAL_TEXT = re.compile(
    r"(?i)\b(SIG(?:BUS|SEGV|ABRT|KILL|TERM|QUIT|ILL|INT|HUP))\b|"
    r"(?P<bus>bus error)|(?P<segv>segmentation fault)|(?P<abrt>\baborted \(core dumped\))|"
    r"caught signal (?P<num>\d+)|signal (?P<num2>\d+)\b|exit ?code:? ?(?P<neg>-\d+)|exitcode ?: ?(?P<neg2>-\d+)"
)

_NCCL_RESULT = re.compile(
    r"(?i)\b(nccl(?:InternalError|UnhandledCudaError|SystemError|InvalidUsage|InvalidArgument|RemoteError)|"
    r"unhandled (?:cuda|system) error|internal error|remote process exited or there was a network error)\b"
)
# NCCL WARN lines that report something absent or optional, not a failure (a missing IB plugin on
# a box without InfiniBand is how every healthy PCIe/NVLink start looks).
_NCCL_BENIGN = re.compile(
    r"(?i)failed to open libibverbs|no plugin found|NET/Plugin|libnccl-net|could not find real path|"
    r"failed to find cuda library|setting .* failed.*will fall ?back|falling back|fall back|"
    r"ncclCommInitRank.*async|Ignoring|ignored|is deprecated"
)

_CHAIN = re.compile(
    r"^\s*(During handling of the above exception, another exception occurred|"
    r"The above exception was the direct cause of the following exception):?"
)
# `Type: message` at the end of a traceback, or standing alone: a dotted class whose last part names
# an error/exception (or a known bare type); never a logger level.
_EXC_LINE = re.compile(
    r"^\s*(?P<type>(?:[A-Za-z_][\w]*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Timeout|Failure|Abort)|"
    r"Exception|KeyboardInterrupt|StopIteration|DistBackendError|DistNetworkError|DistStoreError|"
    r"ChildFailedError|OutOfMemoryError|AssertionError))(?::\s?(?P<msg>.*))?$"
)
_TERMINATE = re.compile(r"terminate called after throwing an instance of '(?P<type>[^']+)'")
_WHAT = re.compile(r"^\s*what\(\):\s*(?P<msg>.*)")
_LOCATION = re.compile(r"(?P<loc>[\w./\-]+\.(?:cuh|cu|cc|cpp|cxx|c|h|hpp|py)):(?P<line>\d+)")

# Consequences: lines that only report that something else failed first.
_CONSEQUENCE = re.compile(
    r"(?i)died unexpectedly|died during initiali[sz]ation|child (?:process )?failed|childfailederror|"
    r"received sigquit|sigquit received|killing (?:the )?(?:process|tree|all)|"
    r"failed to start\b|initiali[sz]ation failed\.? see root cause|see (?:the )?root cause above|"
    r"core proc\S* died|exception in thread|signal \d+ received by pid|sending process \d+ closing signal|"
    r"terminated with (?:exit code|signal)|has exited with|exited with (?:code|exit)|"
    r"engine core (?:proc|initialization) failed|workerproc failed|rank \d+ .*died|"
    r"process group watchdog|watchdog caught collective operation timeout|"
    r"some of the ranks? (?:failed|exited)|shutting down|shutdown"
)
# An error line outside a traceback: a logger's ERROR/CRITICAL, or words that only failures use
_ERROR_WORDS = re.compile(
    r"(?i)\b(?:error|failed|failure|fatal|exception|timed out|timeout|abort(?:ed|ing)?|cannot|could not)\b"
)
# Words that turn an error-looking line into a statement that nothing failed (polarity)
_NOT_A_FAILURE = re.compile(
    r"(?i)\b(?:no errors?|without errors?|0 errors?|error[- ]free|errors?: ?0\b|to silence this warning|"
    r"will (?:retry|fall ?back)|falling back|fell back|is disabled|disabling|not enabled|"
    r"succeeded|successful(?:ly)?|completed|finished|connected|resolved|recovered|"
    r"ignore[ds]?|ignoring|skipping|deprecat\w+|warnings?\.warn|futurewarning|userwarning|"
    # a capability probe's result (`Cannot detect CUDA architecture.` on a host without one): the
    # engine goes on with its default
    r"(?:cannot|could not|couldn't|unable to) (?:auto-?)?detect)\b"
)
# A compiler or build tool that failed (a JIT build): `ptxas fatal   : ...`, `file.cu(12): error: ...`,
# `kernel.cu:12:3: error: ...`, `ninja: build stopped: subcommand failed.`
_BUILD_ERROR = re.compile(
    r"(?i)^(?:\S*/)?(?:ptxas|nvcc|nvlink|cicc|fatbinary|ninja|gcc|g\+\+|c\+\+|clang\+*|ld)\b[^\n]*?\b(?:fatal|error)\b|"
    r"\.(?:cu|cuh|cpp|cc|h|hpp)(?:\(\d+\)|:\d+(?::\d+)?):?\s*(?:fatal )?error\b|ninja: build stopped"
)
# One cheap search that every failure line passes (most log lines are progress), run once over the
# lower-cased log: plain lower-case literals keep `re` on its fast path (a 600 kB log in ~0.07 s).
_MAYBE = re.compile(
    r"err|fail|fatal|exception|warn|time(?:d ?)?out|abort|cannot|could not|can't|unable|refused|denied|no space|"
    r"in use|sig[a-z]{2,4}\b|signal|killed|died|segmentation|bus error|terminate|invalid|illegal|unhandled|"
    r"not supported|no kernel|unknown|exit ?code|watchdog|heartbeat|cudaerror|cuda_error|not yet initiali|"
    r"busy or unavailable|out of memory|eaddr|econn|enospc|eafno|\(111\)|incomplete|stale file|deserializ|"
    r"connection|shutting|shutdown|oom|xid"
)
# A message that opens by saying it failed: `Failed to initialize NVML: ...`, `Error: ...`
_LEADING_FAILURE = re.compile(r"(?i)^(?:error|fatal|failed|failure|unable to|cannot|could not|can't)\b")
# Warning level in the prefixes engines and libraries write: vLLM/logging `WARNING`, glog `[W...]`/
# `W1201 ...`, Python's `UserWarning:`; NCCL's `NCCL WARN` is its error level and is not one of them.
_WARNING_LEVEL = re.compile(r"(?:^|[\s\]:])WARN(?:ING)?\b|^\[?W\d{4} |^\[W |\b\w*Warning:")
_ERROR_LEVEL = re.compile(r"(?i)(?:\[\S+\]\s*)*\[?(?:ERROR|CRITICAL|FATAL)\b")
# glog/c10 error and fatal levels: `[E socket.cpp:472] ...`, `E1201 10:00:00.123 ...`, `F1201 ...`
_GLOG_ERROR = re.compile(r"^\[?[EF]\d{4} |^\[[EF] ")
_TIMEOUT = re.compile(r"(?i)\btimed out\b|\btimeout\b|\bwatchdog\b|\bheartbeat\b")

_SITE_PACKAGES = re.compile(r"(?:site|dist)-packages/(?P<mod>.+?)\.py$")


# ---------------------------------------------------------------- small readers, each tested on its own


def errno_family(text: str) -> str | None:
    """The errno a message reports, by symbol, number or strerror text; None when none."""
    for name, pattern in _ERRNO:
        if pattern.search(text):
            return name
    return None


def cuda_error(text: str) -> str | None:
    """The CUDA error a message reports, as cudaGetErrorString prints it (names mapped to text)."""
    for named in _CUDA_NAME.finditer(text):
        if named.group(1) in _CUDA_NAMES:
            return _CUDA_NAMES[named.group(1)]
    if not re.search(r"(?i)\bcuda", text):
        return None
    known = _CUDA_KNOWN.search(text)
    if known:
        return known.group(1).lower()
    m = _CUDA_TEXT.search(text)
    if not m:
        return None
    what = (m.group("q") or m.group("c") or "").strip().lower()
    return what or None


def signal_of(text: str) -> str | None:
    """The fatal signal a line reports (`SIGBUS`, ...), from a name, `Bus error`, `signal 7` or a
    negative exit code; None when none."""
    m = _SIGNAL_TEXT.search(text)
    if not m:
        return None
    if m.group(1):
        return m.group(1).upper()
    if m.group("bus"):
        return "SIGBUS"
    if m.group("segv"):
        return "SIGSEGV"
    if m.group("abrt"):
        return "SIGABRT"
    num = m.group("num") or m.group("num2")
    neg = m.group("neg") or m.group("neg2")
    if neg:
        num = neg.lstrip("-")
    return _SIGNALS.get(num or "")


def module_of(path: str) -> str | None:
    """`.../site-packages/vllm/distributed/utils.py` -> `vllm.distributed.utils`: frames match by
    module, not by where an install put the file."""
    m = _SITE_PACKAGES.search(path)
    if m:
        return m.group("mod").replace("/", ".")
    # an engine checkout (`/sgl-workspace/sglang/python/sglang/srt/...`): from the last engine dir
    for top in (*sorted(engine_packages()), "torch", "flashinfer", "tensorrt_llm", "transformers", "zmq", "ray"):
        idx = path.rfind(f"/{top}/")
        if idx >= 0 and path.endswith(".py"):
            return path[idx + 1 : -3].replace("/", ".")
    return None


def _locations(text: str) -> tuple[str, ...]:
    """Source locations named in a message, innermost (last printed) first: "Capture failed: check
    failed at .../custom_all_reduce.cuh:37" names where the failure really happened."""
    found = [f"{m['loc'].rsplit('/', 1)[-1]}:{m['line']}" for m in _LOCATION.finditer(text)]
    return tuple(reversed(found))


def is_failure_text(text: str) -> bool:
    """Polarity: an error word that is not negated, fallen back from or reported as fixed."""
    return bool(_ERROR_WORDS.search(text)) and not _NOT_A_FAILURE.search(text)


# ---------------------------------------------------------------- the log reader


@dataclass
class _Trace:
    """A traceback being read: its stream, lines, frames (outermost first while reading)."""

    key: tuple[str | None, str | None, int | None]
    first: LogLine
    lines: list[int]
    frames: list[TraceFrame]
    chained: list[str]
    closed: bool = False


def _stream(line: LogLine) -> tuple[str | None, str | None, int | None]:
    return (line.rank, line.process, line.pid)


# Prefixes the log parser leaves on the message: torch's per-rank `[rank3]:`, TensorRT-LLM's
# `[TensorRT-LLM][ERROR]`, mpirun's `[1,0]<stderr>:`
_EXTRA_PREFIX = re.compile(r"^(?:\[rank\d+\]:\s?|\[TensorRT-LLM\](?:\[[A-Z]+\])?\s*|\[\d+,\d+\]<std(?:err|out)>:\s?)+")


def _body(line: LogLine) -> str:
    body = line.message if line.message else line.text
    return _EXTRA_PREFIX.sub("", body) if body[:1] == "[" else body


def _make(kind: str, text: str, line: LogLine, **fields: object) -> Failure:
    message = str(fields.pop("message", text))
    locs = _locations(text)
    return Failure(
        kind=kind, text=text.strip(), lineno=line.lineno, lines=tuple(fields.pop("lines", (line.lineno,))),  # type: ignore[arg-type]
        rank=line.rank, process=line.process, timestamp=line.timestamp, message=message,
        locations=locs, errno=errno_family(text), cuda=cuda_error(text), signal=signal_of(text),
        warning=bool(_WARNING_LEVEL.search(line.text)) and " NCCL WARN " not in f" {line.text} ",
        **fields,  # type: ignore[arg-type]
    )  # fmt: skip


def _single(line: LogLine, body: str) -> Failure | None:
    """A failure told on one line, or None."""
    stripped = body.strip()
    if not stripped:
        return None
    if " NCCL WARN " in f" {stripped} " or stripped.startswith("NCCL WARN"):
        if _NCCL_BENIGN.search(stripped):
            return None
        return _make("nccl", stripped, line)
    m = _TERMINATE.search(stripped)
    if m:
        return _make("terminate", stripped, line, exc_type=m["type"])
    m = _EXC_LINE.match(stripped)
    if m and m["msg"] is not None:
        return _make("exception", stripped, line, exc_type=m["type"], message=m["msg"],
                     consequence=bool(_CONSEQUENCE.search(stripped)))  # fmt: skip
    error_level = (_ERROR_LEVEL.match(stripped) or " ERROR " in line.text or _LEADING_FAILURE.match(stripped)
                   or _GLOG_ERROR.match(line.text.lstrip()))
    # "Worker proc X died unexpectedly" logged at error level reports a death without a failure word
    if _CONSEQUENCE.search(stripped) and (is_failure_text(stripped) or signal_of(stripped) or error_level):
        return _make("consequence", stripped, line, consequence=True)
    sig = signal_of(stripped)
    if sig in ("SIGBUS", "SIGSEGV", "SIGABRT", "SIGILL") and not _NOT_A_FAILURE.search(stripped):
        return _make("signal", stripped, line)
    if _NCCL_RESULT.search(stripped) and is_failure_text(stripped):
        return _make("nccl", stripped, line)
    if cuda_error(stripped) and is_failure_text(stripped):
        return _make("cuda", stripped, line)
    if errno_family(stripped) and is_failure_text(stripped):
        return _make("errno", stripped, line)
    if _BUILD_ERROR.search(stripped):
        return _make("exit", stripped, line)
    if error_level and is_failure_text(stripped):
        kind = "timeout" if _TIMEOUT.search(stripped) else "exit"
        return _make(kind, stripped, line, consequence=bool(_CONSEQUENCE.search(stripped)))
    if _TIMEOUT.search(stripped) and is_failure_text(stripped):
        return _make("timeout", stripped, line, consequence=bool(_CONSEQUENCE.search(stripped)))
    return None


def _close(trace: _Trace, end: LogLine | None, exc: re.Match[str] | None) -> Failure:
    frames = tuple(reversed(trace.frames))  # innermost first
    if exc is not None and end is not None:
        text = _body(end).strip()
        return _make(
            "exception", text, end, exc_type=exc["type"], message=exc["msg"] or "", frames=frames,
            chained=tuple(trace.chained), lines=(*trace.lines, end.lineno),
            consequence=bool(_CONSEQUENCE.search(text)),
        )  # fmt: skip
    # a traceback cut short (a pasted excerpt): the failure is where its innermost frame stands
    last = frames[0].display if frames else "traceback"
    return _make("exception", f"Traceback (cut) at {last}", trace.first, frames=frames,
                 chained=tuple(trace.chained), lines=tuple(trace.lines))  # fmt: skip


# _MAYBE over line shapes (digits made 0): its one literal with digits made 0 too, so a shape
# matches wherever a line of it could (a superset: _single reads each candidate; tests/unit/parse)
_MAYBE_SHAPE = re.compile(_MAYBE.pattern.replace(r"\(111\)", r"\(000\)"))


def _candidates(lines: Sequence[LogLine]) -> set[int]:
    """Indexes of the lines that may tell a failure. A log repeats a few line shapes (lower-cased,
    digits made 0: a batch line whose counters differ), so _MAYBE runs over the distinct shapes,
    not over every line (a tenth of the time on 5 000 serving lines)."""
    bodies = [_body(line) for line in lines]
    shapes = shape("\n".join(bodies).lower()).split("\n")
    if len(shapes) == len(bodies):  # else a body held a line break: the search below places it
        hit = {one for one in set(shapes) if _MAYBE_SHAPE.search(one)}
        return {i for i, one in enumerate(shapes) if one in hit} if hit else set()
    starts, offset = [], 0
    for body in bodies:
        starts.append(offset)
        offset += len(body) + 1
    text = "\n".join(bodies).lower()
    found: set[int] = set()
    for m in _MAYBE.finditer(text):
        found.add(bisect.bisect_right(starts, m.start()) - 1)
    return found


_Key = tuple[str | None, str | None, int | None]


@dataclass
class _ReadState:
    """Where reading stopped: failures so far, tracebacks still open, causes awaiting their chain."""

    out: list[Failure] = field(default_factory=list)
    open_traces: dict[_Key, _Trace] = field(default_factory=dict)
    latest: _Trace | None = None
    pending_chain: dict[_Key, list[str]] = field(default_factory=dict)

    def copy(self) -> _ReadState:
        """Deep where reading mutates (a trace's lists), shared where it never does (Failures)."""
        fresh: dict[int, _Trace] = {}

        def dup(t: _Trace) -> _Trace:
            if id(t) not in fresh:
                fresh[id(t)] = replace(t, lines=list(t.lines), frames=list(t.frames), chained=list(t.chained))
            return fresh[id(t)]

        return _ReadState(list(self.out), {k: dup(t) for k, t in self.open_traces.items()},
                          dup(self.latest) if self.latest is not None else None,
                          {k: list(v) for k, v in self.pending_chain.items()})  # fmt: skip


def _read(lines: Sequence[LogLine], memo: FailureMemo | None) -> list[Failure]:
    lines = tuple(lines)
    start, state = 0, _ReadState()
    saved = memo.resumed() if memo is not None else None
    if saved is not None and saved[0] and lines:
        done, at = saved
        # The live window slides (the newest 5 000 lines): lines may have left its front since.
        dropped = lines[0].lineno - done[0].lineno
        kept = len(done) - dropped
        if 0 <= dropped < len(done) and kept <= len(lines) and all(map(operator.is_, done[dropped:], lines[:kept])):
            start, state = kept, at.copy()
            if dropped:  # what a fresh read of this window would not see
                state.out = [f for f in state.out if f.lineno >= lines[0].lineno]
    # The state is kept one line short of the end: the last line may be an unterminated one
    # (a tqdm bar) parsed afresh next tick, which must not stop the next read resuming.
    _advance(lines, start, len(lines) - 1, state, memo)
    if memo is not None:
        memo.keep(lines[:-1], state.copy())
    _advance(lines, max(start, len(lines) - 1), len(lines), state, memo)
    out = state.out + [_close(t, None, None) for t in state.open_traces.values() if not t.closed]
    return sorted(out, key=lambda f: f.lineno)


def _advance(lines: tuple[LogLine, ...], start: int, end: int, state: _ReadState, memo: FailureMemo | None) -> None:
    """Read lines[start:end] on from `state` (which it updates)."""
    if end <= start:
        return
    maybe = {start + i for i in _candidates(lines[start:end])}
    out, open_traces, pending_chain = state.out, state.open_traces, state.pending_chain
    latest = state.latest
    for index in range(start, end):
        line = lines[index]
        body = _body(line)
        key = _stream(line)
        if TRACEBACK_HEAD.match(body.lstrip()):
            old = open_traces.pop(key, None)
            if old is not None:
                out.append(_close(old, None, None))
            latest = open_traces[key] = _Trace(key, line, [line.lineno], [], pending_chain.pop(key, []))
            continue
        trace = open_traces.get(key) or (latest if latest is not None and not latest.closed else None)
        frame = _traceback_frame(body)
        if trace is None and frame:
            # a pasted excerpt that starts inside a traceback
            latest = trace = open_traces[key] = _Trace(key, line, [], [], pending_chain.pop(key, []))
        if trace is not None:
            if frame:
                path = frame["file"]
                trace.frames.append(TraceFrame(path, int(frame["line"]), frame["func"], module_of(path)))
                trace.lines.append(line.lineno)
                continue
            if (body.startswith((" ", "\t")) or body.strip() in ("...", "…")) and not _EXC_LINE.match(body):
                trace.lines.append(line.lineno)  # source text and ^^^ carets under a frame
                continue
            exc = _EXC_LINE.match(body)
            open_traces.pop(trace.key, None)
            trace.closed = True
            if exc:
                failure = _close(trace, line, exc)
                out.append(failure)
                # a chained exception follows: remember this one as its cause
                pending_chain[trace.key] = [*trace.chained, failure.text]
                continue
            out.append(_close(trace, None, None))
        if _CHAIN.match(body):
            continue
        if out and _continues(out[-1], line, body, lines):
            out[-1] = _join(out[-1], line, body)
            continue
        m = _WHAT.match(body)
        if m and out and out[-1].kind == "terminate" and line.lineno - out[-1].lineno <= 3:
            prev = out[-1]
            out[-1] = replace(prev, message=m["msg"], text=f"{prev.text} what(): {m['msg']}",
                              lines=(*prev.lines, line.lineno), locations=_locations(m["msg"]) or prev.locations,
                              cuda=prev.cuda or cuda_error(m["msg"]), errno=prev.errno or errno_family(m["msg"]))  # fmt: skip
            continue
        single = (memo.single(line, body) if memo is not None else _single(line, body)) if index in maybe else None
        if single is not None:
            out.append(single)
    state.latest = latest


# Lines that carry on an error's message: torch's c10d errors print the NCCL result, "Last error:"
# and NCCL's own last error on the lines after the exception, then where it was raised.
def _traceback_frame(body: str) -> re.Match[str] | None:
    """A traceback's `File "x.py", line 3, in f` (faulthandler's lines, without the comma, are not)."""
    m = PYTHON_FRAME_LINE.match(body.lstrip())
    return m if m and m["comma"] and not m["kind"] else None


_CONTINUATION = re.compile(
    r"^\s*(?:nccl\w+(?:Error|Usage)\b|Last error:|Exception raised from|C\+\+ CapturedTraceback|frame #\d+)"
)


def _continues(prev: Failure, line: LogLine, body: str, lines: Sequence[LogLine]) -> bool:
    if prev.kind not in ("exception", "terminate", "nccl") or line.lineno - prev.lines[-1] != 1 or not body.strip():
        return False
    if _CONTINUATION.match(body):
        return True
    # the line after "Last error:" is NCCL's last error itself
    at = line.lineno - lines[0].lineno - 1  # the window may start past line 1
    before = lines[at] if 0 <= at < len(lines) and lines[at].lineno == line.lineno - 1 else None
    return before is not None and _body(before).strip().startswith("Last error:")


def _join(prev: Failure, line: LogLine, body: str) -> Failure:
    """The continuation's words count for the failure (its errno, CUDA error, locations)."""
    text = f"{prev.text}\n{body.strip()}"
    return replace(
        prev, text=text, lines=(*prev.lines, line.lineno), errno=prev.errno or errno_family(body),
        cuda=prev.cuda or cuda_error(body), signal=prev.signal or signal_of(body),
        locations=prev.locations + tuple(x for x in _locations(body) if x not in prev.locations),
    )  # fmt: skip


def _merge_duplicates(failures: list[Failure]) -> list[Failure]:
    """A traceback's exception line may also be logged again right after (`ERROR ... RuntimeError:
    ...`): the same text within a few lines is one failure."""
    out: list[Failure] = []
    for failure in failures:
        if out and out[-1].text == failure.text and failure.lineno - out[-1].lineno <= 3:
            continue
        out.append(failure)
    return out


def root_of(failures: Sequence[Failure]) -> Failure | None:
    """The earliest failure that is not a consequence. A failure logged at warning level (the
    engine carried on) is root only when nothing at error level failed; a timeout is a consequence
    of whatever kept the peer from answering, so it is root only when nothing else failed; a line
    that only reports another failure is root only when it is all there is. Log order is time
    order for one stream; across streams the log interleaves them as they were written."""
    passes: tuple[Callable[[Failure], bool], ...] = (
        lambda f: not f.warning and not _is_timeout(f, ()),
        lambda f: not _is_timeout(f, ()),
        lambda f: True,
    )
    for accept in passes:
        for failure in failures:
            if not failure.consequence and accept(failure):
                return failure
    return failures[0] if failures else None


def _is_timeout(failure: Failure, allowed: tuple[str, ...]) -> bool:
    """Timeouts told as exceptions (`TimeoutError`, `DistStoreError: Timed out ...`) count as timeouts."""
    if allowed:
        return False
    return failure.kind == "timeout" or bool(failure.exc_type and "Timeout" in failure.exc_type) or (
        failure.kind in ("exception", "exit") and bool(_TIMEOUT.search(failure.message or failure.text))
        and failure.errno is None and failure.cuda is None
    )


_MEMO_LINES = 100_000


class FailureMemo:
    """What one caller keeps between reads of one growing log, so a tick costs the new lines only.

    The live loop hands every tick the same log plus what was appended: reading resumes where the
    last read stopped (probe L8: 5 000 long lines cut a loaded host's watch loop to 0.15 ticks/s),
    and each line's `_single` is worked out once per line object. Both are reused only for the very
    same line objects, so a memo handed another log gives what a fresh read gives. The caller owns
    it (the watcher, one per watched server); `read_failures` without one keeps nothing."""

    def __init__(self, max_lines: int = _MEMO_LINES) -> None:
        self.max_lines = max_lines
        self._resume: tuple[tuple[LogLine, ...], _ReadState] | None = None
        self._singles: OrderedDict[int, tuple[LogLine, Failure | None]] = OrderedDict()
        self._lock = threading.Lock()  # a caller may share it between threads

    def resumed(self) -> tuple[tuple[LogLine, ...], _ReadState] | None:
        with self._lock:
            return self._resume

    def keep(self, done: tuple[LogLine, ...], state: _ReadState) -> None:
        with self._lock:
            self._resume = (done, state)

    def single(self, line: LogLine, body: str) -> Failure | None:
        """`_single`, once per line object: keyed by identity, checked by identity."""
        with self._lock:
            hit = self._singles.get(id(line))
            if hit is not None and hit[0] is line:
                return hit[1]
        result = _single(line, body)
        with self._lock:
            self._singles[id(line)] = (line, result)
            while len(self._singles) > self.max_lines:
                self._singles.popitem(last=False)
        return result


def read_failures(lines: Iterable[LogLine], memo: FailureMemo | None = None) -> tuple[Failure, ...]:
    """Every failure the log reports, in log order, each marked `root` or `consequence`. `memo`
    (the caller's, kept across its reads of one growing log) only saves work: same result without."""
    failures = _merge_duplicates(_read(tuple(lines), memo))
    root = root_of(failures)
    return tuple(replace(f, role="root" if f is root else "consequence") for f in failures)
