"""What the watch loop reads from the server: one frozen `Reading` per tick, and the `Sources` that give it.

    reading = sources.read(parts, rescan=...)   # log bytes, processes, ports, health, NVML, timings
    round_ = sources.dump(targets, native)       # one round of stacks (on the loop's worker thread)

A reading carries everything the tick saw and what each source cost, so nothing reads a source
and then an attribute it set. `LiveSources` (watch/livesources.py) reads the real machine; tests
hand recorded ones (tests/helpers/recorded_sources.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hangwatch.engines import server_roles
from hangwatch.model import EndpointAnswer, GpuInfo, ListeningSocket, LogLine, Missing, ProcessRecord, ProcessStack

__all__ = ["EVERY", "Reading", "Sources", "StackRound", "StackTarget", "merged_missing", "stack_targets", "transient"]

# the parts of a reading; a tick reads them all but the ports of a ready server (ladder.rescan_due)
EVERY = frozenset({"log", "procs", "ports", "health", "gpus"})


@dataclass(frozen=True)
class Reading:
    """One tick's reading of the cheap sources (rung 1 of the ladder); a part not read is empty."""

    log: bytes = b""  # what the log gained since the last reading
    log_bytes_seen: int = 0  # raw bytes read from the log so far (a tqdm `\r` redraw moves it)
    procs: tuple[ProcessRecord, ...] | None = None  # the server's process tree; None: not read, or unreadable
    launcher_gone: Missing | None = None  # the tree's root is gone (a crash to report): why
    ports: tuple[ListeningSocket, ...] = ()  # of the last scan (a ready server's are rescanned rarely)
    ports_text: str | None = None
    endpoint: EndpointAnswer | None = None  # the engine's health endpoint, asked only when no log is readable
    gpus: tuple[GpuInfo, ...] | None = None  # None: not read now (no NVML, or not retried yet)
    stacks_possible: bool = True  # py-spy can be run now
    missing: tuple[Missing, ...] = ()  # each source that could not be read, with its fix
    timings: Mapping[str, float] = field(default_factory=dict)  # source -> seconds its last read took


@dataclass(frozen=True)
class StackTarget:
    pid: int
    label: str


@dataclass(frozen=True)
class StackRound:
    """One round of stack dumps of several processes, as it finished on the worker thread."""

    dumps: tuple[tuple[ProcessStack, bytes], ...]  # each parsed stack with py-spy's own JSON
    missing: tuple[Missing, ...]  # a process (or py-spy itself) that could not be dumped
    native: bool = False
    took_s: float | None = None  # None: py-spy could not run at all


class Sources(Protocol):
    """What the watch loop reads; a failure is a `Missing` in the reading, never an exception."""

    root_pid: int

    @property
    def log_path(self) -> str | None: ...
    def parse_lines(self, data: bytes, start_lineno: int) -> Sequence[LogLine]: ...
    def read(self, parts: frozenset[str] = EVERY, *, rescan: bool = True) -> Reading:
        """The `parts` of one reading. `rescan=False`: the processes of the last scan read again,
        without looking for new ones (ladder)."""
        ...
    def engine_for(self, lines: Sequence[LogLine]) -> Any:
        """The engine, guessed from the log and command line when discover() could not tell; None until known."""
        ...
    def dump(self, targets: Sequence[StackTarget], native: bool) -> StackRound: ...
    def close(self) -> None: ...


def stack_targets(procs: Iterable[ProcessRecord], limit: int) -> list[StackTarget]:
    """The alive Python processes of the server, labelled by rank, else by pid (docs/bundle-format.md).
    Compilers are not Python, and "other" children (a shell, a torch compile worker pool) would
    only add noise and py-spy time."""
    alive = [p for p in procs if p.alive and p.role != "compiler"]
    known = [p for p in alive if p.role in server_roles()]  # the engines' own processes, not compilers
    chosen = known or [p for p in alive if "python" in p.cmdline.split(" ", 1)[0]]
    seen: set[str] = set()
    targets = []
    for proc in chosen[:limit]:
        label = proc.rank if proc.rank and proc.rank not in seen else str(proc.pid)
        seen.add(label)
        targets.append(StackTarget(proc.pid, label))
    return targets


def merged_missing(missing: Sequence[Missing], extra: Sequence[Missing]) -> tuple[Missing, ...]:
    """A reading's missing sources and the loop's own (the launcher gone, stacks): one per source, the loop's last."""
    return tuple({m.source: m for m in (*missing, *extra)}.values())


def transient(source: str, exc: OSError) -> Missing:
    """An OSError while reading (out of file descriptors, say) as a Missing entry: the loop goes on."""
    return Missing(source, f"cannot read now: {exc.strerror or exc}", "raise the open-file limit (LimitNOFILE=)")
