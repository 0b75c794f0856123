"""The process table of one server: the root pid and all its descendants, via psutil.

    read_procs(root_pid)                      one snapshot (cpu_percent is None: no previous sample)
    ProcessSampler().sample(root_pid)         repeated snapshots with cpu_percent and exited processes

A field that cannot be read (psutil.AccessDenied, a file that vanished) is None; only a root pid
that does not exist raises SourceUnavailable. psutil errors stop in this module.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import psutil

from hangwatch.engines import engines
from hangwatch.errors import SourceUnavailable
from hangwatch.model import ProcessRecord
from hangwatch.redact import redact_cmdline

T = TypeVar("T")

__all__ = ["ProcessSampler", "process_role", "read_io_bytes", "read_process", "read_procs"]

_STATE_LETTERS = {
    psutil.STATUS_RUNNING: "R",
    psutil.STATUS_SLEEPING: "S",
    psutil.STATUS_DISK_SLEEP: "D",
    psutil.STATUS_ZOMBIE: "Z",
    psutil.STATUS_STOPPED: "T",
    psutil.STATUS_TRACING_STOP: "t",
    psutil.STATUS_IDLE: "I",
    psutil.STATUS_DEAD: "X",
}
_FIELD_ERRORS = (psutil.Error, OSError, ValueError)
_PROCFS_LOCK = threading.Lock()
_MAX_DEAD = 32  # exited processes a sampler keeps reporting (a dead scheduler must stay visible)
# A sample without a rescan (a ready server's steady ticks: watch/ladder.py) reads each process's
# per-thread files (task/*/wchan, task/*/io: two opens per thread, and a serving rank has a hundred
# threads or more: most of a sample's cost on a real server) only this often, keeping the last in between.
THREADS_EVERY_S = 10.0


def process_role(cmdline: str) -> tuple[str, str | None]:
    """(role, rank) from a command line, asking every engine: its own titles and launcher, and the
    roles common to all (JIT compilers nvcc/ninja/cicc/ptxas/gcc/cc1plus → "compiler"); else "other"."""
    for engine in engines():
        found = engine.process_role(cmdline)
        if found is not None and found[0] != "other":
            return found
    return "other", None


def read_procs(root_pid: int, *, proc_root: str = "/proc") -> list[ProcessRecord]:
    """One snapshot of `root_pid` and its descendants, root first; cpu_percent is None."""
    return ProcessSampler(proc_root=proc_root).sample(root_pid)


@dataclass
class _Seen:
    record: ProcessRecord
    cpu_time_s: float | None
    at: float  # time.monotonic() of the sample
    threads_at: float = 0.0  # time.monotonic() its threads' files (wchan, io) were last read


class ProcessSampler:
    """Samples a process tree repeatedly; keeps a per-process cache for CPU% and exits.

    A process seen before and gone now stays in the result as alive=False, with its exit code
    when it can be known (our own child, or a zombie whose parent has not reaped it yet).
    """

    def __init__(self, *, proc_root: str = "/proc", max_dead: int = _MAX_DEAD):
        self.proc_root = proc_root
        self.max_dead = max_dead
        self._seen: dict[tuple[int, float | None], _Seen] = {}
        self._dead: OrderedDict[tuple[int, float | None], ProcessRecord] = OrderedDict()
        self._forks: set[tuple[int, float | None]] = set()  # helpers forked by a rank (see _demote_forks)
        self._tree_of: dict[tuple[int, tuple[int, ...]], tuple[list[psutil.Process], list[psutil.Process]]] = {}

    def sample(self, root_pid: int, peers: Sequence[int] = (), *, rescan: bool = True) -> list[ProcessRecord]:
        """`peers`: launchers of the same launch's other node ranks on this host (sources/peers.py);
        their descendants (the ranks) join the sample, the peer launchers themselves do not, so
        the watched server keeps one launcher. A peer that is gone adds nothing.

        `rescan=False` reads the processes of the last scan again without looking for new ones:
        finding children reads the stat file of every process on the host (most of a sample's
        cost); a known process gone, or a different root or peers, scans anyway."""
        with _procfs(self.proc_root):
            cached = self._tree_of.get((root_pid, tuple(peers))) if not rescan else None
            if cached is not None and all(_field(proc.is_running) for proc in cached[0] + cached[1]):
                procs, peer_procs = cached
            else:
                procs = _tree(root_pid)
                known = {proc.pid for proc in procs}
                peer_procs = [proc for proc in _descendants(peers) if proc.pid not in known]
                self._tree_of = {(root_pid, tuple(peers)): (procs, peer_procs)}
            from_peers = {proc.pid for proc in peer_procs}
            now = time.monotonic()
            current = {key: self._record(proc, key, now, proc.pid in from_peers, rescan) for key, proc in _keyed(procs + peer_procs, self.proc_root)}
            self._demote_forks(current)
            self._remember_dead(set(current))
            self._forks &= set(current) | set(self._dead)
        self._seen = current
        return [seen.record for seen in current.values()] + list(self._dead.values())

    def _record(self, proc: psutil.Process, key: tuple[int, float | None], now: float, peer: bool, rescan: bool = True) -> _Seen:
        previous = self._seen.get(key)
        threads = rescan or previous is None or now - previous.threads_at >= THREADS_EVERY_S
        record = _read_process(proc, key[1], self.proc_root, threads)
        if peer:
            record = replace(record, peer=True)
        if previous is not None:
            record = keep_title(previous.record, record)
            if not threads and record.alive:
                record = replace(record, wchan=previous.record.wchan, io_read_bytes=previous.record.io_read_bytes)
        percent = _cpu_percent(previous, record.cpu_time_s, now)
        if percent is not None:
            record = replace(record, cpu_percent=percent)
        return _Seen(record, record.cpu_time_s, now, now if threads else previous.threads_at if previous else now)

    def _demote_forks(self, current: dict[tuple[int, float | None], _Seen]) -> None:
        """A rank's short-lived children are not ranks, nor a launcher's the launcher (_launcher_fork).
        A process forked without exec (a helper, a compile worker, `subprocess` before its exec)
        carries its parent's title, so by its command line it is that very rank; when it exits it
        would be a "dead" rank (dead_rank 0.9) while the rank lives on. Whoever has a parent of the
        same role (a rank's role: not a launcher) is the parent's helper: role "other", no rank, and
        it stays so for its life (by pid and start time)."""
        by_pid = {seen.record.pid: seen.record for seen in current.values()}
        for key, seen in current.items():
            record = seen.record
            parent = by_pid.get(record.ppid) if record.ppid is not None else None
            # by role alone: a helper first seen exiting shows only its comm (`[sglang::schedul]`),
            # which names the role but no longer the rank; no engine starts a rank from a rank
            forked = parent is not None and record.role not in ("other", "compiler", "launcher") and parent.role == record.role
            if forked:
                self._forks.add(key)
            if key in self._forks and record.role != "other":
                seen.record = replace(record, role="other", rank=None)
            elif _launcher_fork(record, parent):
                seen.record = replace(record, role="other")

    def _remember_dead(self, alive_keys: set[tuple[int, float | None]]) -> None:
        for key, seen in self._seen.items():
            if key in alive_keys or key in self._dead or seen.record.role == "compiler":
                continue  # compilers come and go by the hundred during a JIT; only live ones matter
            if _still_running(*key, self.proc_root):
                continue  # it left the tree (re-parented to init when its parent died), not exited
            self._dead[key] = _as_exited(seen.record)
        while len(self._dead) > self.max_dead:
            self._dead.popitem(last=False)
        for key in alive_keys:
            self._dead.pop(key, None)


def keep_title(before: ProcessRecord, now: ProcessRecord) -> ProcessRecord:
    """The same process's record, with the title it had while its argv could be read.

    An exiting process drops its memory before it turns zombie; from then on /proc shows only its
    comm, cut to 15 characters (`[sglang::schedul]`), and the rank in its title is gone. A rank
    sampled in that window, or as a zombie, keeps the title it died with."""
    argv_gone = not now.alive or _shown_by_comm(now)
    if not argv_gone or _shown_by_comm(before):
        return now
    return replace(now, cmdline=before.cmdline, role=before.role, rank=before.rank)


def _shown_by_comm(record: ProcessRecord) -> bool:
    return record.cmdline.startswith("[")  # as _cmdline writes a process without argv


def _keyed(procs: list[psutil.Process], proc_root: str) -> Iterator[tuple[tuple[int, float | None], psutil.Process]]:
    for proc in procs:
        yield (proc.pid, start_time(proc.pid, proc_root=proc_root)), proc


def _still_running(pid: int, create_time: float | None, proc_root: str) -> bool:
    try:
        return (create_time is not None and start_time(pid, proc_root=proc_root) == create_time
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)  # fmt: skip
    except psutil.Error:
        return False


def _launcher_fork(record: ProcessRecord, parent: ProcessRecord | None) -> bool:
    """A launcher's child between its fork and its exec (vLLM runs `python -m
    vllm.model_executor.models.registry` at start) shows the launcher's very command line; sampled
    then and exiting, it read as "launcher exited": a false crash. Not for its life, unlike a rank's
    helper: a launcher's child becomes a rank (a forked EngineCore, once titled) or a shell's child
    the real launcher, whose command line differs from its parent's."""
    return (parent is not None and record.role == "launcher" and parent.role == "launcher"
            and bool(record.cmdline) and record.cmdline == parent.cmdline)


def start_time(pid: int, *, proc_root: str = "/proc") -> float | None:
    """When `pid` started, in epoch seconds, the same value for the same process at every read.

    psutil's create_time() adds the boot time /proc/stat shows *now* to the start in clock ticks;
    where the clock is stepped (a VM resumed from a snapshot, NTP stepping) that boot time moves,
    every process seems to start anew, and a sampler keyed by it reported every live rank as
    exited (crashed dead_rank on a healthy start). The ticks never change; the boot time is read
    once per hangwatch process."""
    ticks = _start_ticks(pid, proc_root)
    return None if ticks is None else round(_boot_time() + ticks / _CLOCK_TICKS, 2)


def _start_ticks(pid: int, proc_root: str) -> int | None:
    try:
        with open(f"{proc_root}/{pid}/stat", "rb") as fh:
            stat = fh.read()
        # field 22, counted after the command name, which may itself hold spaces and ')'
        return int(stat[stat.rindex(b")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@functools.cache
def _boot_time() -> float:
    return float(psutil.boot_time())


def _cpu_percent(previous: _Seen | None, cpu_time_s: float | None, now: float) -> float | None:
    if previous is None or previous.cpu_time_s is None or cpu_time_s is None or now <= previous.at:
        return None
    return round(max(0.0, cpu_time_s - previous.cpu_time_s) / (now - previous.at) * 100.0, 1)


@contextlib.contextmanager
def _procfs(proc_root: str) -> Iterator[None]:
    """psutil reads a module-level PROCFS_PATH; switch it only for a non-default root (a host
    /proc mounted at /host/proc in a DaemonSet), under a lock so threads do not mix roots."""
    if proc_root == psutil.PROCFS_PATH:
        yield
        return
    with _PROCFS_LOCK:
        saved, psutil.PROCFS_PATH = psutil.PROCFS_PATH, proc_root
        try:
            yield
        finally:
            psutil.PROCFS_PATH = saved


def _tree(root_pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(root_pid)
    except psutil.NoSuchProcess as exc:
        raise SourceUnavailable("procs", f"no process with pid {root_pid}", "is the server still running?") from exc
    except psutil.Error as exc:
        raise SourceUnavailable("procs", f"cannot read pid {root_pid}: {exc}", "run hangwatch as the server's user or root") from exc
    try:
        children = root.children(recursive=True)
    except psutil.Error:
        children = []  # the root exited while we walked; report it alone
    return [root, *children]


def _descendants(pids: Sequence[int]) -> list[psutil.Process]:
    found: list[psutil.Process] = []
    for pid in pids:
        try:
            found += psutil.Process(pid).children(recursive=True)
        except psutil.Error:
            continue  # the peer exited or is not ours to read: the watched tree still stands
    return found


def read_process(proc: psutil.Process, *, proc_root: str = "/proc", threads: bool = True) -> ProcessRecord:
    """One process record; each field that cannot be read is None. `threads=False`: without the
    per-thread files (wchan, io): the caller keeps its last ones (ProcessSampler, THREADS_EVERY_S)."""
    return _read_process(proc, start_time(proc.pid, proc_root=proc_root), proc_root, threads)


def _read_process(proc: psutil.Process, started: float | None, proc_root: str, threads: bool) -> ProcessRecord:
    """read_process, with the start time the sampler already read for its key."""
    with proc.oneshot():
        cmdline = _cmdline(proc)
        role, rank = process_role(cmdline)
        state = _state(proc)
        alive = state not in ("Z", "X") if state is not None else _field(proc.is_running) is True
        times = _field(proc.cpu_times)
        memory = _field(proc.memory_info)
        return ProcessRecord(
            pid=proc.pid,
            ppid=_field(proc.ppid),
            cmdline=cmdline,
            role=role,
            rank=rank,
            state=state,
            rss_mib=None if memory is None else round(memory.rss / 2**20, 1),
            alive=alive,
            exit_code=None if alive else _exit_code(proc.pid, state, proc_root),
            cpu_time_s=None if times is None else round(times.user + times.system, 2),
            num_threads=_field(proc.num_threads),
            io_read_bytes=read_io_bytes(proc.pid, proc_root=proc_root) if threads else None,
            create_time=started,
            wchan=read_wchan(proc.pid, proc_root=proc_root) if alive and threads else (),
        )


def _field(getter: Callable[[], T]) -> T | None:
    try:
        return getter()
    except _FIELD_ERRORS:
        return None


def _cmdline(proc: psutil.Process) -> str:
    argv = _field(proc.cmdline)
    # setproctitle pads the title with NULs; psutil turns the padding into empty arguments
    while argv and not argv[-1]:
        argv.pop()
    if argv:
        return redact_cmdline(shlex.join(argv))  # redacted when read: a record's cmdline ends up in bundles
    name = _field(proc.name)
    return f"[{name}]" if name else ""  # a kernel thread or a zombie, shown as ps does


def _state(proc: psutil.Process) -> str | None:
    status = _field(proc.status)
    return None if status is None else _STATE_LETTERS.get(status, "?")


def read_io_bytes(pid: int, *, proc_root: str = "/proc") -> int | None:
    """rchar + read_bytes of the process's own live threads (/proc/PID/task/*/io); None when
    unreadable (another user, no CONFIG_TASK_IO). Not /proc/PID/io: that one also adds the reads
    of children it reaped, and an engine that runs `py-spy dump` on itself every few seconds
    (SGLang's soft watchdog) would read as loading while it waits (docs/live.md)."""
    try:
        tasks = os.listdir(f"{proc_root}/{pid}/task")
    except OSError:
        tasks = []
    counts = [n for n in (_io_file(f"{proc_root}/{pid}/task/{tid}/io") for tid in tasks) if n is not None]
    return sum(counts) if counts else _io_file(f"{proc_root}/{pid}/io")


def _io_file(path: str) -> int | None:
    try:
        with open(path, "rb") as fh:
            text = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    try:
        return int(fields["rchar"]) + int(fields["read_bytes"])
    except (KeyError, ValueError):
        return None


def _exit_code(pid: int, state: str | None, proc_root: str) -> int | None:
    code = _stat_exit_code(pid, proc_root) if state == "Z" else None
    return code if code is not None else _child_exit_code(pid)


MAX_WCHAN_THREADS = 256


def read_wchan(pid: int, *, proc_root: str = "/proc") -> tuple[str, ...]:
    """The distinct kernel wait channels of a process's threads (`pipe_read`, `wait_for_partner`,
    `nfs_wait_bit_killable`, ...), sorted; () when unreadable. Costs one small read per thread."""
    try:
        tids = os.listdir(f"{proc_root}/{pid}/task")[:MAX_WCHAN_THREADS]
    except OSError:
        return ()
    found: set[str] = set()
    for tid in tids:
        try:
            with open(f"{proc_root}/{pid}/task/{tid}/wchan", "rb") as fh:
                name = fh.read(128).decode("ascii", "replace").strip()
        except OSError:
            continue
        if name and name != "0":
            found.add(name)
    return tuple(sorted(found))


def stat_fields(pid: int, proc_root: str = "/proc") -> list[str] | None:
    """/proc/PID/stat after the comm field (state first); None when unreadable."""
    try:
        with open(f"{proc_root}/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("utf-8", "replace")
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()  # the comm field may hold spaces and parentheses


def parent_pid(pid: int, proc_root: str = "/proc") -> int | None:
    """The pid's parent from /proc/PID/stat; None when it is gone or unreadable."""
    fields = stat_fields(pid, proc_root)
    try:
        return int(fields[1]) if fields else None
    except (IndexError, ValueError):
        return None


def _stat_exit_code(pid: int, proc_root: str) -> int | None:
    """Exit status of a zombie from /proc/PID/stat field 52 (Linux >= 3.5), as waitpid reports it."""
    fields = stat_fields(pid, proc_root)
    if fields is None or len(fields) < 50:
        return None
    return _decode_wait_status(int(fields[49]))


def _decode_wait_status(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _as_exited(record: ProcessRecord) -> ProcessRecord:
    code = record.exit_code if record.exit_code is not None else _child_exit_code(record.pid)
    return replace(record, alive=False, state=None, cpu_percent=None, exit_code=code)


def _child_exit_code(pid: int) -> int | None:
    """Exit code of our own child without reaping it (WNOWAIT): `hangwatch run` owns the Popen
    and must still be able to wait() for it. None for a process that is not our child."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except (ChildProcessError, OSError):
        return None
    if info is None:
        return None
    if info.si_code == os.CLD_EXITED:
        return info.si_status
    return -info.si_status  # CLD_KILLED / CLD_DUMPED: the signal number
