"""The host a launch will run on, read for the preflight: CPUs, cgroup limits, /dev/shm, mounts,
the weights and cache paths, lock files, ports and the dist-init address.

    gather_host(plan) -> HostSnapshot       everything below; each part that cannot be read is
                                            left empty and named in `unknown` with the reason

Nothing here opens a weights file or a FIFO: paths are only `stat`ed, each in a daemon thread
with a timeout, so a hung network mount makes a fact ("stat did not return") instead of a hang.
"""

from __future__ import annotations

import functools
import os
import re
import socket
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from hangwatch.errors import SourceUnavailable
from hangwatch.parse.hostinfo import (
    HostSnapshot,
    LockFile,
    PathProbe,
    ProbePlan,
    device_key,
    parse_cfs_quota,
    parse_cpu_max,
    parse_limit_bytes,
    parse_mountinfo,
    parse_proc_locks,
)

__all__ = ["ProbePlan", "gather_host", "probe_path", "scan_locks"]

STAT_TIMEOUT_S = 2.0
DNS_TIMEOUT_S = 2.0
_WEIGHT_FILE = re.compile(r"\.(?:safetensors|bin|pt|pth|gguf|ckpt|npz|msgpack|h5)$|\.index\.json$")
_LOCK_NAME = re.compile(r"(?:^lock$|\.lock$)")
_MAX_LOCK_SCAN = 20_000  # directory entries looked at across all cache dirs
_MAX_LOCK_DEPTH = 6
EXISTENCE_LOCK_AGE_S = 300.0  # a torch-extensions `lock` this old with no build holding it is left over

T = TypeVar("T")


def gather_host(plan: ProbePlan, *, proc_root: str = "/proc", sys_root: str = "/sys") -> HostSnapshot:
    unknown: dict[str, str] = {}
    snap = HostSnapshot(
        shm_bytes=_try(unknown, "shm", lambda: _shm_bytes()),
        cpus_affinity=_try(unknown, "cpus", lambda: len(os.sched_getaffinity(0))),
        cpu_quota=_try(unknown, "cpu_quota", lambda: _cpu_quota(proc_root, sys_root)),
        memory_limit_bytes=_try(unknown, "memory_limit", lambda: _memory_limit(proc_root, sys_root)),
        mounts=_try(unknown, "mounts", lambda: tuple(parse_mountinfo(_read(f"{proc_root}/self/mountinfo")))),
        listening=_try(unknown, "ports", _listening),
        paths=_paths(plan),
        resolved=_resolve_all(plan.hostnames, unknown),
        local_addresses=_try(unknown, "addresses", _local_addresses) or (),
    )
    locks = _try(unknown, "locks", lambda: _locks(plan.caches, proc_root))
    shm_fs = None if snap.mounts is None else next((m.fstype for m in reversed(snap.mounts) if m.mount_point == "/dev/shm"), None)
    return replace(snap, locks=locks, shm_fstype=shm_fs, unknown=unknown)


def _try(unknown: dict[str, str], name: str, read: Callable[[], T]) -> T | None:
    try:
        return read()
    except (OSError, ValueError, SourceUnavailable) as exc:
        unknown[name] = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
        return None


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read()


# ---------------------------------------------------------------- CPUs, memory, /dev/shm


def _shm_bytes() -> int:
    if not os.path.isdir("/dev/shm"):
        raise OSError("no /dev/shm on this host")
    st = os.statvfs("/dev/shm")
    return st.f_blocks * st.f_frsize


