"""What one tick of the watch loop saw: frozen plain data that every sink reads.

    observation, verdict = watcher.tick()

The terminal view, the HTTP API, metrics, bundles (`capture.bundle_files(observation)`) and
alerts read an `Observation` and the `Verdict`, never the watcher's attributes: the loop owns its
rings and clocks, and hands out a new immutable snapshot each tick (references to immutable
values, so building one costs little).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hangwatch.model import (
    EndpointAnswer,
    Evidence,
    Finding,
    GpuSample,
    ListeningSocket,
    LogLine,
    Missing,
    PhaseEvent,
    ProcessRecord,
    ProcessStack,
)
from hangwatch.parse.logformats import formats_note

__all__ = ["Observation", "PhaseSpan", "Progress", "ServerInfo", "StackSample", "TransitionRecord"]


@dataclass(frozen=True)
class ServerInfo:
    """Who is watched: as discovered (or as `run` started it)."""

    name: str  # "sglang pid 123 on 127.0.0.1:30000"
    engine: str | None
    launcher_pid: int
    host: str | None = None
    port: int | None = None
    cmdline: str | None = None
    flags: Mapping[str, str | bool] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)  # filtered (redact.filter_env)
    log_path: str | None = None
    host_name: str | None = None


@dataclass(frozen=True)
class PhaseSpan:
    """One phase of one rank: entered `at`, left `end` (None while in it), seconds of watch time."""

    phase: str
    at: float
    end: float | None
    lineno: int

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "at": self.at, "end": self.end, "lineno": self.lineno}


@dataclass(frozen=True)
class Progress:
    since_last_progress_s: float  # seconds since anything moved
    log_quiet_s: float  # seconds since the log grew
    signals: tuple[str, ...]  # what moved in the last few seconds ("log", "io:TP0", "stack:TP1", ...)


@dataclass(frozen=True)
class StackSample:
    """One stack sample as taken: the parsed stack (numbered and timed by rings.StackRing) and
    py-spy's own JSON (what a bundle stores)."""

    stack: ProcessStack
    raw: bytes


@dataclass(frozen=True)
class TransitionRecord:
    """A change of the published verdict within this watch (the SQLite store keeps them across runs)."""

    t: float
    wall: float
    state: str
    cause: str | None
    rule: str | None
    ranks: tuple[str, ...]
    phase: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"t": round(self.t, 2), "wall": round(self.wall, 3), "state": self.state, "cause": self.cause,
                "rule": self.rule, "ranks": list(self.ranks), "phase": self.phase}


@dataclass(frozen=True)
class Observation:
    t: float  # seconds since the watch began
    wall: float  # epoch seconds of this tick
    started_wall: float  # epoch seconds the watch began
    server: ServerInfo
    procs: tuple[ProcessRecord, ...]
    phases: Mapping[str, tuple[PhaseSpan, ...]]  # rank ("main" for unprefixed lines) -> its phases in order
    phase_events: tuple[PhaseEvent, ...]  # every phase line seen, in order (what the classifier reads)
    gpus: tuple[GpuSample, ...]  # recent NVML samples, oldest first
    stacks: Mapping[str, ProcessStack]  # label -> its latest Python stack
    stack_samples: tuple[StackSample, ...]  # every kept sample (Python and native), for bundles
    stack_tree: Mapping[str, Any]  # the merged stack tree (classify.stacktree)
    ports: tuple[ListeningSocket, ...]
    ports_text: str | None
    progress: Progress
    missing: tuple[Missing, ...]
    timings: Mapping[str, float]  # source -> seconds its last read took
    log: tuple[LogLine, ...]  # the newest parsed lines handed to the classifier
    log_tail: bytes  # the raw tail of the log, for a bundle's server.log
    transitions: tuple[TransitionRecord, ...]
    wait_since: Mapping[str, float] = field(default_factory=dict)  # label -> seconds in its current stack
    endpoint: EndpointAnswer | None = None  # the engine's health endpoint, asked when no log is readable
    preflight: tuple[Finding, ...] = ()  # what `hangwatch preflight` found before this launch
    stop: str | None = None  # a stop hangwatch saw asked for (Watcher.note_stop)

    @property
    def port_listening(self) -> bool | None:
        if self.server.port is None:
            return None
        return any(s.port == self.server.port for s in self.ports)

    def evidence(self, meta: Mapping[str, Any]) -> Evidence:
        """The classifier's input: the same type a bundle reads into."""
        server = self.server
        return Evidence(
            meta=meta, engine=server.engine, log=self.log, phases=self.phase_events, cmdline=server.cmdline,
            flags=dict(server.flags), env=dict(server.env), procs=self.procs, ports=self.ports,
            ports_text=self.ports_text, gpus=self.gpus, stacks=tuple(s.stack for s in self.stack_samples),
            missing=self.missing + _formats_note(self.phase_events), observed_for_s=round(self.t, 2),
            since_last_progress_s=round(self.progress.since_last_progress_s, 2),
            progress_signals=self.progress.signals, log_quiet_s=round(self.progress.log_quiet_s, 2),
            server_port=server.port, endpoint=self.endpoint, preflight=self.preflight, stop=self.stop,
        )  # fmt: skip


def _formats_note(events: tuple[PhaseEvent, ...]) -> tuple[Missing, ...]:
    """Phases read with another release's log formats (parse/logformats.py): the verdict says which."""
    note = formats_note(events)
    return (note,) if note is not None else ()
