"""From any pid of a server start to the server: its launcher, command line, flags, port, log, env.

The pid may be the launcher (each registered engine's: `python -m sglang.launch_server`, `vllm serve`,
...; see engines/), any of its descendants (a scheduler, a worker: walk up), or
something above it (a container's first process, a shell wrapper: walk down). Reads /proc
directly, so `proc_root` can name a host /proc mounted elsewhere, or a fake tree in tests.
"""

from __future__ import annotations

import os
import shlex
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field

from hangwatch.engines import engines, env_prefixes, rank_roles, server_port
from hangwatch.errors import SourceUnavailable, TargetError
from hangwatch.parse.flags import parse_flags
from hangwatch.redact import filter_env, redact_cmdline
from hangwatch.sources.logfind import LogLocation, find_log
from hangwatch.sources.procs import parent_pid, stat_fields

__all__ = ["Server", "discover", "launcher_engine", "log_path", "read_cmdline"]

_DEFAULT_HOST = "127.0.0.1"  # both engines are reachable on loopback when --host is not given
_MAX_ANCESTORS = 64


@dataclass(frozen=True)
class Server:
    engine: str | None  # a registered engine's name; discover() always sets it, `hangwatch run` of a wrapper may not
    launcher_pid: int
    cmdline: str  # shell-quoted, secret flag values redacted
    flags: Mapping[str, str | bool] = field(default_factory=dict)
    host: str = _DEFAULT_HOST
    port: int = 0
    log_path: str | None = None  # the file holding the launcher's stderr/stdout (its own, a tee's, a runtime's)
    env: Mapping[str, str] = field(default_factory=dict)  # filtered and redacted
    log: LogLocation | None = None  # where and in which format the log is (sources.logfind)
    log_missing: str | None = None  # when no log was found: what was tried


def discover(pid: int, *, proc_root: str = "/proc") -> Server:
    """The server that `pid` belongs to. TargetError when there is no such pid or no server."""
    cmdline = read_cmdline(pid, proc_root=proc_root)
    if cmdline is None:
        raise TargetError(f"no process with pid {pid}")
    if not cmdline:
        raise TargetError(f"pid {pid} has no command line: it has exited (a zombie) or is a kernel thread")
    found = _launcher(pid, cmdline, proc_root)
    if found is None:
        titles = " or ".join(engine.title or engine.name for engine in engines())
        names = ", ".join(engine.launch_hint for engine in engines() if engine.launch_hint)
        raise TargetError(
            f"pid {pid} ({_short(cmdline)}) is not an {titles} server: no launcher ({names}) "
            "is it, above it, or what it runs as a wrapper"
        )
    launcher, engine = found
    return _server(launcher, engine, proc_root)


def _server(pid: int, engine: str, proc_root: str) -> Server:
    # redacted before anything keeps it: cmdline.txt and flags end up in shareable bundles
    cmdline = redact_cmdline(read_cmdline(pid, proc_root=proc_root) or "")
    flags = parse_flags(cmdline)
    host = flags.get("host")
    log, log_missing = _find_log(pid, proc_root)
    return Server(
        engine=engine,
        launcher_pid=pid,
        cmdline=cmdline,
        flags=flags,
        host=host if isinstance(host, str) and host else _DEFAULT_HOST,
        port=server_port(flags, engine) or 0,
        log_path=log.path if log else None,
        env=_env(pid, proc_root),
        log=log,
        log_missing=log_missing,
    )


def _find_log(pid: int, proc_root: str) -> tuple[LogLocation | None, str | None]:
    try:
        return find_log(pid, proc_root=proc_root), None
    except SourceUnavailable as exc:
        return None, exc.reason


def _short(cmdline: str, limit: int = 120) -> str:
    cmdline = " ".join(cmdline.split())  # one line: a `python -c` program carries newlines
    return cmdline if len(cmdline) <= limit else cmdline[: limit - 1] + "…"


# ---------------------------------------------------------------- finding the launcher


def launcher_engine(cmdline: str) -> str | None:
    """The engine whose launcher this command line is, or None."""
    for engine in engines():
        role = engine.process_role(cmdline)
        if role is not None and role[0] == "launcher":
            return engine.name
    return None


