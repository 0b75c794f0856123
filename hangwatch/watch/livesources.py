"""The live sources as the watch loop reads them: one `Reading` a tick, timed, each failure a `Missing`.

A source that cannot run (no NVML, no py-spy, ptrace refused, no `ss` and no /proc/net) costs
one `Missing` entry with the fix, and the loop carries on with the rest. Sources that cannot start
working later (NVML absent, py-spy absent) are not retried every tick.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Sequence
from typing import Any

from hangwatch.engines import Engine, get_engine, guess_engine
from hangwatch.errors import SourceUnavailable
from hangwatch.model import EndpointAnswer, GpuInfo, ListeningSocket, LogLine, Missing, ProcessRecord
from hangwatch.parse.logs import read_log_lines
from hangwatch.sources.health import HealthProber
from hangwatch.sources.peers import find_peers
from hangwatch.sources.ports import read_listening
from hangwatch.sources.procs import ProcessSampler
from hangwatch.watch.logsource import LogSource
from hangwatch.watch.reading import EVERY, Reading, StackRound, StackTarget, transient

__all__ = ["EngineReleases", "LiveSources", "engine_version", "find_pyspy"]

_GPU_RETRY_S = 300.0  # NVML that failed to load is tried again this rarely (a driver being installed)
_PYSPY_RETRY_S = 60.0
_PEERS_RESCAN_S = 10.0  # a scan reads every process's command line: a few ms, not every tick
_PEERS_FIRST_RESCAN_S = 2.0  # while none is found (only for an --nnodes > 1 launch: else no scan)


def find_pyspy() -> str:
    """$HANGWATCH_PYSPY, py-spy on PATH, else the one installed beside this Python (a venv not on PATH)."""
    chosen = os.environ.get("HANGWATCH_PYSPY")
    if chosen:
        return chosen
    found = shutil.which("py-spy")
    if found:
        return found
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return beside if os.access(beside, os.X_OK) else "py-spy"


class LiveSources:
    """Log tail, processes, ports, GPUs and stack dumps of one server, with latencies and `Missing`s."""

    def __init__(self, server: Any, config: Any, *, rules: Sequence[Any] | None = None):
        self.server = server
        self.config = config
        self.root_pid: int = server.launcher_pid
        self.latencies: dict[str, float] = {}
        self._missing: dict[str, Missing] = {}
        self.ports: tuple[ListeningSocket, ...] = ()
        self.ports_text: str | None = None
        self._engine_name: str | None = getattr(server, "engine", None)
        self._engine: Engine | None = None
        self._log = LogSource(server, config, rules, self._missing)
        self.endpoint: EndpointAnswer | None = None
        self._prober: HealthProber | None = None
        self._gpu_retry_at = 0.0 if config.gpus else float("inf")
        self._nvml = config.nvml
        self._pyspy_retry_at = 0.0
        self._check_pyspy()
        self._sampler = ProcessSampler(proc_root=config.proc_root)
        self.peers: tuple[int, ...] = ()
        self._peers_at = float("-inf")

    def read(self, parts: frozenset[str] = EVERY, *, rescan: bool = True) -> Reading:
        """One reading of `parts`, in the order each needs the one before: the processes before the
        log (a rank's last words are written before it exits, so an exit seen here has them in the log
        read after it; the other way round a crash could be read without its traceback), the ports
        before health."""
        procs, gone = self._procs(rescan) if "procs" in parts else (None, None)
        log = self.read_log() if "log" in parts else b""
        if "ports" in parts:
            self.read_ports()
        if "health" in parts:
            self.read_health()
        gpus = self.read_gpus() if "gpus" in parts else None
        return Reading(log=log, log_bytes_seen=self.log_bytes_seen, procs=procs, launcher_gone=gone, ports=self.ports,
                       ports_text=self.ports_text, endpoint=self.endpoint, gpus=gpus,
                       stacks_possible=self.stacks_possible, missing=self.missing(), timings=dict(self.latencies))

    def _procs(self, rescan: bool) -> tuple[tuple[ProcessRecord, ...] | None, Missing | None]:
        try:
            records = tuple(self.read_procs(rescan=rescan))
            self._missing.pop("procs", None)
            return records, None
        except SourceUnavailable as exc:  # the launcher is gone: the loop keeps what it saw, marked exited
            return None, Missing(exc.source, exc.reason, exc.hint)
        except OSError as exc:  # out of file descriptors (EMFILE) and the like: transient, the server is not gone
            self.note_missing(SourceUnavailable("procs", f"cannot read /proc now: {exc.strerror or exc}",
                                                "raise the open-file limit (LimitNOFILE=)"))
            return None, None

    def read_procs(self, rescan: bool = True) -> list[ProcessRecord]:
        """The server's process tree; SourceUnavailable once its root is gone."""
        with self._timed("procs"):
            return self._sampler.sample(self.root_pid, self._current_peers(), rescan=rescan)

    def _current_peers(self) -> tuple[int, ...]:
        """Other node ranks' launchers on this host (sources/peers.py), looked for again every
        _PEERS_RESCAN_S: a node started after attach joins, one that exited leaves."""
        now = time.monotonic()
        # none found yet: look again sooner, a node launched beside ours may have been a few ms
        # behind the first scan, and a rank it starts can die within seconds (lab rank-killed)
        if now - self._peers_at >= (_PEERS_RESCAN_S if self.peers else _PEERS_FIRST_RESCAN_S):
            self._peers_at = now
            self.peers = find_peers(self.root_pid, self._engine_name, getattr(self.server, "cmdline", "") or "",
                                    proc_root=self.config.proc_root)
        return self.peers

    def _check_pyspy(self) -> None:
        """Say at once, not after the first dump, that stacks cannot be taken."""
        if shutil.which(find_pyspy()) is None:
            self._missing["stacks"] = Missing("stacks", f"py-spy not found ({find_pyspy()})", "pip install py-spy")
            self._pyspy_retry_at = time.monotonic() + _PYSPY_RETRY_S

    # ---------------------------------------------------------------- missing

    def note_missing(self, exc: SourceUnavailable) -> None:
        self._missing[exc.source] = Missing(exc.source, exc.reason, exc.hint)

    def missing(self) -> tuple[Missing, ...]:
        return tuple(self._missing.values())

    # ---------------------------------------------------------------- log

    @property
    def log_path(self) -> str | None:
        return self._log.path

    def read_log(self) -> bytes:
        if not self._log.opened:
            return b""
        with self._timed("log"):
            return self._log.read()

    def close(self) -> None:
        """Stop what the log reader runs (journalctl) and the health prober's thread."""
        self._log.close()
        if self._prober is not None:
            self._prober.close()

    # ---------------------------------------------------------------- readiness without a log

    def read_health(self) -> None:
        """Ask the engine's own endpoint, only while its port is open and no log is readable."""
        port = getattr(self.server, "port", 0)
        if not port or not self._log.unreadable() or not any(s.port == port for s in self.ports):
            return
        if self._prober is None:
            from hangwatch.engines import get_engine

            name = self._engine_name
            self._prober = HealthProber(get_engine(name).health_endpoints if name else ())
        with self._timed("health"):
            self.endpoint = self._prober.poll(getattr(self.server, "host", "") or "127.0.0.1", port)

    @property
    def log_bytes_seen(self) -> int:
        return self._log.bytes_seen

    @staticmethod
    def parse_lines(data: bytes, start_lineno: int) -> Sequence[LogLine]:
        return read_log_lines(data, start_lineno)

    # ---------------------------------------------------------------- engine

    def engine_for(self, lines: Sequence[LogLine]) -> Engine | None:
        """The engine, guessed from the log and command line when discover() could not tell."""
        if self._engine is None and self._engine_name is None:
            self._engine_name = guess_engine(list(lines)[-2000:], getattr(self.server, "cmdline", "") or "")
        if self._engine is None and self._engine_name is not None:
            self._engine = get_engine(self._engine_name)
        return self._engine

    # ---------------------------------------------------------------- ports, GPUs

    def read_ports(self) -> None:
        with self._timed("ports"):
            try:
                sockets, self.ports_text = read_listening(ss=self.config.ss, proc_root=self.config.proc_root)
                self.ports = tuple(sockets)
                self._missing.pop("ports", None)
            except SourceUnavailable as exc:
                self.note_missing(exc)
            except OSError as exc:
                self._missing["ports"] = transient("ports", exc)

    def read_gpus(self) -> tuple[GpuInfo, ...] | None:
        if time.monotonic() < self._gpu_retry_at:
            return None
        from hangwatch.sources.gpus import read_gpus

        with self._timed("gpus"):
            try:
                gpus = tuple(read_gpus(self._nvml)) if self._nvml is not None else tuple(read_gpus())
                self._missing.pop("gpus", None)
                return gpus
            except SourceUnavailable as exc:
                self.note_missing(exc)
            except OSError as exc:
                self._missing["gpus"] = transient("gpus", exc)
            self._gpu_retry_at = time.monotonic() + _GPU_RETRY_S
            return None

    # ---------------------------------------------------------------- stacks

    @property
    def stacks_possible(self) -> bool:
        return time.monotonic() >= self._pyspy_retry_at

    def dump(self, targets: Sequence[StackTarget], native: bool) -> StackRound:
        """One round of stacks of `targets` in parallel (runs on the loop's worker thread)."""
        from hangwatch.sources.pyspy import dump_many

        started = time.monotonic()
        try:
            dumps, missing = dump_many([(t.pid, t.label) for t in targets], native=native,
                                       timeout_s=self.config.stack_timeout_s, pyspy=find_pyspy())
        except SourceUnavailable as exc:  # py-spy absent: nothing to dump with
            self._pyspy_retry_at = time.monotonic() + _PYSPY_RETRY_S
            return StackRound((), (Missing(exc.source, exc.reason, exc.hint),), native)
        except OSError as exc:  # cannot start py-spy now (EMFILE, EAGAIN): try again later
            self._pyspy_retry_at = time.monotonic() + _PYSPY_RETRY_S
            return StackRound((), (transient("stacks", exc),), native)
        if dumps:  # py-spy runs: the loop's own record of the rounds says what is missing now
            self._missing.pop("stacks", None)
        return StackRound(tuple(dumps), tuple(missing), native, round(time.monotonic() - started, 4))

    # ---------------------------------------------------------------- timing

    def _timed(self, name: str) -> _Timer:
        return _Timer(self.latencies, name)


