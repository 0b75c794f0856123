"""What every engine shares: phase markers over log lines, process roles, rank positions, and the
`Engine` base class that declares everything hangwatch knows about one server.

An engine is data (a table of `Marker`s, log prefixes, flag names and a few regexes) plus two
small hooks, so adding a server version means adding table rows, and adding a server means one
file plus one line in `hangwatch.engines.ENGINES` (or a `register(engine)` call).

Phase of an event = the startup phase in which the line is *printed*. A fact printed elsewhere
(SGLang's default attention backend is chosen by the launcher while it resolves arguments; vLLM
names its backend while building the model inside weight loading) keeps that phase and carries
the fact in `detail`, so a rank's position is never pulled ahead of where it really is.
"""

from __future__ import annotations

import abc
import bisect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from hangwatch.engines.endpoints import HealthEndpoint
from hangwatch.model import LogLine, Phase, PhaseEvent

MAIN = "main"  # rank key for events with no rank (launcher, unprefixed single-rank logs)

# tqdm tail, for both SGLang's `n% Completed | n/total [` bar format and tqdm's default
# `n%|███   | n/total [`; optional because a bar can be cut mid-write.
TQDM_TAIL = r"(?::\s+\d+%(?: Completed \| |\|[^|]*\| )(?P<n>\d+)/(?P<total>\d+) \[)?"


# ---------------------------------------------------------------- log prefixes

# What a log prefix says about its line: (rank, process name, timestamp, message, writer pid).
ParsedPrefix = tuple["str | None", "str | None", "str | None", str, "int | None"]

# uvicorn's own level prefix: `INFO:     Uvicorn running on ...` (also inside an engine's prefix).
_UVICORN = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL|TRACE):\s+(?P<msg>.*)", re.S)


def strip_uvicorn(msg: str) -> str:
    if msg[:1] in "DIWECT" and ":" in msg[:10]:
        m = _UVICORN.match(msg)
        if m:
            return m["msg"]
    return msg


@dataclass(frozen=True)
class LogPrefix:
    """One prefix an engine writes before its messages (`[ts TP3] msg`, `(Worker_TP1 pid=9) msg`).

    `starts` holds the characters such a line can start with: the parser is only tried on those,
    which keeps the per-line cost of a multi-MiB log at one dict lookup for most lines.
    """

    starts: str
    parse: Callable[[str], ParsedPrefix | None]


@dataclass(frozen=True)
class Marker:
    """One kind of log line that says where a rank is."""

    phase: Phase
    needle: str  # a literal the message must contain: a cheap filter before the regex
    pattern: re.Pattern[str]  # searched in the message; named groups become `detail`
    end: bool = False
    fixed: Mapping[str, str] = field(default_factory=dict)  # detail added to every match

    def event(self, line: LogLine, message: str) -> PhaseEvent | None:
        if self.needle not in message:
            return None
        m = self.pattern.search(message)
        if m is None:
            return None
        groups = {k: v for k, v in m.groupdict().items() if v is not None}
        progress = _progress(groups)
        detail = {**self.fixed, **groups}
        return PhaseEvent(self.phase, line.rank, line.lineno, line.text, self.end, progress, detail)


def marker(phase: Phase, needle: str, regex: str, *, end: bool = False, **fixed: str) -> Marker:
    return Marker(phase, needle, re.compile(regex), end, fixed)


def bar(phase: Phase, needle: str, desc_regex: str, **fixed: str) -> Marker:
    """A tqdm bar whose description matches `desc_regex`; (n, total) becomes `progress`."""
    return Marker(phase, needle, re.compile(f"(?P<desc>{desc_regex}){TQDM_TAIL}"), False, fixed)


def _progress(groups: dict[str, str]) -> tuple[int, int] | None:
    n, total = groups.pop("n", None), groups.pop("total", None)
    if n is None or total is None:
        return None
    return int(n), int(total)