def _launcher(pid: int, cmdline: str, proc_root: str) -> tuple[int, str] | None:
    engine = launcher_engine(cmdline)
    found = (pid, engine) if engine is not None else _launcher_above(pid, proc_root) or _launcher_below(pid, proc_root)
    if found:
        return _innermost(found, proc_root)
    return _embedding_process(pid, proc_root)


def _rank_engine(pid: int, proc_root: str) -> str | None:
    cmdline = read_cmdline(pid, proc_root=proc_root) or ""
    for engine in engines():
        role = engine.process_role(cmdline)
        if role is not None and role[0] in rank_roles():
            return engine.name
    return None


def _embedding_process(pid: int, proc_root: str) -> tuple[int, str] | None:
    """A script that embeds the engine (`sglang.Engine(...)`, `vllm.LLM(...)`) has no launcher
    command line: it is the nearest ancestor of a rank process that is not a rank itself. From
    above, only a rank that `pid` or a process it wraps started counts (see _wrapped)."""
    rank = pid if _rank_engine(pid, proc_root) else _rank_child(pid, proc_root)
    if rank is None:
        return None
    engine = _rank_engine(rank, proc_root)
    current = rank
    for _ in range(_MAX_ANCESTORS):
        parent = parent_pid(current, proc_root)
        if parent is None or parent <= 1:
            return None
        if not _rank_engine(parent, proc_root):
            return (parent, engine) if engine else None
        current = parent
    return None


def _rank_child(pid: int, proc_root: str) -> int | None:
    """A rank that `pid` started, or a process it wraps started."""
    children = _children_map(proc_root)
    for parent in (pid, *_wrapped(pid, proc_root)):
        for child in children.get(parent, ()):
            if _rank_engine(child, proc_root):
                return child
    return None


def _innermost(found: tuple[int, str], proc_root: str) -> tuple[int, str]:
    """Go down through wrappers whose command line names the launcher too (`sh -c "python -m
    sglang.launch_server ..."`, `uv run ...`): the real launcher is the last of the chain."""
    children = _children_map(proc_root)
    pid, engine = found
    for _ in range(_MAX_ANCESTORS):
        inner = [c for c in children.get(pid, ()) if launcher_engine(read_cmdline(c, proc_root=proc_root) or "") == engine]
        if len(inner) > 1:
            # `sh -c 'exec "$@" | while read …' sh python -m …`: the shell forks one subshell per
            # pipeline side, each with the wrapper's command line; the side that exec'd is no shell
            inner = [c for c in inner if not _is_shell(read_cmdline(c, proc_root=proc_root) or "")]
        if len(inner) != 1:
            return pid, engine
        pid = inner[0]
    return pid, engine


_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"})


def _is_shell(cmdline: str) -> bool:
    argv0 = cmdline.split(" ", 1)[0].strip("'")
    return os.path.basename(argv0) in _SHELLS


def _launcher_above(pid: int, proc_root: str) -> tuple[int, str] | None:
    # the nearest launcher wins: `hangwatch run` or a wrapper script may itself sit under one
    current = parent_pid(pid, proc_root)
    for _ in range(_MAX_ANCESTORS):
        if current is None or current <= 1:
            return None
        engine = launcher_engine(read_cmdline(current, proc_root=proc_root) or "")
        if engine is not None:
            return current, engine
        current = parent_pid(current, proc_root)
    return None


def _launcher_below(pid: int, proc_root: str) -> tuple[int, str] | None:
    """Down through wrappers only (a container's init, `bash run.sh`, `uv run ...`): the
    shallowest launcher that `pid` runs. A process running several things (a host's init, a
    login shell) is no server's wrapper: a server somewhere under it is not the one asked for."""
    for child in _wrapped(pid, proc_root):
        engine = launcher_engine(read_cmdline(child, proc_root=proc_root) or "")
        if engine is not None:
            return child, engine
    return None


# a wrapper runs one program, perhaps piped into a log writer (`... | tee server.log`)
_WRAPPER_CHILDREN = 2


