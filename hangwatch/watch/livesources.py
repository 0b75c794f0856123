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
from hangwatch.parse.logs import matched_text, read_log_lines
from hangwatch.parse.runtimelog import sniff_format
from hangwatch.sources.health import HealthProber
from hangwatch.sources.logfind import LogLocation
from hangwatch.sources.logreader import LogReader, open_log
from hangwatch.sources.logtail import LogTail
from hangwatch.sources.peers import find_peers
from hangwatch.sources.ports import read_listening
from hangwatch.sources.procs import ProcessSampler
from hangwatch.watch.reading import EVERY, Reading, StackRound, StackTarget
from hangwatch.watch.skim import TRACEBACK_LINES, phase_needles, rule_needles, skim

__all__ = ["LiveSources", "engine_version", "find_pyspy"]

_GPU_RETRY_S = 300.0  # NVML that failed to load is tried again this rarely (a driver being installed)
_PYSPY_RETRY_S = 60.0
_PEERS_RESCAN_S = 10.0  # a scan reads every process's command line: a few ms, not every tick
_PEERS_FIRST_RESCAN_S = 2.0  # while none is found (only for an --nnodes > 1 launch: else no scan)
_LOG_BYTES_PER_TICK = 4 << 20  # a flooding log is read in steps (docs/serving.md, Bounds)
# What a tick costs is the text every rule regex searches: each new line, cut to MAX_TEXT. 5 000
# lines of 4 KB in one tick took seconds on a loaded host (probe L8); 256 KiB is one logscan chunk.
_LOG_TEXT_PER_TICK = 256 << 10
# Attaching to a big log: its phase lines before the start tail are looked for by seeking, never
# by reading it all: in its first few MiB (the first start) and in the stretch before the tail.
_SEEK_HEAD = 4 << 20
_SEEK_BACK = 4 << 20
_SEEK_LINES = 2_000  # phase lines kept from each stretch (a serving log's access lines are markers)
# A burst: more unread than this at a tick is skimmed (watch/skim.py) instead of read in 256 KiB
# steps of text: in pieces, for up to _SKIM_TICK_S of a tick (the newest 256 KiB read whole); a
# backlog of more than _SKIM_BEHIND_S of skimming is skipped unread, the skip stated in `missing`
# (docs/live.md, Bursts). So a burst leaves the loop a few seconds behind at most.
_BURST_BACKLOG = 1 << 20  # 4 ticks of text: past it, a tick reads all that it may
_SKIM_PIECE = 4 << 20
_SKIM_TICK_S = 0.5
_SKIM_BEHIND_S = 2.0
_SKIM_RATE = 32 << 20  # bytes/s skimmed, until measured
# ... but the tracebacks of a skipped stretch are still found: one needle searched at C speed
_TRACEBACK = b"Traceback (most recent call last)"
_RESCUE_S = 1.0
_RESCUE_PIECE = 16 << 20
_RESCUE_BYTES = 64 << 10  # of a traceback: its first TRACEBACK_LINES lines within these


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
        # the rules a skimmed line is kept for (watch/skim.py); None: a burst is read in steps,
        # and no phase lines are looked for before a start tail
        self._rules = rules
        self._skim_needles: frozenset[str] | None = None  # made at the first burst (0.1 s)
        self.skipped_bytes = 0  # of bursts, unread (said in missing)
        self._skim_rate = float(_SKIM_RATE)  # measured while skimming: how much a tick can take
        self.config = config
        self.root_pid: int = server.launcher_pid
        self.latencies: dict[str, float] = {}
        self._missing: dict[str, Missing] = {}
        self.ports: tuple[ListeningSocket, ...] = ()
        self.ports_text: str | None = None
        self._engine_name: str | None = getattr(server, "engine", None)
        self._engine: Engine | None = None
        self._caught_up = False
        self._tail = self._open_log()
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
        """One reading of `parts`, in the order each needs the one before (health: the ports)."""
        log = self.read_log() if "log" in parts else b""
        procs, gone = self._procs(rescan) if "procs" in parts else (None, None)
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
            self.clear_missing("procs")
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

    def clear_missing(self, source: str) -> None:
        self._missing.pop(source, None)

    def missing(self) -> tuple[Missing, ...]:
        return tuple(self._missing.values())

    # ---------------------------------------------------------------- log

    @property
    def log_path(self) -> str | None:
        return self.config.log_path or getattr(self.server, "log_path", None)

    def _open_log(self) -> LogReader | None:
        location = self.log_location = self._log_location()
        if location is None:
            reason = getattr(self.server, "log_missing", None) or "no log file found: the server writes to a terminal or a pipe"
            self._missing["log"] = Missing("log", reason, "pass --log PATH, or start the server with `hangwatch run -- CMD` (it keeps a copy of the output)")
            return None
        try:
            return open_log(location, start_tail_bytes=self.config.initial_log_bytes)
        except SourceUnavailable as exc:
            self.note_missing(exc)
            return None

    def _log_location(self) -> LogLocation | None:
        """--log wins; else what discovery found (a file, a tee's file, a runtime's, the journal)."""
        if self.config.log_path:
            return LogLocation(self.config.log_path, _sniffed(self.config.log_path), via="--log")
        found = getattr(self.server, "log", None)
        if found is not None:
            return found
        path = getattr(self.server, "log_path", None)
        return LogLocation(path) if path else None

    def read_log(self) -> bytes:
        if self._tail is None:
            return b""
        with self._timed("log"):
            try:
                return self._read_available()
            except SourceUnavailable as exc:
                self.note_missing(exc)
                return b""
            except OSError as exc:  # EMFILE and the like: this tick has no log, the next one may
                self.note_missing(_transient("log", exc))
                return b""

    def _read_available(self) -> bytes:
        """What the log gained, up to a per-tick budget: LogTail reads a bounded chunk per call
        and may hand back nothing for a chunk without a line end (a sparse or binary stretch)."""
        assert self._tail is not None
        if not self._caught_up:
            return self._earlier_phase_lines() + self._read_steps()
        if self._rules is not None and isinstance(self._tail, LogTail) and self._tail.backlog() > _BURST_BACKLOG:
            if self._skim_needles is None:
                self._skim_needles = phase_needles() | rule_needles(self._rules)[0]
            return self._read_burst(self._tail, self._skim_needles)
        return self._read_steps()

    def _read_steps(self) -> bytes:
        assert self._tail is not None
        start, chunks, text = self._tail.bytes_seen, [], 0
        while True:
            before = self._tail.bytes_seen
            chunks.append(self._tail.read_new())
            if self._caught_up:  # the start tail is read whole: its text is not counted (a Python pass per line)
                text += matched_text(chunks[-1])
            if (self._tail.bytes_seen == before or self._tail.bytes_seen - start >= _LOG_BYTES_PER_TICK
                    or (text >= _LOG_TEXT_PER_TICK and self._caught_up)):
                self._caught_up = True  # the first read (attach) takes the whole start tail at once
                return b"".join(chunks)

    def _earlier_phase_lines(self) -> bytes:
        """The phase lines of a big log before its start tail, found by seeking: its first
        _SEEK_HEAD bytes and the _SEEK_BACK before the tail, skimmed for phase needles."""
        tail = self._tail
        # a start tail of 0 (`run` on an existing log: only what this run appends) wants none
        if (self._rules is None or not self.config.initial_log_bytes or not isinstance(tail, LogTail)
                or tail.start_offset <= 0):
            return b""
        end = tail.start_offset + 1  # the tail's first line starts after the first "\n" from there
        if end <= _SEEK_HEAD + _SEEK_BACK:
            stretches = [(0, end, False)]
        else:
            stretches = [(0, _SEEK_HEAD, False), (end - _SEEK_BACK, end, True)]
        found: list[bytes] = []
        needles = phase_needles()
        for offset, stop, cut_front in stretches:
            data = _whole_lines(tail.read_at(offset, stop - offset), cut_front)
            skimmed = skim(data, needles) if data else None
            if skimmed is None:
                continue  # nothing there, or lines that never repeat: the tail alone decides
            kept = skimmed.kept[-_SEEK_LINES:] if cut_front else skimmed.kept[:_SEEK_LINES]
            found.extend(kept)
        return b"".join(line + b"\n" for line in found)

    def _read_burst(self, tail: LogTail, needles: frozenset[str]) -> bytes:
        """A backlog too big to read in steps: skimmed for what a rule or phase marker could match
        (watch/skim.py) in pieces, for up to _SKIM_TICK_S of the tick, the newest text read whole.
        A backlog of more than _SKIM_BEHIND_S of skimming (at the rate measured here) is skipped
        unread, as are lines that never repeat; `missing` says how much."""
        behind = max(2 * _SKIM_PIECE, int(self._skim_rate * _SKIM_BEHIND_S))
        out, started, skipped = [], time.monotonic(), 0
        if tail.backlog() > behind:
            offset = tail.offset
            skipped = tail.skip(tail.backlog() - behind)
            out.append(_rescued_tracebacks(tail, offset, offset + skipped))
        while time.monotonic() - started < _SKIM_TICK_S:
            before = tail.bytes_seen
            piece = self._read_piece(tail)
            if tail.bytes_seen == before:
                break
            caught_up = tail.backlog() <= _LOG_TEXT_PER_TICK
            cut = piece.rfind(b"\n", 0, max(0, len(piece) - _LOG_TEXT_PER_TICK)) + 1 if caught_up else len(piece)
            t0 = time.monotonic()
            skimmed = skim(piece[:cut], needles) if cut else None
            if cut:
                spent = max(time.monotonic() - t0, 1e-3)
                self._skim_rate = 0.5 * self._skim_rate + 0.5 * cut / spent
            if cut and skimmed is None:
                skipped += cut
            out.append((skimmed.data if skimmed is not None else b"") + piece[cut:])
            if caught_up:
                break
        self.skipped_bytes += skipped
        if self.skipped_bytes:
            self._missing["log_burst"] = Missing(
                "log_burst", f"a log burst outran the reader: {self.skipped_bytes / 2**20:.0f} MiB skipped unread",
                "lines beyond the skim rate (docs/live.md, Bursts) are not read; the log file still has them")
        return b"".join(out)

    @staticmethod
    def _read_piece(tail: LogTail) -> bytes:
        start, chunks = tail.bytes_seen, []
        while tail.bytes_seen - start < _SKIM_PIECE:
            before = tail.bytes_seen
            chunks.append(tail.read_new())
            if tail.bytes_seen == before:
                break
        return b"".join(chunks)

    def close(self) -> None:
        """Stop what the log reader runs (journalctl) and the health prober's thread."""
        if self._tail is not None:
            self._tail.close()
        if self._prober is not None:
            self._prober.close()

    # ---------------------------------------------------------------- readiness without a log

    def read_health(self) -> None:
        """Ask the engine's own endpoint, only while its port is open and no log is readable."""
        port = getattr(self.server, "port", 0)
        if not port or not self._log_unreadable() or not any(s.port == port for s in self.ports):
            return
        if self._prober is None:
            from hangwatch.engines import get_engine

            name = self._engine_name
            self._prober = HealthProber(get_engine(name).health_endpoints if name else ())
        with self._timed("health"):
            self.endpoint = self._prober.poll(getattr(self.server, "host", "") or "127.0.0.1", port)

    def _log_unreadable(self) -> bool:
        return self._tail is None or "log" in self._missing

    @property
    def log_bytes_seen(self) -> int:
        return self._tail.bytes_seen if self._tail is not None else 0

    @staticmethod
    def parse_lines(data: bytes, start_lineno: int) -> Sequence[LogLine]:
        return read_log_lines(data, start_lineno)

    # ---------------------------------------------------------------- engine

    @property
    def engine_name(self) -> str | None:
        return self._engine_name

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
                self.clear_missing("ports")
            except SourceUnavailable as exc:
                self.note_missing(exc)
            except OSError as exc:
                self.note_missing(_transient("ports", exc))

    def read_gpus(self) -> tuple[GpuInfo, ...] | None:
        if time.monotonic() < self._gpu_retry_at:
            return None
        from hangwatch.sources.gpus import read_gpus

        with self._timed("gpus"):
            try:
                gpus = tuple(read_gpus(self._nvml)) if self._nvml is not None else tuple(read_gpus())
                self.clear_missing("gpus")
                return gpus
            except (SourceUnavailable, OSError) as exc:
                self.note_missing(exc if isinstance(exc, SourceUnavailable) else _transient("gpus", exc))
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
            error = _transient("stacks", exc)
            return StackRound((), (Missing(error.source, error.reason, error.hint),), native)
        if dumps:  # py-spy runs: the loop's own record of the rounds says what is missing now
            self._missing.pop("stacks", None)
        return StackRound(tuple(dumps), tuple(missing), native, round(time.monotonic() - started, 4))

    # ---------------------------------------------------------------- timing

    def _timed(self, name: str) -> _Timer:
        return _Timer(self.latencies, name)