# Lines any engine's log can hold: NCCL, gloo, FlashInfer JIT, weight shard bars, uvicorn.
COMMON_MARKERS: tuple[Marker, ...] = (
    marker(Phase.DIST_INIT, "using nccl==", r"(?:sglang|vLLM) is using nccl==(?P<nccl_version>\S+)"),
    marker(Phase.DIST_INIT, "NCCL version", r"NCCL version (?P<nccl_version>\d[\w.+\-]*)"),
    marker(Phase.DIST_INIT, "[Gloo] Rank", r"\[Gloo\] Rank (?P<gloo_rank>\d+) is connected to (?P<peers>\d+) peer"),
    bar(
        Phase.WEIGHT_LOAD,
        "oading",
        r"Multi-thread loading (?:pt checkpoint )?shards|Loading (?:safetensors|pt|np_cache) checkpoint shards"
        r"|Loading safetensors using [\w ]+?",
    ),
    marker(Phase.ATTN_BACKEND, "Finished loading JIT ops", r"Finished loading JIT ops: (?P<jit>\S+)", end=True),
    marker(Phase.ATTN_BACKEND, "Loading JIT ops", r"Loading JIT ops: (?P<jit>\S+)"),
    marker(Phase.ATTN_BACKEND, "FlashInfer autotune completed", r"FlashInfer autotune completed", end=True),
    marker(Phase.ATTN_BACKEND, "Running FlashInfer autotune", r"Running FlashInfer autotune"),
    marker(Phase.HTTP_UP, "Started server process", r"^Started server process \[(?P<server_pid>\d+)\]"),
    marker(Phase.HTTP_UP, "Waiting for application startup", r"^Waiting for application startup\."),
    marker(Phase.HTTP_UP, "Application startup complete", r"^Application startup complete\.", step="app_startup"),
    marker(
        Phase.HTTP_UP,
        "Uvicorn running on",
        r"Uvicorn running on (?:(?P<scheme>https?)://)?(?P<host>\[[^\]]+\]|[^\s:]+):(?P<port>\d+)",
        end=True,
    ),
)


_TP0 = re.compile(r"(?:^|_)TP0(?:_|$)")


def _is_rank0(rank: str) -> bool:
    return "TP" not in rank or _TP0.search(rank) is not None


def _attribute_bars(events: list[PhaseEvent]) -> list[PhaseEvent]:
    """A tqdm bar has no log prefix. SGLang and vLLM draw weight and graph bars only on (TP) rank 0,
    so an unprefixed bar belongs to the latest rank-0 event of the same phase, when there is one."""
    last_rank0: dict[Phase, str] = {}
    out = []
    for event in events:
        if event.rank is not None and _is_rank0(event.rank):
            last_rank0[event.phase] = event.rank
        elif event.rank is None and "desc" in event.detail and event.phase in last_rank0:
            event = replace(event, rank=last_rank0[event.phase])
        out.append(event)
    return out


# ---------------------------------------------------------------- process roles

_SPAWN_CHILD = re.compile(r"from multiprocessing\.(?:spawn import spawn_main|resource_tracker import main)")
_COMPILERS = frozenset(
    {"nvcc", "ninja", "cicc", "ptxas", "gcc", "g++", "cc", "c++", "cc1", "cc1plus", "clang", "clang++",
     "ld", "fatbinary", "nvlink", "cudafe++", "nvdisasm"}
)  # fmt: skip
_INDUCTOR_WORKER = re.compile(r"torch[/.]_inductor[/.]compile_worker")


def clean_cmdline(cmdline: str) -> str:
    """/proc/PID/cmdline joins argv with NULs and setproctitle pads with them."""
    return cmdline.replace("\x00", " ").strip()


COMMON_ROLES = ("compiler", "other")  # roles of any engine's tree: JIT compilers, anything else


def common_role(cmdline: str) -> tuple[str, str | None] | None:
    """Roles that do not depend on the engine: compilers, and spawned children not yet titled.

    A `spawn_main` child is a scheduler (or worker) that has not set its title yet, or the
    resource tracker; only its parent tells which, so it is "other" here and discovery decides.
    """
    if _SPAWN_CHILD.search(cmdline):
        return "other", None
    argv0 = cmdline.split(" ", 1)[0].rsplit("/", 1)[-1]
    if argv0 in _COMPILERS or _INDUCTOR_WORKER.search(cmdline):
        return "compiler", None
    return None