def _wrapped(pid: int, proc_root: str) -> list[int]:
    """The processes `pid` runs as a wrapper, outermost first: down while a process has at most
    two children (hangwatch's own line of processes not counted), into the one that has children
    of its own (the program, not its log pipe); the last level's children all count. A child in
    a process group of its own is a job a shell started, not the wrapper's program (an
    interactive shell runs each command so), unless its parent is a container's init."""
    children = _children_map(proc_root)
    own = _own_line(proc_root)
    found: list[int] = []
    current = pid
    for _ in range(_MAX_ANCESTORS):
        group = None if _container_init(current, proc_root) else _pgid(current, proc_root)
        kids = [c for c in children.get(current, ()) if c not in own and (group is None or _pgid(c, proc_root) == group)]
        if not kids or len(kids) > _WRAPPER_CHILDREN:
            return found
        found.extend(kids)
        parents = [c for c in kids if children.get(c)]
        if len(parents) != 1:
            return found
        current = parents[0]
    return found


def _pgid(pid: int, proc_root: str) -> int | None:
    fields = stat_fields(pid, proc_root)
    try:
        return int(fields[2]) if fields else None
    except (IndexError, ValueError):
        return None


def _container_init(pid: int, proc_root: str) -> bool:
    """pid 1 of a pid namespace below this one (`NSpid: 4242 1`): a container's init."""
    try:
        with open(f"{proc_root}/{pid}/status", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("NSpid:"):
                    ids = line.split()[1:]
                    return len(ids) > 1 and ids[-1] == "1"
    except OSError:
        return False
    return False


def _own_line(proc_root: str) -> set[int]:
    """hangwatch itself and its ancestors: `hangwatch attach $$` from a shell is a child of it."""
    line: set[int] = set()
    current: int | None = os.getpid()
    for _ in range(_MAX_ANCESTORS):
        if current is None or current <= 1 or current in line:
            break
        line.add(current)
        current = parent_pid(current, proc_root)
    return line


def _children_map(proc_root: str) -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir(proc_root)
    except OSError:
        return children
    for name in names:
        if name.isdigit():
            parent = parent_pid(int(name), proc_root)
            if parent is not None:
                children.setdefault(parent, []).append(int(name))
    for pids in children.values():
        pids.sort()
    return children


# ---------------------------------------------------------------- /proc readers


def read_cmdline(pid: int, *, proc_root: str = "/proc") -> str | None:
    """/proc/PID/cmdline, shell-quoted; "" for a kernel thread or zombie, None when there is no pid."""
    try:
        with open(f"{proc_root}/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None
    except OSError:
        return ""
    args = raw.decode("utf-8", "replace").split("\x00")
    while args and not args[-1]:  # the final NUL, and setproctitle's NUL padding
        args.pop()
    return shlex.join(_unjoined(args))


def _unjoined(args: list[str]) -> list[str]:
    """A title set with setproctitle is one space-joined string where argv was: split it the way
    the launcher's shell did, when it is a launcher's command line (a path with spaces stays whole)."""
    if len(args) != 1 or not any(ch.isspace() for ch in args[0]):
        return args
    try:
        tokens = shlex.split(args[0])
    except ValueError:
        tokens = args[0].split()
    return tokens if len(tokens) > 1 and launcher_engine(shlex.join(tokens)) is not None else args


def log_path(pid: int, *, proc_root: str = "/proc") -> str | None:
    """The file the process writes stderr (logging, tqdm) or stdout to, when it is a regular file.

    The link text names the file in the server's mount namespace; when that path is not the
    same file here (a sidecar, a deleted log), the /proc/PID/fd/N path itself still reads it.
    """
    for fd in (2, 1):
        fd_path = f"{proc_root}/{pid}/fd/{fd}"
        try:
            held = os.stat(fd_path)
            target = os.readlink(fd_path)
        except OSError:
            continue
        if not stat.S_ISREG(held.st_mode):
            continue  # a terminal, a pipe, /dev/null
        return target if _same_file(target, held) else fd_path
    return None


def _same_file(path: str, held: os.stat_result) -> bool:
    try:
        here = os.stat(path)
    except OSError:
        return False
    return (here.st_ino, here.st_dev) == (held.st_ino, held.st_dev)


def _env(pid: int, proc_root: str) -> dict[str, str]:
    try:
        with open(f"{proc_root}/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return {}  # another user's process: the env is optional evidence
    pairs = (item.split("=", 1) for item in raw.decode("utf-8", "replace").split("\x00") if "=" in item)
    return dict(filter_env({key: value for key, value in pairs}, env_prefixes()))