def _cgroup_dirs(proc_root: str, sys_root: str, controller: str) -> list[str]:
    """This process's cgroup directories for a controller, innermost first (v2 and v1 layouts)."""
    dirs = []
    for line in _read(f"{proc_root}/self/cgroup").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, rel = parts
        if hierarchy == "0" and not controllers:
            base = f"{sys_root}/fs/cgroup"
        elif controller in controllers.split(","):
            base = next((f"{sys_root}/fs/cgroup/{name}" for name in (controllers, controller)
                         if os.path.isdir(f"{sys_root}/fs/cgroup/{name}")), f"{sys_root}/fs/cgroup/{controller}")  # fmt: skip
        else:
            continue
        # in a container the cgroup root is mounted at the base: the relative path may not exist
        path = rel.strip("/")
        while True:
            dirs.append(os.path.join(base, path) if path else base)
            if not path:
                break
            path = os.path.dirname(path)
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def _cpu_quota(proc_root: str, sys_root: str) -> float | None:
    """The tightest CPU limit of this cgroup and its parents, in cores (None: no limit)."""
    limits = []
    for folder in _cgroup_dirs(proc_root, sys_root, "cpu"):
        if os.path.exists(f"{folder}/cpu.max"):
            limits.append(parse_cpu_max(_read(f"{folder}/cpu.max")))
        elif os.path.exists(f"{folder}/cpu.cfs_quota_us"):
            limits.append(parse_cfs_quota(_read(f"{folder}/cpu.cfs_quota_us"), _read(f"{folder}/cpu.cfs_period_us")))
    found = [limit for limit in limits if limit is not None]
    return min(found) if found else None


def _memory_limit(proc_root: str, sys_root: str) -> int | None:
    limits = []
    for folder in _cgroup_dirs(proc_root, sys_root, "memory"):
        for name in ("memory.max", "memory.limit_in_bytes"):
            if os.path.exists(f"{folder}/{name}"):
                limits.append(parse_limit_bytes(_read(f"{folder}/{name}")))
    found = [limit for limit in limits if limit is not None]
    return min(found) if found else None


# ---------------------------------------------------------------- ports and addresses


def _listening() -> tuple[Any, ...]:
    from hangwatch.sources.ports import read_listening

    return tuple(read_listening()[0])


def _local_addresses() -> tuple[str, ...]:
    import psutil

    return tuple(sorted({a.address.split("%")[0] for addrs in psutil.net_if_addrs().values() for a in addrs
                         if a.family in (socket.AF_INET, socket.AF_INET6)}))  # fmt: skip


def _resolve_all(hostnames: tuple[str, ...], unknown: dict[str, str]) -> dict[str, tuple[str, ...]]:
    resolved = {}
    for name in hostnames:
        found = _in_thread(functools.partial(_resolve, name), DNS_TIMEOUT_S)
        if found is _TIMED_OUT:
            unknown[f"resolve:{name}"] = f"resolving {name} did not finish in {DNS_TIMEOUT_S:g}s"
        else:
            resolved[name] = found
    return resolved


def _resolve(name: str) -> tuple[str, ...]:
    try:
        return tuple(sorted({str(info[4][0]) for info in socket.getaddrinfo(name, None)}))
    except (socket.gaierror, UnicodeError):
        return ()


# ---------------------------------------------------------------- paths


_TIMED_OUT: Any = object()


def _in_thread(fn: Callable[[], T], timeout_s: float) -> T | Any:
    """fn() in a daemon thread; _TIMED_OUT when it has not returned in time (a hung mount, DNS).

    A daemon thread left blocked in the kernel does not keep hangwatch from exiting.
    """
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(_capture(fn)), daemon=True, name="hangwatch-probe")
    thread.start()
    thread.join(timeout_s)
    if not box:
        return _TIMED_OUT
    ok, value = box[0]
    if not ok:
        raise value
    return value


def _capture(fn: Callable[[], T]) -> tuple[bool, Any]:
    try:
        return True, fn()
    except Exception as exc:  # any error is handed back to the caller's thread
        return False, exc


def _paths(plan: ProbePlan) -> tuple[PathProbe, ...]:
    probes = []
    for candidate in plan.weights:
        probe = probe_path(candidate, "weights")
        if probe.exists or probe.hung or candidate == plan.weights[-1]:
            probes.append(probe if probe.exists or probe.hung else probe_path(plan.weights[0], "weights"))
            break
    probes += [probe_path(cache, "cache") for cache in plan.caches]
    return tuple(probes)


def probe_path(path: str, role: str, timeout_s: float = STAT_TIMEOUT_S) -> PathProbe:
    """stat a path (and, for a weights directory, its weight files) without opening anything."""
    try:
        found = _in_thread(lambda: _stat_tree(path, role), timeout_s)
    except OSError as exc:
        return PathProbe(path, role, error=exc.strerror or str(exc))
    if found is _TIMED_OUT:
        return PathProbe(path, role, exists=True, hung=True)
    return found


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "fifo"), (stat.S_ISDIR, "dir"), (stat.S_ISREG, "file"),
                       (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "char"), (stat.S_ISBLK, "block")):  # fmt: skip
        if test(mode):
            return name
    return "other"