# ---------------------------------------------------------------- the engine


class Engine(abc.ABC):
    """Knowledge of one server. Subclasses fill the tables and the role hook.

    Nothing outside `hangwatch.engines` names a server: it asks the registry for these fields.
    """

    name: str = ""  # as rules and bundles write it: "sglang"
    title: str = ""  # as users write it: "SGLang"
    # code: import packages (a frame under one is engine code, and so is a checkout of it)
    packages: frozenset[str] = frozenset()
    # sub-paths under the package in a source checkout (`/ws/sglang/python/sglang/srt/...`), a regex
    checkout: str = ""
    # sub-packages and file names only this engine has: a py-spy path relative to a sys.path
    # entry (`managers/scheduler.py`, even `scheduler.py`) is still engine code
    source_dirs: frozenset[str] = frozenset()
    source_files: frozenset[str] = frozenset()
    libraries: frozenset[str] = frozenset()  # packages shipped with it (its kernels): library code
    distributions: tuple[str, ...] = ()  # its pip distributions (preflight reads their versions)
    # processes: every role its titles give (`process_role`), and those of its rank processes
    # (schedulers, workers: stacked, compared across ranks, their death is a crash)
    roles: tuple[str, ...] = ()
    rank_roles: frozenset[str] = frozenset()
    # launch: the argv entry after which the engine's own arguments start (module or script), the
    # executable of a `NAME serve MODEL` CLI, and how a user starts it (for messages)
    program: str = ""
    serve_command: str = ""
    launch_hint: str = ""
    # flags: each long spelling -> the short key rules use (`tensor-parallel-size` -> `tp`)
    flag_aliases: Mapping[str, str] = {}
    port_flag: str = "port"
    default_port: int = 0
    # a multi-node launch: the number of nodes, this node's rank, and the flags that together name
    # the rendezvous every node's launcher is given (SGLang's `--dist-init-addr`; vLLM's
    # `--master-addr` + `--master-port`). Discovery matches peers on this host by them (sources/peers.py).
    nnodes_flag: str = "nnodes"
    node_rank_flag: str = "node-rank"
    rendezvous_flags: tuple[str, ...] = ()
    env_prefixes: tuple[str, ...] = ()  # its environment variables (kept in bundles, redacted)
    # (environment variable, default under $HOME or None) of its own JIT/compile caches
    cache_dirs: tuple[tuple[str, str | None], ...] = ()
    cpu_bind_env: str = ""  # variable binding each rank to CPU lists (`0-3|4-7`), if it has one
    health_endpoints: tuple[HealthEndpoint, ...] = ()  # asked in order when no log is readable
    # log: prefixes it writes, phase markers (tried before COMMON_MARKERS), and message
    # patterns only it prints (to guess the engine of a log)
    log_prefixes: tuple[LogPrefix, ...] = ()
    markers: tuple[Marker, ...] = ()
    log_signals: tuple[re.Pattern[str], ...] = ()

    def rendezvous(self, flags: Mapping[str, str | bool]) -> tuple[str, ...] | None:
        """(nnodes, rendezvous address parts) when this is one node of a multi-node launch, else None."""
        nnodes = flags.get(self.nnodes_flag)
        parts = tuple(flags.get(name) for name in self.rendezvous_flags)
        if not isinstance(nnodes, str) or not nnodes.isdigit() or int(nnodes) < 2:
            return None
        if not parts or not all(isinstance(part, str) and part for part in parts):
            return None
        return (nnodes, *(str(part) for part in parts))

    def node_rank(self, flags: Mapping[str, str | bool]) -> str:
        value = flags.get(self.node_rank_flag)
        return value if isinstance(value, str) and value else "0"

    def server_port(self, flags: Mapping[str, str | bool]) -> int:
        """The HTTP port: the port flag when it is a number, else this engine's default."""
        return flag_port(flags, self.port_flag) or self.default_port

    def phase_events(self, lines: Iterable[LogLine], before: Iterable[PhaseEvent] = ()) -> tuple[PhaseEvent, ...]:
        """One event at most per line: the first marker that matches (specific before common).

        `before`: the events of the lines already read, when a live tail feeds the log in pieces;
        context across lines (vLLM's readiness) must not be lost between two reads.
        """
        table = self.markers + COMMON_MARKERS
        events = []
        for line in _marker_candidates(list(lines), {mk.needle for mk in table}):
            message = line.message or line.text
            for mk in table:
                event = mk.event(line, message)
                if event is not None:
                    events.append(event)
                    break
        return self._finish(_attribute_bars(events), tuple(before))

    def _finish(self, events: list[PhaseEvent], before: tuple[PhaseEvent, ...]) -> tuple[PhaseEvent, ...]:
        """Hook for rules that need context across lines (vLLM's readiness)."""
        return tuple(events)

    def process_role(self, cmdline: str) -> tuple[str, str | None] | None:
        """(role, rank) for a process of this engine, None for a process that is not one."""
        cmdline = clean_cmdline(cmdline)
        return self._role(cmdline) or common_role(cmdline)

    @abc.abstractmethod
    def _role(self, cmdline: str) -> tuple[str, str | None] | None:
        """The engine's own titles and launcher command lines; None for anything else."""

    def owns_cmdline(self, cmdline: str) -> bool:
        """True when the command line is one of this engine's own processes (not a compiler)."""
        role = self._role(clean_cmdline(cmdline))
        return role is not None

    def log_score(self, lines: Sequence[LogLine]) -> int:
        return sum(1 for line in lines for pattern in self.log_signals if pattern.search(line.text))

    def __repr__(self) -> str:
        return f"<Engine {self.name}>"


