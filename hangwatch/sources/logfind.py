"""Where a server's log really is, from its stdout/stderr (fd 2, then fd 1).

* a regular file (`> server.log 2>&1`, `hangwatch run`): that file;
* a pipe: whoever holds its read end (the same `pipe:[INODE]` in /proc/*/fd, opened for
  reading) is followed: `tee FILE`, `cat >> FILE`, multilog/svlogd/rotatelogs-style writers
  → the regular file they write (through further pipes: `| grep … | tee FILE`); a container shim
  (containerd-shim, conmon) or dockerd → the runtime's log file of that container;
* a Unix socket with systemd-journald running: the journal (`journalctl _PID=…`);
* nothing visible (a sidecar sees the server but not the shim on the host): the container id
  from /proc/PID/cgroup and the runtimes' log directories.

`find_log` returns a `LogLocation` or raises `SourceUnavailable` whose reason lists what was
tried. Every root is a parameter (`RuntimeRoots`), so tests run on real files in tmp dirs.

Who may name a log. hangwatch often runs as root (a DaemonSet, a systemd unit) and serves what it
reads on a tokenless loopback API, so nothing the watched side controls may choose a file that the
server's own user could not read:

* a runtime (conmon, containerd-shim, dockerd) is believed only when it is that runtime for real:
  its executable (/proc/PID/exe, through the runtime's own root) is a root-owned regular file in a
  package directory whose every parent is root-owned and not writable by others; the process runs
  as root; the container id it names is the one in the watched process's cgroup; and the log lies
  under the runtime's log root. Its name (comm, argv[0]) decides nothing: any user can name a file
  `conmon`. A runtime that runs as the user (rootless podman) is that user's reader, nothing more;
* any other pipe reader (tee, cat) is followed only when it runs as the server's user: a reader of
  another user holds a pipe the server inherited from someone else;
* every location carries a `LogGuard` (the server's uid and groups): the file is opened with
  O_NOFOLLOW, must be a regular file the server's user may read (or a root-owned log of a verified
  runtime), at the first open as at every re-open (`sources.logtail`). A `(deleted)` log is read
  through /proc/PID/fd/N, never by its name.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import stat
from dataclasses import dataclass, replace

from hangwatch.errors import SourceUnavailable

__all__ = ["LogGuard", "LogLocation", "RuntimeRoots", "container_ids", "find_log", "pipe_readers", "runtime_binary"]

_MAX_HOPS = 4  # pipe → reader → pipe → ... (`| grep | tee FILE`)
_HINT = "pass --log PATH, or start the server with `hangwatch run -- CMD` (it keeps a copy of the output)"
_SHIMS = ("containerd-shim", "conmon", "dockerd")


@dataclass(frozen=True)
class LogGuard:
    """Whose log a discovered file is: it must be readable by `uid` (with `gids`) by its mode bits,
    or be a root-owned log of a verified runtime (`runtime`). uid 0 reads anything."""

    uid: int
    gids: tuple[int, ...] = ()
    runtime: bool = False


@dataclass(frozen=True)
class LogLocation:
    """A log to read: a file in `format`, or the journal (`path` None, `journal_args` set).

    `guard` is set on every location discovery found (the watched side named it); a path the user
    gave (`--log`) has none: it is followed once, then held to the same file owner."""

    path: str | None
    format: str = "plain"  # parse.runtimelog.FORMATS
    via: str = ""  # how it was found, for the user ("tee (pid 4242)")
    journal_args: tuple[str, ...] = ()  # journalctl matches and bounds: ("_PID=4242", "--since=@1796081909")
    guard: LogGuard | None = None


@dataclass(frozen=True)
class RuntimeRoots:
    """Where runtimes keep container logs (mount the host's paths here in a sidecar)."""

    pods: str = "/var/log/pods"  # CRI: <ns>_<pod>_<uid>/<container>/<restart>.log
    containers: str = "/var/log/containers"  # CRI symlinks: <pod>_<ns>_<container>-<id>.log
    docker: str = "/var/lib/docker"  # json-file: containers/<id>/<id>-json.log
    podman: str = "/var/lib/containers/storage"  # k8s-file: <driver>-containers/<id>/userdata/ctr.log
    journalctl: str = "journalctl"


def find_log(pid: int, *, proc_root: str = "/proc", roots: RuntimeRoots = RuntimeRoots()) -> LogLocation:
    tried: list[str] = []
    owner = _credentials(pid, proc_root)
    for fd in (2, 1):
        found = _from_fd(pid, fd, proc_root, roots, tried)
        if found is not None:
            return _guarded(found, owner)
    found = _from_cgroup(pid, proc_root, roots, tried)
    if found is not None:
        return _guarded(found, owner)
    raise SourceUnavailable("log", "no log found: " + "; ".join(dict.fromkeys(tried)), _HINT)


def _guarded(found: LogLocation, owner: LogGuard) -> LogLocation:
    return replace(found, guard=replace(owner, runtime=found.guard is not None and found.guard.runtime))


def _credentials(pid: int, proc_root: str) -> LogGuard:
    """The watched process's effective uid and groups, from /proc/PID/status; an unreadable status
    gives a guard nobody passes but root-owned runtime logs (uid -1)."""
    fields = dict(line.split(":", 1) for line in _read(f"{proc_root}/{pid}/status").splitlines() if ":" in line)
    try:
        uid = int(fields["Uid"].split()[1])
        gids = (int(fields["Gid"].split()[1]), *(int(g) for g in fields.get("Groups", "").split()))
    except (KeyError, IndexError, ValueError):
        return LogGuard(-1)
    return LogGuard(uid, tuple(dict.fromkeys(gids)))


def _uid(pid: int, proc_root: str) -> int | None:
    """The effective uid from /proc/PID/status (the /proc/PID folder's owner is root for a
    non-dumpable process, whoever runs it)."""
    for line in _read(f"{proc_root}/{pid}/status").splitlines():
        if line.startswith("Uid:"):
            fields = line.split()
            return int(fields[2]) if len(fields) > 2 and fields[2].isdigit() else None
    return None


# ---------------------------------------------------------------- one fd


def _from_fd(pid: int, fd: int, proc_root: str, roots: RuntimeRoots, tried: list[str]) -> LogLocation | None:
    fd_path = f"{proc_root}/{pid}/fd/{fd}"
    try:
        held, target = os.stat(fd_path), os.readlink(fd_path)
    except OSError as exc:
        tried.append(f"fd {fd} of pid {pid} unreadable ({exc.strerror or exc})")
        return None
    if stat.S_ISREG(held.st_mode):
        return LogLocation(_visible_path(target, held, fd_path), via=f"fd {fd} of pid {pid}")
    if stat.S_ISFIFO(held.st_mode):
        return _behind_pipe(target, pid, proc_root, roots, tried, hops=0)
    if stat.S_ISSOCK(held.st_mode):
        return _behind_socket(pid, fd, proc_root, roots, tried)
    tried.append(f"fd {fd} is {target} (a terminal or device: nothing keeps the output)")
    return None


def _visible_path(target: str, held: os.stat_result, fd_path: str) -> str:
    """The link text names the file in the writer's mount namespace; when that is not the same
    file here (a sidecar, a deleted log), the /proc/PID/fd/N path still reads it. A deleted log is
    never looked up by name: `server.log (deleted)` may be anyone's link, made after the fact."""
    if target.endswith(" (deleted)") or not target.startswith("/"):
        return fd_path
    try:
        here = os.lstat(target)
    except OSError:
        return fd_path
    same = stat.S_ISREG(here.st_mode) and (here.st_ino, here.st_dev) == (held.st_ino, held.st_dev)
    return target if same else fd_path


# ---------------------------------------------------------------- pipes


def pipe_readers(link: str, *, proc_root: str = "/proc", exclude: int | None = None) -> list[int]:
    """Pids holding `link` ("pipe:[123]") open for reading (fdinfo flags: O_RDONLY or O_RDWR)."""
    readers = []
    for name in _pids(proc_root):
        pid = int(name)
        if pid == exclude:
            continue
        for fd in _fds(pid, proc_root):
            if _readlink(f"{proc_root}/{pid}/fd/{fd}") == link and _access_mode(pid, fd, proc_root) in (0, 2):
                readers.append(pid)
                break
    return readers


def _behind_pipe(link: str, writer: int, proc_root: str, roots: RuntimeRoots, tried: list[str], hops: int) -> LogLocation | None:
    readers = pipe_readers(link, proc_root=proc_root, exclude=writer)
    if not readers:
        tried.append(f"{link}: no process here holds its read end (the reader is in another PID namespace)")
        return None
    for reader in readers:
        found = _follow_reader(reader, writer, proc_root, roots, tried, hops)
        if found is not None:
            return found
    return None


def _follow_reader(reader: int, writer: int, proc_root: str, roots: RuntimeRoots, tried: list[str], hops: int) -> LogLocation | None:
    comm = _read(f"{proc_root}/{reader}/comm").strip()
    runtime = runtime_binary(reader, proc_root=proc_root)
    reader_uid, writer_uid = _uid(reader, proc_root), _uid(writer, proc_root)
    if runtime is not None and reader_uid == 0:
        return _from_runtime(reader, runtime, writer, proc_root, roots, tried)
    if runtime == "conmon" and reader_uid is not None and reader_uid == writer_uid:
        # rootless podman: the real conmon, run by the server's own user; what it names is read only
        # as that user could read it (the guard find_log adds), never as a runtime's root-owned log
        own = _conmon_log(_argv(reader, proc_root), None, f"conmon (pid {reader}, the server's user)", None, tried)
        if own is not None:
            return own
    if comm.startswith(_SHIMS) or runtime is not None:
        # named like a runtime (or a real runtime's binary started by a user, with the user's
        # arguments): nothing it names is believed; the container's cgroup may still say
        tried.append(f"the pipe's reader {comm} (pid {reader}) is not a container runtime run by root "
                     "(its executable is no root-owned runtime binary, or it runs as a user): its log path is not trusted")
        return _from_cgroup(writer, proc_root, roots, tried)
    if reader_uid is None or reader_uid != writer_uid:
        tried.append(f"the pipe's reader {comm} (pid {reader}) runs as uid {reader_uid}, not as the server's "
                     f"uid {writer_uid}: a pipe inherited from someone else, not followed")
        return None
    files, pipes = _written(reader, proc_root)
    cwd = _readlink(f"{proc_root}/{reader}/cwd")
    # as written and with links resolved: the fd link names the real file (`logs/` may be a link)
    joined = [os.path.join(cwd, a) for a in _argv(reader, proc_root)[1:]]
    args = [os.path.normpath(a) for a in joined] + [os.path.realpath(a) for a in joined]
    found = _likely_log(files, args, copier=comm in _COPIERS)
    if found is not None:
        path, fd_path, held = found
        return LogLocation(_visible_path(path, held, fd_path), via=f"{comm} (pid {reader}) writes {path}")
    for link in pipes if comm in _COPIERS else []:
        if hops + 1 < _MAX_HOPS:
            found_behind = _behind_pipe(link, reader, proc_root, roots, tried, hops + 1)
            if found_behind is not None:
                return found_behind
    tried.append(f"the pipe's reader {comm} (pid {reader}) writes no regular file it names, "
                 "nor is it a copier (cat, tee, grep, sed, a shell) whose stdout is a file")
    return None


_Written = tuple[str, str, os.stat_result]  # (path, /proc/PID/fd/N, stat)
# Programs whose stdout carries what they read: their stdout (a file, or the next pipe) is the log.
# Any other reader (a supervisor in Python, a test runner) may write files that are not the log.
_COPIERS = frozenset({"cat", "tee", "grep", "egrep", "fgrep", "sed", "awk", "gawk", "mawk", "ts", "stdbuf",
                      "sh", "bash", "dash", "ash", "zsh", "busybox"})


def _likely_log(files: list[_Written], args: list[str], *, copier: bool) -> _Written | None:
    """A file the reader was told to write (`tee FILE`, `rotatelogs FILE`, multilog's dir/current;
    `args` made absolute); else, for a copier, its stdout (`cat > FILE`)."""
    named = [f for f in files if any(f[0] == arg or os.path.dirname(f[0]) == arg for arg in args)]
    if named:
        return named[0]
    stdout = [f for f in files if f[1].endswith("/fd/1")]
    return stdout[0] if copier and stdout else None


def _written(pid: int, proc_root: str) -> tuple[list[_Written], list[str]]:
    """Regular files (and pipes) that `pid` holds open for writing, in fd order; never its
    stderr (fd 2: the reader's own errors, often the terminal's or a job's file)."""
    files, pipes = [], []
    for fd in sorted(_fds(pid, proc_root), key=int):
        if fd == "2" or _access_mode(pid, fd, proc_root) not in (1, 2):
            continue
        fd_path = f"{proc_root}/{pid}/fd/{fd}"
        target = _readlink(fd_path)
        try:
            held = os.stat(fd_path)
        except OSError:
            continue
        if stat.S_ISREG(held.st_mode) and not target.startswith(("/dev/", "/proc/")):
            files.append((target.removesuffix(" (deleted)"), fd_path, held))
        elif stat.S_ISFIFO(held.st_mode):
            pipes.append(target)
    return files, pipes


# ---------------------------------------------------------------- container runtimes


# Where packages install runtimes; a binary elsewhere (/tmp, a home, /opt) is anyone's.
_RUNTIME_DIRS = ("/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/bin", "/usr/local/sbin",
                 "/usr/libexec/podman", "/usr/libexec/crio", "/usr/lib/podman", "/usr/libexec/docker",
                 "/usr/lib/cri-o-runc/sbin")


def runtime_binary(pid: int, *, proc_root: str = "/proc") -> str | None:
    """The runtime `pid` really is ("conmon", "containerd-shim…", "dockerd"), from its executable,
    or None. The executable must be a root-owned regular file, not writable by group or others,
    in a package directory (`_RUNTIME_DIRS`) whose every directory is root-owned and not writable
    by others. It is checked through /proc/PID/root, so the runtime's mount namespace decides, not
    ours, and by inode: the file at that path must be the very file the process runs."""
    exe = f"{proc_root}/{pid}/exe"
    try:
        target, held = os.readlink(exe), os.stat(exe)
    except OSError:
        return None
    name = os.path.basename(target)
    if target.endswith(" (deleted)") or not name.startswith(_SHIMS) or os.path.dirname(target) not in _RUNTIME_DIRS:
        return None
    root = f"{proc_root}/{pid}/root"
    path = root
    for part in target.strip("/").split("/"):
        path = f"{path}/{part}"
        try:
            st = os.lstat(path)
        except OSError:
            return None
        if st.st_uid != 0 or st.st_mode & 0o022 or stat.S_ISLNK(st.st_mode):
            return None
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (held.st_dev, held.st_ino):
        return None
    return name


def _from_runtime(shim: int, runtime: str, writer: int, proc_root: str, roots: RuntimeRoots, tried: list[str]) -> LogLocation | None:
    argv = _argv(shim, proc_root)
    via = f"{runtime} (pid {shim})"
    _, own_cid, _ = container_ids(writer, proc_root=proc_root, delegated=False)
    if runtime == "conmon":
        cids = _args(argv, "-c", "--cid")
        if own_cid is None or own_cid not in cids:
            tried.append(f"{via} names container {(cids or ['none'])[0][:12]}, not the server's "
                         f"({(own_cid or 'no container cgroup')[:24]}): its log path is not trusted")
        else:
            found = _conmon_log(argv, own_cid, via, roots, tried)
            if found is not None:
                return found
    if runtime.startswith("containerd-shim") and _arg(argv, "-namespace") == "moby":
        cid = _arg(argv, "-id")
        if cid and cid == own_cid:
            return _docker_log(cid, roots, via, tried, proc_root)
        tried.append(f"{via} runs container {(cid or 'none')[:12]}, not the server's: its log is not read")
    found = _from_cgroup(writer, proc_root, roots, tried)
    if found is None:
        tried.append(f"the pipe goes to {via}, and no log file of that container was found")
    return found


def _conmon_log(argv: list[str], cid: str | None, via: str, roots: RuntimeRoots | None, tried: list[str]) -> LogLocation | None:
    """conmon's `-l/--log-path [DRIVER:]PATH` (k8s-file: the CRI format; CRI-O and podman). A root
    conmon's path must lie under a runtime's log root (CRI pods, podman's storage); `roots` None is
    the server's own user's conmon, whose path is guarded as that user's."""
    for value in _args(argv, "-l", "--log-path"):
        known = value.startswith(("k8s-file:", "journald:", "passthrough:", "none:"))
        driver, path = value.split(":", 1) if known else ("k8s-file", value)
        if driver == "k8s-file" and path.startswith("/"):
            if roots is None:
                return LogLocation(path, "cri", via)
            if _under(path, (roots.pods, roots.podman)):
                return LogLocation(path, "cri", via, guard=LogGuard(-1, runtime=True))
            tried.append(f"{via} logs to {path}, outside {roots.pods} and {roots.podman}: not trusted")
        if driver == "journald" and cid is not None:
            return LogLocation(None, "journald", via, (f"CONTAINER_ID_FULL={cid}",))
    return None


def _under(path: str, roots: tuple[str, ...]) -> bool:
    norm = os.path.normpath(path)
    return path.startswith("/") and any(norm.startswith(os.path.normpath(root).rstrip("/") + "/") for root in roots)


def _docker_log(cid: str, roots: RuntimeRoots, via: str, tried: list[str], proc_root: str = "/proc") -> LogLocation | None:
    for root in dict.fromkeys([roots.docker, *_dockerd_roots(proc_root)]):
        path = os.path.join(root, "containers", cid, f"{cid}-json.log")
        if os.path.isfile(path):
            return LogLocation(path, "docker-json", via, guard=LogGuard(-1, runtime=True))
    where = os.path.join(roots.docker, "containers", cid, f"{cid}-json.log")
    tried.append(f"{via}: no json-file log at {where} (another log driver, or mount the host's {roots.docker}/containers)")
    return None


def _dockerd_roots(proc_root: str) -> list[str]:
    """`--data-root` of every real dockerd visible here, run by root (on the host; a sidecar sees none)."""
    roots: list[str] = []
    for name in _pids(proc_root):
        pid = int(name)
        if _running(pid, "dockerd", proc_root) and _uid(pid, proc_root) == 0 and runtime_binary(pid, proc_root=proc_root) == "dockerd":
            roots.extend(a for a in _args(_argv(pid, proc_root), "--data-root", "-g", "--graph") if a.startswith("/"))
    return roots


# /proc/PID/cgroup paths of the common runtimes, cgroupfs and systemd drivers alike
_POD_UID = re.compile(r"kubepods[^\n]*?[/-]pod(?P<uid>[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
_DELEGATED = re.compile(r"/user@\d+\.service/|/user-\d+\.slice/")
_CONTAINER_ID = re.compile(r"(?:^|[/-])(?P<kind>docker|cri-containerd|crio|libpod)?[-/]?(?P<id>[0-9a-f]{64})(?:\.scope)?$")


def container_ids(pid: int, *, proc_root: str = "/proc", delegated: bool = True) -> tuple[str | None, str | None, str | None]:
    """(runtime kind or None, container id, pod uid) from /proc/PID/cgroup; Nones when not in one.

    `delegated=False`: a cgroup in a user's delegated subtree (`user@UID.service`, where the user
    names the cgroups) says nothing about which container it is: a user can call one by any id."""
    for line in _read(f"{proc_root}/{pid}/cgroup").splitlines():
        path = line.split(":", 2)[-1]
        if not delegated and _DELEGATED.search(path):
            continue
        m = _CONTAINER_ID.search(path)
        if m is None:
            continue
        pod = _POD_UID.search(path)
        return m["kind"], m["id"], pod["uid"].replace("_", "-") if pod else None
    return None, None, None


def _from_cgroup(pid: int, proc_root: str, roots: RuntimeRoots, tried: list[str]) -> LogLocation | None:
    kind, cid, pod_uid = container_ids(pid, proc_root=proc_root)
    if cid is None:
        tried.append(f"pid {pid} is in no container cgroup")
        return None
    # a container id the user named (a delegated cgroup) finds a log, but never a root-owned one
    runtime = container_ids(pid, proc_root=proc_root, delegated=False)[1] == cid
    via = f"container {cid[:12]} (cgroup)"
    found = _cgroup_log(kind, cid, pod_uid, roots, via, tried, proc_root)
    if found is not None and not runtime:
        return replace(found, guard=None)
    return found


def _cgroup_log(kind: str | None, cid: str, pod_uid: str | None, roots: RuntimeRoots, via: str, tried: list[str],
                proc_root: str) -> LogLocation | None:
    if pod_uid is not None or kind in ("cri-containerd", "crio"):
        found = _cri_log(cid, pod_uid, roots, via)
        if found is not None:
            return found
        tried.append(f"no CRI log of container {cid[:12]} under {roots.containers} or {roots.pods}")
    for path in glob.glob(os.path.join(roots.podman, "*-containers", cid, "userdata", "ctr.log")):
        return LogLocation(path, "cri", via, guard=LogGuard(-1, runtime=True))
    return _docker_log(cid, roots, via, tried, proc_root)


def _cri_log(cid: str, pod_uid: str | None, roots: RuntimeRoots, via: str) -> LogLocation | None:
    for link in sorted(glob.glob(os.path.join(roots.containers, f"*-{cid}.log"))):
        path = os.path.realpath(link)
        # the kubelet's link points into the pods root; one that leads elsewhere is not its
        if os.path.isfile(path) and _under(path, (os.path.realpath(roots.pods),)):
            return LogLocation(path, "cri", via, guard=LogGuard(-1, runtime=True))
    if pod_uid is None:
        return None
    logs = glob.glob(os.path.join(roots.pods, f"*_{pod_uid}", "*", "*.log"))
    dirs = {os.path.dirname(p) for p in logs}
    if len(dirs) != 1:
        return None  # several containers in the pod: only the symlink above says which is ours
    return LogLocation(max(logs, key=_restart_number), "cri", via, guard=LogGuard(-1, runtime=True))


def _restart_number(path: str) -> int:
    stem = os.path.basename(path).split(".", 1)[0]
    return int(stem) if stem.isdigit() else -1


# ---------------------------------------------------------------- journald


def _behind_socket(pid: int, fd: int, proc_root: str, roots: RuntimeRoots, tried: list[str]) -> LogLocation | None:
    if not any(_running(int(p), "systemd-journal", proc_root) for p in _pids(proc_root)):
        tried.append(f"fd {fd} is a socket and no systemd-journald runs here")
        return None
    if shutil.which(roots.journalctl) is None:
        tried.append(f"fd {fd} goes to systemd-journald, and {roots.journalctl} is not installed")
        return None
    # a pid is reused: only what was logged since this process started is its log
    since = _start_epoch(pid, proc_root)
    bound = (f"--since=@{since}",) if since is not None else ()
    return LogLocation(None, "journald", f"systemd-journald (fd {fd})", (f"_PID={pid}", *bound))


def _start_epoch(pid: int, proc_root: str) -> int | None:
    """When `pid` started, in whole seconds since the epoch (boot time + its start in clock ticks)."""
    stat_line = _read(f"{proc_root}/{pid}/stat")
    btime = next((line.split()[1] for line in _read(f"{proc_root}/stat").splitlines() if line.startswith("btime ")), None)
    try:
        ticks = int(stat_line[stat_line.rfind(")") + 2 :].split()[19])
        return int(btime) + ticks // os.sysconf("SC_CLK_TCK") if btime else None
    except (IndexError, ValueError):
        return None


# ---------------------------------------------------------------- /proc helpers


def _pids(proc_root: str) -> list[str]:
    try:
        return [name for name in os.listdir(proc_root) if name.isdigit()]
    except OSError:
        return []


def _running(pid: int, comm: str, proc_root: str) -> bool:
    """`pid` is a live (not zombie) process named `comm`."""
    stat_line = _read(f"{proc_root}/{pid}/stat")
    name_end = stat_line.rfind(")")
    return stat_line[stat_line.find("(") + 1 : name_end] == comm and stat_line[name_end + 2 : name_end + 3] != "Z"


def _fds(pid: int, proc_root: str) -> list[str]:
    try:
        return os.listdir(f"{proc_root}/{pid}/fd")
    except OSError:
        return []  # gone, or another user's process


def _access_mode(pid: int, fd: str | int, proc_root: str) -> int | None:
    for line in _read(f"{proc_root}/{pid}/fdinfo/{fd}").splitlines():
        if line.startswith("flags:"):
            return int(line.split()[1], 8) & 0o3
    return None


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _argv(pid: int, proc_root: str) -> list[str]:
    raw = _read(f"{proc_root}/{pid}/cmdline")
    return [a for a in raw.split("\x00") if a]


def _args(argv: list[str], *names: str) -> list[str]:
    """Values of `--name VALUE` and `--name=VALUE`."""
    out = []
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                out.append(argv[i + 1])
            elif arg.startswith(name + "="):
                out.append(arg[len(name) + 1 :])
    return out


def _arg(argv: list[str], name: str) -> str | None:
    found = _args(argv, name)
    return found[0] if found else None