def _stat_tree(path: str, role: str) -> PathProbe:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return PathProbe(path, role)
    kind = _kind(st.st_mode)
    if kind != "dir" or role != "weights":
        return PathProbe(path, role, True, kind, fifos=(path,) if kind == "fifo" else ())
    fifos, size = [], 0
    for entry in _weight_entries(path):
        try:
            entry_st = entry.stat()  # follows links (HF snapshots link into blobs/)
        except OSError:
            continue
        if stat.S_ISFIFO(entry_st.st_mode):
            fifos.append(entry.path)
        elif stat.S_ISREG(entry_st.st_mode):
            size += entry_st.st_size
    return PathProbe(path, role, True, kind, fifos=tuple(fifos), size_bytes=size)


def _weight_entries(folder: str) -> list[os.DirEntry[str]]:
    """Weight files in the model folder and one level below (sharded or sub-foldered checkpoints)."""
    found = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if _WEIGHT_FILE.search(entry.name):
                found.append(entry)
            elif entry.is_dir(follow_symlinks=False) and not entry.name.startswith("."):
                with os.scandir(entry.path) as inner:
                    found.extend(e for e in inner if _WEIGHT_FILE.search(e.name))
    return found


# ---------------------------------------------------------------- lock files


def scan_locks(caches: tuple[str, ...], *, proc_root: str = "/proc") -> tuple[LockFile, ...]:
    """The lock files under these cache folders, each with who holds it and whether its writer lives."""
    return _locks(caches, proc_root)


def _locks(caches: tuple[str, ...], proc_root: str) -> tuple[LockFile, ...]:
    held = parse_proc_locks(_read(f"{proc_root}/locks"))
    budget = [_MAX_LOCK_SCAN]
    found: list[LockFile] = []
    for cache in caches:
        result = _in_thread(functools.partial(_scan_locks, cache, held, budget, proc_root), STAT_TIMEOUT_S * 2)
        if result is not _TIMED_OUT:
            found.extend(result)
    return tuple(found)


def _scan_locks(root: str, held: set[tuple[str, int]], budget: list[int], proc_root: str) -> list[LockFile]:
    found = []
    for folder, depth in _walk(root, budget):
        for entry in folder:
            if _LOCK_NAME.search(entry.name) and entry.is_file(follow_symlinks=False):
                found.append(_lock_file(entry, held, proc_root, depth))
    return found


def _walk(root: str, budget: list[int]) -> Any:
    stack = [(root, 0)]
    while stack and budget[0] > 0:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            continue
        budget[0] -= len(entries)
        yield entries, depth
        if depth < _MAX_LOCK_DEPTH:
            stack.extend((e.path, depth + 1) for e in entries if e.is_dir(follow_symlinks=False))


def _lock_file(entry: os.DirEntry[str], held: set[tuple[str, int]], proc_root: str, depth: int) -> LockFile:
    st = entry.stat(follow_symlinks=False)
    locked = (device_key(st.st_dev), st.st_ino) in held
    pid, host = _lock_owner(entry.path)
    alive = None if pid is None or (host and host != socket.gethostname()) else os.path.exists(f"{proc_root}/{pid}")
    # torch.utils.file_baton: the build folder's `lock` exists while a build runs, holds no pid
    existence = entry.name == "lock" and "torch_extensions" in entry.path
    if existence and not locked and pid is None and time.time() - st.st_mtime < EXISTENCE_LOCK_AGE_S:
        locked = True  # young: a build may be running right now
    return LockFile(entry.path, pid=pid, pid_alive=alive, held=locked, existence_lock=existence)


def _lock_owner(path: str) -> tuple[int | None, str | None]:
    """A pid (and host) written in a lock file: SoftFileLock-style `PID\\nHOST`."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(128).decode("ascii", "replace").split()
    except OSError:
        return None, None
    if not head or not head[0].isdigit():
        return None, None
    return int(head[0]), head[1] if len(head) > 1 else None


def home_dir(env: Mapping[str, str]) -> str:
    return env.get("HOME") or str(Path.home())