def _marker_candidates(lines: list[LogLine], needles: set[str]) -> list[LogLine]:
    """The lines whose message holds some marker's needle, in log order. A marker matches only a
    message holding its needle, so the others cannot be an event; finding them with one C-level
    `str.find` per needle over the joined messages instead of ~70 Python calls per line is what
    makes the first read of a multi-MiB log take tens of ms, not a second (issue 25)."""
    if len(lines) < 64:
        return lines
    found = holding_needles([line.message or line.text for line in lines], needles)
    return [lines[i] for i in sorted(found)]


def holding_needles(texts: Sequence[str], needles: Iterable[str]) -> set[int]:
    """The indices of `texts` that hold some needle (none holding a newline), found with one C-level
    `str.find` per needle over the joined texts rather than a Python loop per text and needle."""
    joined = "\n".join(texts)  # a needle holds no newline: a match never spans two texts
    starts, offset = [], 0
    for text in texts:
        starts.append(offset)
        offset += len(text) + 1
    found: set[int] = set()
    for needle in needles:
        pos = joined.find(needle)
        while pos >= 0:
            index = bisect.bisect_right(starts, pos) - 1
            found.add(index)
            pos = joined.find(needle, starts[index + 1]) if index + 1 < len(starts) else -1
    return found


# ---------------------------------------------------------------- positions


def rank_key(rank: str | None) -> str:
    return rank if rank is not None else MAIN


def rank_positions(events: Iterable[PhaseEvent]) -> dict[str, tuple[Phase, bool]]:
    """rank -> (phase of its latest event, whether that event ended the phase).

    Latest in log order, not the furthest phase: vLLM compiles (attn_backend) before it sizes
    the KV cache, and a JIT during SGLang's graph capture should show as the JIT. READY is
    sticky: access-log and other lines after it do not move a rank back.
    """
    out: dict[str, tuple[Phase, bool]] = {}
    for event in events:
        key = rank_key(event.rank)
        if out.get(key, (None,))[0] is Phase.READY:
            continue
        out[key] = (event.phase, event.end)
    return out


def ready_seen(events: Iterable[PhaseEvent]) -> bool:
    return any(event.phase is Phase.READY for event in events)


def flag_port(flags: Mapping[str, str | bool], flag: str = "port") -> int | None:
    """`--port N` when N is a number; None for `--port` without a value, a name, or no flag."""
    value = flags.get(flag)
    return int(value) if isinstance(value, str) and value.strip().isdigit() else None