class _Timer:
    def __init__(self, sink: dict[str, float], name: str):
        self.sink, self.name = sink, name

    def __enter__(self) -> None:
        self.started = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        self.sink[self.name] = round(time.monotonic() - self.started, 4)


class EngineReleases:
    """`engine_version` for one watched launch, looked up once per engine: the learned budgets'
    setup key and the log formats that read the phases use the same release."""

    def __init__(self, cmdline: str | None) -> None:
        self._cmdline = cmdline
        self._found: dict[str, str] = {}

    def __call__(self, engine: str) -> str:
        if engine not in self._found:
            self._found[engine] = engine_version(engine, self._cmdline)
        return self._found[engine]


def engine_version(engine: str | None, cmdline: str | None) -> str:
    """The engine's installed version beside the launcher's Python (its dist-info folder name),
    "unknown" when the command does not start with a Python path or the folder is not found."""
    import glob

    if not engine or not cmdline:
        return "unknown"
    exe = cmdline.split(" ", 1)[0]
    if not os.path.isabs(exe):
        exe = shutil.which(exe) or exe
    prefix = os.path.dirname(os.path.dirname(exe))
    for name in (engine, engine.replace("-", "_")):
        found = sorted(glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages", f"{name}-*.dist-info")))
        if found:
            return os.path.basename(found[-1])[len(name) + 1:].rsplit(".dist-info", 1)[0]
    return "unknown"
