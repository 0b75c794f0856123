"""Recorded sources for in-process `Watcher.tick()` tests: the `Sources` protocol, fed by a script.

A test appends what "happened" before each tick (log bytes, the process table, the stacks the next
dump will return); the watcher reads it through the same calls it makes on a real machine. Log
bytes and stacks are recordings of the CPU lab (tests/fixtures/live/); no clock is read here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

from hangwatch.errors import SourceUnavailable
from hangwatch.model import (
    Frame,
    GpuInfo,
    ListeningSocket,
    LogLine,
    Missing,
    Origin,
    ProcessRecord,
    ProcessStack,
    Source,
    ThreadStack,
)
from hangwatch.parse.logs import read_log_lines


def server(engine: str = "sglang", flags: dict[str, Any] | None = None, port: int = 30000) -> Any:
    return SimpleNamespace(engine=engine, launcher_pid=100, cmdline="python -m sglang.launch_server --model-path m",
                           flags=flags or {"model-path": "m"}, host="127.0.0.1", port=port, log_path=None, env={})


def proc(pid: int, role: str, rank: str | None = None, *, cpu: float = 1.0, state: str = "S", alive: bool = True,
         wchan: tuple[str, ...] = (), ppid: int = 100, exit_code: int | None = None) -> ProcessRecord:
    return ProcessRecord(pid=pid, ppid=ppid, cmdline=f"sglang::{role}", role=role, rank=rank, state=state,
                         cpu_time_s=cpu, rss_mib=500.0, io_read_bytes=0, alive=alive, wchan=wchan,
                         exit_code=exit_code, create_time=1000.0 + pid)


def frame(qualname: str, file: str, line: int, origin: Origin = Origin.ENGINE) -> Frame:
    return Frame(function=qualname.rsplit(".", 1)[-1], qualname=qualname, file=file, line=line, origin=origin)


def stack(label: str, pid: int, *frames: Frame, active: bool = False, threads: Sequence[ThreadStack] = ()) -> ProcessStack:
    """A stack whose main thread has `frames` (innermost first)."""
    main = ThreadStack("MainThread", pid, tuple(frames), active)
    return ProcessStack(label, pid, (main, *threads), Source(f"stacks/{label}.json", detail=label))


@dataclass
class RecordedSources:
    """Implements hangwatch.watch.gather.Sources from what the test put in."""

    engine: str | None = "sglang"
    root_pid: int = 100
    procs: list[ProcessRecord] = field(default_factory=list)
    stacks: list[ProcessStack] = field(default_factory=list)  # what the next dump returns
    gpus: tuple[GpuInfo, ...] | None = None
    ports: tuple[ListeningSocket, ...] = ()
    ports_text: str | None = None
    engine_changed: bool = False
    endpoint: Any = None
    latencies: dict[str, float] = field(default_factory=dict)
    launcher_gone: bool = False
    dumps: int = 0
    native_dumps: int = 0  # of those, rounds with native frames (rung 3: they pause the target)
    log_file: str | None = None  # a real file whose mtime is the log's age when the watch begins
    _log: bytes = b""
    _read: int = 0
    _engine: Any = None
    _missing: dict[str, Missing] = field(default_factory=dict)

    # what a test does between ticks

    def write(self, data: bytes) -> None:
        self._log += data

    def set_stacks(self, *stacks: ProcessStack) -> None:
        self.stacks = list(stacks)

    def burn(self, label: str, cpu_s: float) -> None:
        """The rank with this label used CPU time (it computes)."""
        self.procs = [replace(p, cpu_time_s=(p.cpu_time_s or 0.0) + cpu_s) if p.rank == label or str(p.pid) == label
                      else p for p in self.procs]

    # the Sources protocol

    @property
    def engine_name(self) -> str | None:
        return self.engine

    @property
    def log_path(self) -> str | None:
        return self.log_file

    @property
    def log_bytes_seen(self) -> int:
        return self._read

    @property
    def stacks_possible(self) -> bool:
        return True

    def parse_lines(self, data: bytes, start_lineno: int) -> Sequence[LogLine]:
        return read_log_lines(data, start_lineno)

    def read_log(self) -> bytes:
        data, self._read = self._log[self._read:], len(self._log)
        return data

    def read_procs(self, rescan: bool = True) -> list[ProcessRecord]:
        if self.launcher_gone:
            raise SourceUnavailable("procs", "the launcher exited")
        return list(self.procs)

    def read_ports(self) -> None:
        pass

    def read_health(self) -> None:
        pass

    def close(self) -> None:
        pass

    def read_gpus(self) -> tuple[GpuInfo, ...] | None:
        return self.gpus

    def engine_for(self, lines: Sequence[LogLine]) -> Any:
        from hangwatch.engines import get_engine

        self.engine_changed = self._engine is None and self.engine is not None
        if self.engine_changed:
            self._engine = get_engine(self.engine)
        return self._engine

    def dump(self, targets: Sequence[Any], native: bool) -> tuple[list[tuple[ProcessStack, bytes]], list[Missing]]:
        self.dumps += 1
        self.native_dumps += native
        wanted = {t.label for t in targets}
        return [(replace(s, native=native), b"{}") for s in self.stacks if s.label in wanted], []

    def set_stack_missing(self, missing: Sequence[Missing], *, any_ok: bool) -> None:
        pass

    def note_missing(self, exc: SourceUnavailable) -> None:
        self._missing[exc.source] = Missing(exc.source, exc.reason, exc.hint)

    def clear_missing(self, source: str) -> None:
        self._missing.pop(source, None)

    def missing(self) -> tuple[Missing, ...]:
        return tuple(self._missing.values())
