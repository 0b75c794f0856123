"""Evidence and verdict types: plain frozen data, no I/O.

Sources and the bundle reader produce these; `classify` consumes them. Field shapes follow
docs/bundle-format.md so that a live snapshot and a bundle on disk are the same thing.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any


class State(str, enum.Enum):
    STARTING = "starting"
    PROGRESSING = "progressing"
    STALLED = "stalled"
    READY = "ready"
    CRASHED = "crashed"
    UNKNOWN = "unknown"  # a bundle that holds no evidence: not enough to say whether it hung
    STOPPED = "stopped"  # a stop someone asked for ended it (Ctrl-C, SIGTERM, a clean shutdown): no crash


class Phase(str, enum.Enum):
    """Startup phases in the order a healthy server passes them."""

    LAUNCH = "launch"  # processes spawned, nothing engine-specific logged yet
    DIST_INIT = "dist_init"
    WEIGHT_LOAD = "weight_load"
    KV_CACHE = "kv_cache"
    ATTN_BACKEND = "attn_backend"  # attention backend init, kernel JIT, torch.compile
    CUDA_GRAPH = "cuda_graph"
    HTTP_UP = "http_up"  # port bound / uvicorn up
    WARMUP = "warmup"  # the server's own warm-up request
    READY = "ready"

    @property
    def order(self) -> int:
        return list(Phase).index(self)


class Origin(str, enum.Enum):
    """Where a stack frame's code lives."""

    ENGINE = "engine"  # sglang / vllm
    TORCH = "torch"
    LIBRARY = "library"  # any other installed package or the stdlib
    USER = "user"  # a file outside site-packages and the stdlib
    NATIVE = "native"  # C/C++/CUDA frame


@dataclass(frozen=True)
class Source:
    """Where a fact came from: a file of the bundle (or live source) and a position in it."""

    file: str  # "server.log", "stacks/TP0.json", "gpus.json", "procs.json", "cmdline.txt", ...
    line: int | None = None  # 1-based line in `file`
    detail: str | None = None  # e.g. "rank TP0", "t=12.0s", "GPU 0"

    def __str__(self) -> str:
        out = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{out} ({self.detail})" if self.detail else out


# ---------------------------------------------------------------- log


@dataclass(frozen=True)
class LogLine:
    lineno: int  # 1-based line number in the log
    text: str  # cleaned: ANSI stripped, the last \r-segment of a tqdm line, decoded with replacement
    rank: str | None = None  # "TP0", "DP0_TP3", None for the launcher / unprefixed lines
    process: str | None = None  # vLLM process name ("EngineCore", "Worker_TP1", ...)
    timestamp: str | None = None  # as written in the log ("2026-11-29 23:43:26", "08-14 10:01:27")
    message: str = ""  # the text after the engine's prefix
    updates: int = 1  # tqdm: how many \r-separated updates the raw line held
    pid: int | None = None  # writer's pid where the prefix names it (vLLM `(X pid=N)`, NCCL `host:pid:tid`)


@dataclass(frozen=True)
class PhaseEvent:
    """A log line that marks entering (or finishing) a startup phase on one rank."""

    phase: Phase
    rank: str | None
    lineno: int
    text: str
    end: bool = False  # True for "... end." lines: the phase finished
    progress: tuple[int, int] | None = None  # (n, total) from a tqdm bar
    detail: Mapping[str, str] = field(default_factory=dict)  # parsed fields (backend, nccl version, ...)


# ---------------------------------------------------------------- processes, ports, GPUs


@dataclass(frozen=True)
class ProcessRecord:
    pid: int
    ppid: int | None
    cmdline: str
    role: str  # launcher, scheduler, detokenizer, tokenizer, dp_controller, engine_core, worker, compiler, other
    rank: str | None = None
    state: str | None = None  # ps-style single letter: R, S, D, Z, T
    cpu_percent: float | None = None
    rss_mib: float | None = None
    alive: bool = True
    exit_code: int | None = None  # negative: killed by that signal
    cpu_time_s: float | None = None
    num_threads: int | None = None
    # kernel functions its threads sleep in (/proc/PID/task/*/wchan): readable without ptrace
    wchan: tuple[str, ...] = ()
    # rchar + read_bytes from /proc/PID/io: a monotonic "this process is reading" counter for
    # progress detection (weights via read() count in rchar, via mmap page faults in read_bytes)
    io_read_bytes: int | None = None
    create_time: float | None = None  # epoch seconds; with pid, identifies a process across samples
    # epoch seconds when the exit was first seen (live) or recorded; orders deaths: the first is the root
    exit_time: float | None = None
    # a rank of another node of the same launch on this host (sources/peers.py): sampled beside
    # the watched tree, not part of it (its exit is not the watched server's crash)
    peer: bool = False

    @property
    def exited(self) -> bool:
        """It runs no more: gone, or a zombie its parent has not reaped."""
        return not self.alive or self.state == "Z"