def _rescued_tracebacks(tail: LogTail, start: int, end: int) -> bytes:
    """The tracebacks in a skipped stretch (a crash is what a burst must not hide): one C-level
    search for their first line, in pieces, for at most _RESCUE_S; each kept with the lines after
    it (its frames and exception, as watch/skim.py keeps them)."""
    out, began, offset = [], time.monotonic(), start
    while offset < end and time.monotonic() - began < _RESCUE_S:
        piece = tail.read_at(offset, min(_RESCUE_PIECE, end - offset) + len(_TRACEBACK))
        found = piece.find(_TRACEBACK)
        while found >= 0 and offset + found < end:
            line_start = piece.rfind(b"\n", 0, found) + 1
            if line_start == 0 and offset > start:
                line_start = found  # its line began in the previous piece: from the marker on
            block = tail.read_at(offset + line_start, _RESCUE_BYTES)
            lines = block.split(b"\n")[:TRACEBACK_LINES]
            out.append(b"\n".join(lines[:-1]) + b"\n" if len(lines) > 1 else b"")
            found = piece.find(_TRACEBACK, found + 1)
        offset += _RESCUE_PIECE
    return b"".join(out)


def _whole_lines(data: bytes, cut_front: bool) -> bytes:
    """`data` from its first line start (when it begins mid-file) to its last line end."""
    if cut_front:
        data = data[data.find(b"\n") + 1 :]
    return data[: data.rfind(b"\n") + 1]


def _sniffed(path: str) -> str:
    """--log names a file; a runtime's (CRI, Docker json-file) is decoded like a found one."""
    try:
        with open(path, "rb") as fh:
            return sniff_format(fh.read(4096))
    except OSError:
        return "plain"  # not there yet, or unreadable: the reader says so


class _Timer:
    def __init__(self, sink: dict[str, float], name: str):
        self.sink, self.name = sink, name

    def __enter__(self) -> None:
        self.started = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        self.sink[self.name] = round(time.monotonic() - self.started, 4)


def _transient(source: str, exc: OSError) -> SourceUnavailable:
    """An OSError while reading (out of file descriptors, say) as a Missing entry: the loop goes on."""
    return SourceUnavailable(source, f"cannot read now: {exc.strerror or exc}", "raise the open-file limit (LimitNOFILE=)")


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
