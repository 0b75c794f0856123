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
from hangwatch.watch.reading import EVERY, Reading, StackRound


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
    """Implements hangwatch.watch.reading.Sources from what the test put in."""

    engine: str | None = "sglang"
    root_pid: int = 100
    procs: list[ProcessRecord] = field(default_factory=list)
    stacks: list[ProcessStack] = field(default_factory=list)  # what the next dump returns
    gpus: tuple[GpuInfo, ...] | None = None
    ports: tuple[ListeningSocket, ...] = ()
    ports_text: str | None = None
    endpoint: Any = None
    launcher_gone: bool = False
    dumps: int = 0
    native_dumps: int = 0  # of those, rounds with native frames (rung 3: they pause the target)
    log_file: str | None = None  # a real file whose mtime is the log's age when the watch begins
    _log: bytes = b""
    _read: int = 0
    _engine: Any = None

    # what a test does between ticks

    def write(self, data: bytes) -> None:
        self._log += data

    def set_stacks(self, *stacks: ProcessStack) -> None:
        self.stacks = list(stacks)

    def burn(self, label: str, cpu_s: float) -> None:
        """The rank with this label used CPU time (it computes)."""
        self.procs = [replace(p, cpu_time_s=(p.cpu_time_s or 0.0) + cpu_s) if p.rank == label or str(p.pid) == label
                      else p for p in self.procs]

    # what a subclass may read otherwise (bench/bench_soak.py: a real file; tests/unit/watch/test_first_look.py: processes that move)

    @property
    def log_bytes_seen(self) -> int:
        return self._read

    def read_log(self) -> bytes:
        data, self._read = self._log[self._read:], len(self._log)
        return data

    def read_procs(self, rescan: bool = True) -> list[ProcessRecord]:
        return list(self.procs)

    # the Sources protocol

    @property
    def log_path(self) -> str | None:
        return self.log_file

    def parse_lines(self, data: bytes, start_lineno: int) -> Sequence[LogLine]:
        return read_log_lines(data, start_lineno)

    def read(self, parts: frozenset[str] = EVERY, *, rescan: bool = True) -> Reading:
        log = self.read_log() if "log" in parts else b""
        procs, gone = None, None
        if "procs" in parts and self.launcher_gone:
            gone = Missing("procs", "the launcher exited")
        elif "procs" in parts:
            procs = tuple(self.read_procs(rescan))
        return Reading(log=log, log_bytes_seen=self.log_bytes_seen, procs=procs, launcher_gone=gone, ports=self.ports,
                       ports_text=self.ports_text, endpoint=self.endpoint,
                       gpus=self.gpus if "gpus" in parts else None)

    def close(self) -> None:
        pass

    def engine_for(self, lines: Sequence[LogLine]) -> Any:
        from hangwatch.engines import get_engine

        if self._engine is None and self.engine is not None:
            self._engine = get_engine(self.engine)
        return self._engine

    def dump(self, targets: Sequence[Any], native: bool) -> StackRound:
        self.dumps += 1
        self.native_dumps += native
        wanted = {t.label for t in targets}
        return StackRound(tuple((replace(s, native=native), b"{}") for s in self.stacks if s.label in wanted), (), native)