@dataclass(frozen=True)
class ListeningSocket:
    host: str
    port: int
    pid: int | None = None
    process: str | None = None


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_mib: float | None = None


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str | None = None
    uuid: str | None = None
    compute_capability: str | None = None  # "9.0", "12.0"
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    utilization_pct: float | None = None
    processes: tuple[GpuProcess, ...] = ()


@dataclass(frozen=True)
class GpuSample:
    t: float  # seconds since the observation started
    gpus: tuple[GpuInfo, ...]


# ---------------------------------------------------------------- stacks


@dataclass(frozen=True)
class Frame:
    function: str  # bare name: "capture_one_shape", "ncclCommInitRankConfig"
    qualname: str  # "CudaGraphRunner.capture" where known, else the function
    file: str | None = None  # relative to its package root: "sglang/srt/managers/scheduler.py"
    line: int | None = None
    origin: Origin = Origin.LIBRARY
    library: str | None = None  # top package ("sglang", "torch", "flashinfer") or .so name

    @property
    def display(self) -> str:
        name = self.qualname if len(self.qualname) <= 120 else self.qualname[:100] + "…" + self.qualname[-15:]
        where = self.file or self.library or "?"
        return f"{name} ({where}:{self.line})" if self.line else f"{name} ({where})"


@dataclass(frozen=True)
class ThreadStack:
    name: str | None
    thread_id: int | None
    frames: tuple[Frame, ...]  # innermost first
    active: bool | None = None
    # the fatal signal a crash handler or debugger reported for this thread (`SIGBUS`), if any
    signal: str | None = None

    @property
    def top(self) -> Frame | None:
        return self.frames[0] if self.frames else None

    @property
    def readable_top(self) -> Frame | None:
        """The frame a person reads first: the innermost Python frame, else a native one with a symbol;
        a bare address (`0x7f79a92a3f16`) only when there is nothing else."""
        python = (f for f in self.frames if f.origin is not Origin.NATIVE)
        named = (f for f in self.frames if not f.function.lower().startswith(("0x", "?")) and f.function)
        return next(python, None) or next(named, None) or self.top


@dataclass(frozen=True)
class ProcessStack:
    """One dump of one process: all its threads at one moment."""

    label: str  # rank label ("TP0") or pid as text
    pid: int | None
    threads: tuple[ThreadStack, ...]
    source: Source
    sample: int = 0  # N-th sample of this process
    native: bool = False
    t: float | None = None

    @property
    def main(self) -> ThreadStack | None:
        for thread in self.threads:
            if thread.name in ("MainThread", None) or thread.thread_id == self.pid:
                return thread
        return self.threads[0] if self.threads else None


# ---------------------------------------------------------------- evidence


@dataclass(frozen=True)
class Missing:
    """Evidence that could not be collected, and how to get it."""

    source: str  # "stacks", "gpus", "ports", "log", ...
    reason: str
    hint: str | None = None


@dataclass(frozen=True)
class HostFact:
    """One fact about the host a launch will run on (preflight): `host.NAME` atoms compare `value`.

    A yes/no fact exists only when it holds (`weights_fifo` names the FIFO); a fact that could
    not be read is absent and its name is in `Evidence.host_unknown` with the reason.
    """

    value: Any  # bool, number or text
    text: str  # what a person reads: "/dev/shm is a 64 MiB tmpfs"
    source: str  # where it was read: "statvfs(/dev/shm)", "/proc/net/tcp"


@dataclass(frozen=True)
class Finding:
    """A preflight check that fired: a cause predicted before the launch."""

    check: str  # the preflight rule's id
    cause: str  # a cause id
    severity: str  # critical (the start will hang or fail) / warning (likely to) / info
    title: str
    evidence: tuple[Fact, ...]
    remedy: str
    message: str | None = None
    references: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "cause": self.cause, "severity": self.severity, "title": self.title,
            "evidence": [fact.to_dict() for fact in self.evidence], "remedy": self.remedy,
            "check": self.check, "message": self.message, "references": list(self.references),
        }  # fmt: skip


@dataclass(frozen=True)
class EndpointAnswer:
    """The engine's own health/model endpoint, asked when no log is readable (sources/health.py)."""

    url: str  # "http://127.0.0.1:30000/ready"
    status: int | None  # HTTP status; None: no answer (refused, timeout)
    ready: bool  # a real answer from an endpoint that proves the start finished
    detail: str = ""  # "503", "timed out after 0.5 s", "model_path=/models/x"


@dataclass(frozen=True)
class Evidence:
    """Everything known about one server start at one moment (live) or from one bundle."""

    meta: Mapping[str, Any] = field(default_factory=dict)
    engine: str | None = None  # "sglang", "vllm", None when unknown
    log: tuple[LogLine, ...] = ()
    phases: tuple[PhaseEvent, ...] = ()
    cmdline: str | None = None
    flags: Mapping[str, str | bool] = field(default_factory=dict)  # "--tp" -> "8", "--disable-cuda-graph" -> True
    env: Mapping[str, str] = field(default_factory=dict)
    procs: tuple[ProcessRecord, ...] = ()
    ports: tuple[ListeningSocket, ...] = ()
    ports_text: str | None = None
    gpus: tuple[GpuSample, ...] = ()
    stacks: tuple[ProcessStack, ...] = ()
    dmesg: tuple[str, ...] = ()
    missing: tuple[Missing, ...] = ()
    observed_for_s: float | None = None
    since_last_progress_s: float | None = None  # None: unknown (e.g. a bundle pasted from a report)
    progress_signals: tuple[str, ...] = ()  # what moved recently ("log", "gpu_memory", "compiler", ...)
    log_quiet_s: float | None = None  # seconds since the log last grew; None when unknown
    server_port: int | None = None
    host: Mapping[str, HostFact] = field(default_factory=dict)  # preflight: facts about the host
    host_unknown: Mapping[str, str] = field(default_factory=dict)  # host fact -> why it could not be read
    preflight: tuple[Finding, ...] = ()  # what the preflight before this launch found
    endpoint: EndpointAnswer | None = None  # the latest answer of the engine's health endpoint
    stop: str | None = None  # a stop hangwatch saw asked for ("hangwatch run got SIGINT ..."); None: none seen


# ---------------------------------------------------------------- verdict


@dataclass(frozen=True)
class Fact:
    """One piece of evidence that decided a verdict, with where it came from."""

    text: str
    source: Source
    # "root": the line that started the failure; "consequence": a line that followed it; None: not a failure
    role: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "source": str(self.source), "role": self.role}


@dataclass(frozen=True)
class RunnerUp:
    cause: str
    rule: str
    confidence: float


@dataclass(frozen=True)
class Candidate:
    """One cause of the differential: how likely, what speaks for and against it, and the one
    check that tells it from the next candidate."""

    cause: str
    confidence: float
    rule: str | None
    evidence_for: tuple[str, ...] = ()
    evidence_against: tuple[str, ...] = ()
    check: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "cause": self.cause, "confidence": round(self.confidence, 2), "rule": self.rule,
            "evidence_for": list(self.evidence_for), "evidence_against": list(self.evidence_against),
            "check": self.check,
        }  # fmt: skip


@dataclass(frozen=True)
class Refinement:
    """The cause of a stall episode changed, to one held with more confidence."""

    at: float  # epoch seconds
    cause: str
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return {"at": round(self.at, 3), "cause": self.cause, "confidence": round(self.confidence, 2)}


@dataclass(frozen=True)
class StallEpisode:
    """One stall, from the first stalled verdict to real progress or a crash (docs/live.md)."""

    id: str
    started_at: float  # epoch seconds
    state: str  # "stalled" | "crashed" | "resolved" | "stopped"
    cause: str | None
    confidence: float = 0.0
    refined: tuple[Refinement, ...] = ()
    ended_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "started_at": round(self.started_at, 3), "state": self.state, "cause": self.cause,
                "refined": [r.to_dict() for r in self.refined]}


@dataclass(frozen=True)
class Blocker:
    """The final blocker: the rank or process at the end of the wait-for chain."""

    rank: str | None  # "TP1", or None for a process without a rank
    pid: int | None
    waits_on: str  # "a FIFO (open for read, no writer)", "the GPU", "TP3 (exited)", ...
    frame: str | None  # the frame it waits in, "func (file.py:123)"
    state: str | None  # the process state letter (S, D, R, Z) or "exited"
    for_s: float | None  # how long it has been in this wait
    chain: tuple[str, ...] = ()  # who waits for whom, first waiter to the blocker ("TP0", "TP1")
    definite: bool = False  # a cycle, or a wait on a dead or absent rank: it cannot end by itself

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "pid": self.pid, "waits_on": self.waits_on, "frame": self.frame,
                "state": self.state, "for_s": None if self.for_s is None else round(self.for_s, 1),
                "chain": list(self.chain), "definite": self.definite}


@dataclass(frozen=True)
class Eta:
    """When the server should be ready, from past starts of the same setup."""

    ready_in_s: float | None  # None once a budget has passed or while stalled: no promise then
    from_starts: int
    budget_s: float | None  # the learned budget of the current phase: past it, with nothing moving, stalled
    overdue_s: float | None = None  # past the usual ready time (or the phase past its budget) by this much
    usual_s: float | None = None  # the median launch-to-ready time of those starts

    def to_dict(self) -> dict[str, Any]:
        return {"ready_in_s": None if self.ready_in_s is None else round(self.ready_in_s, 1),
                "from_starts": self.from_starts,
                "budget_s": None if self.budget_s is None else round(self.budget_s, 1),
                "overdue_s": None if self.overdue_s is None else round(self.overdue_s, 1),
                "usual_s": None if self.usual_s is None else round(self.usual_s, 1)}


@dataclass(frozen=True)
class Verdict:
    state: State
    cause: str | None  # a docs/causes.md id; None while healthy
    confidence: float  # 0..1
    rule: str | None = None
    title: str | None = None
    message: str | None = None
    phase: Phase | None = None  # the phase of the rank furthest behind
    phases: Mapping[str, Phase] = field(default_factory=dict)  # rank ("main" for unprefixed) -> phase
    evidence: tuple[Fact, ...] = ()
    remedy: str | None = None
    ranks: tuple[str, ...] = ()  # culprit ranks
    runners_up: tuple[RunnerUp, ...] = ()
    missing: tuple[Missing, ...] = ()
    since_s: float | None = None  # seconds since the last progress (when the stall began)
    engine: str | None = None
    references: tuple[str, ...] = ()
    candidates: tuple[Candidate, ...] = ()  # the differential: up to 3 causes, best first
    # live only (docs/live.md): the stall episode this verdict belongs to, the final blocker, the ETA
    episode: StallEpisode | None = None
    blocker: Blocker | None = None
    eta: Eta | None = None

    @property
    def confidence_label(self) -> str:
        if self.confidence >= 0.75:
            return "high"
        return "medium" if self.confidence >= 0.45 else "low"

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "cause": self.cause,
            "confidence": round(self.confidence, 2),
            "confidence_label": self.confidence_label,
            "rule": self.rule,
            "title": self.title,
            "message": self.message,
            "phase": self.phase.value if self.phase else None,
            "phases": {rank: phase.value for rank, phase in self.phases.items()},
            "evidence": [fact.to_dict() for fact in self.evidence],
            "remedy": self.remedy,
            "ranks": list(self.ranks),
            "runners_up": [
                {"cause": r.cause, "rule": r.rule, "confidence": round(r.confidence, 2)} for r in self.runners_up
            ],
            "missing": [{"source": m.source, "reason": m.reason, "hint": m.hint} for m in self.missing],
            "since_s": None if self.since_s is None else round(self.since_s, 1),
            "engine": self.engine,
            "references": list(self.references),
            "candidates": [candidate.to_dict() for candidate in self.candidates],
            "episode": self.episode.to_dict() if self.episode else None,
            "blocker": self.blocker.to_dict() if self.blocker else None,
            "eta": self.eta.to_dict() if self.eta else None,
        }


# ---------------------------------------------------------------- ranks

# Parallelism rank tags as the engines print them in titles and log prefixes, in canonical order.
_RANK_ORDER = {tag: i for i, tag in enumerate(("DP", "PP", "PCP", "ATTN_CP", "MOE_DP", "TP", "DCP", "EP"))}
_RANK_TAG = re.compile(r"(?<![A-Za-z])(ATTN_CP|MOE_DP|PCP|DCP|DP|PP|TP|EP)(\d+)")


def normalise_rank(tags: Iterable[str]) -> str | None:
    """`["TP3", "DP0"]` -> `"DP0_TP3"`: canonical order, joined by `_`; None when empty."""
    parsed = []
    for tag in tags:
        m = _RANK_TAG.fullmatch(tag)
        if m:
            parsed.append((_RANK_ORDER[m[1]], tag))
    if not parsed:
        return None
    return "_".join(tag for _, tag in sorted(parsed))


@lru_cache(maxsize=1024)
def rank_from_name(name: str) -> str | None:
    """Rank tags inside a process name or title: `Worker_DP0_TP3` -> `"DP0_TP3"`, `EngineCore` -> None."""
    return normalise_rank(m.group(0) for m in _RANK_TAG.finditer(name))
