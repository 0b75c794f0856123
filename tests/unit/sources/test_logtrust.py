"""Who may name a log: run as root (as a DaemonSet runs hangwatch), against real processes, real
pipes, a real cgroup and a runtime binary placed in a private mount namespace (`unshare -m`).

The watched side (the server's user, or anyone who can start a process) may name a reader
`conmon`, give it `-l /root/secret`, pipe into it, leave a `server.log (deleted)` link behind, or
hand the server a pipe some other user reads. None of it may make hangwatch read a file the
server's own user could not read."""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch.errors import SourceUnavailable
from hangwatch.sources.logfind import RuntimeRoots, find_log, runtime_binary
from hangwatch.sources.logreader import open_log
from helpers.liveprocs import Spawner, comm, pipe_reader, wait_json, wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("gcc") is None,
                                reason="runs as root (as a DaemonSet does), with unshare and gcc")

WRITER = (
    "import json, os, sys, time\n"
    "sys.stderr.write('Load weight begin.\\n'); sys.stderr.flush()\n"
    "open(os.environ['HW_READY'], 'w').write(json.dumps({'pid': os.getpid()}))\n"
    "time.sleep(120)\n"
)
SECRET = b"ROOT-ONLY-SECRET 5f1d\n"


@pytest.fixture(scope="module")
def sleeper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real executable that ignores its argv and waits (what a runtime binary looks like from /proc)."""
    out = tmp_path_factory.mktemp("bin")
    (out / "s.c").write_text("#include <unistd.h>\nint main(void){for(;;)pause();}\n")
    subprocess.run(["gcc", "-o", str(out / "sleeper"), str(out / "s.c")], check=True, timeout=60)
    return out / "sleeper"


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "root-only" / "secret.txt"
    path.parent.mkdir()
    path.write_bytes(SECRET)
    path.chmod(0o600)
    return path


@pytest.fixture
def cgroup() -> Iterator[tuple[str, Path]]:
    """A real pids cgroup named like a container (…/<64 hex>): the server is moved into it."""
    cid = secrets.token_hex(32)
    base = Path("/sys/fs/cgroup/pids") / f"hw-test-{os.getpid()}"
    group = base / cid
    try:
        group.mkdir(parents=True)
    except OSError as exc:
        pytest.skip(f"no writable pids cgroup here ({exc})")
    yield cid, group
    for path in (group, base):
        for pid in (path / "cgroup.procs").read_text().split():
            Path("/sys/fs/cgroup/pids/cgroup.procs").write_text(pid)
        path.rmdir()


def start(spawner: Spawner, tmp_path: Path, pipeline: str, *, group: Path | None = None, reader: str | None = None) -> int:
    """`WRITER 2>&1 PIPELINE`; the writer joins `group` when given. With `reader`, returns once the
    pipe's reader runs that program: before, it is the shell, `setpriv` or `unshare` that execs it,
    and a look at the log then judges that process (seen under load: `setpriv` not yet `tee`)."""
    ready = tmp_path / "ready.json"
    ready.unlink(missing_ok=True)
    writer = f"{shlex.quote(sys.executable)} -c {shlex.quote(WRITER)}"
    if group is not None:
        writer = f"sh -c {shlex.quote(f'echo $$ > {group}/cgroup.procs && exec {writer}')}"
    spawner.start(["sh", "-c", f"{writer} 2>&1 {pipeline}"], cwd=tmp_path, env={**os.environ, "HW_READY": str(ready)},
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid = int(wait_json(ready, None, 10.0)["pid"])
    if reader is not None:
        wait_until(lambda: comm(pipe_reader(pid)) == reader[:15])  # the kernel's comm: 15 bytes
    return pid


def in_private_bin(sleeper: Path, name: str, args: str) -> str:
    """A root-owned `name` in /usr/local/bin, seen only by this reader (its own mount namespace)."""
    script = (f"mount -t tmpfs -o mode=755 tmpfs /usr/local/bin && cp {sleeper} /usr/local/bin/{name} && "
              f"chmod 755 /usr/local/bin/{name} && exec /usr/local/bin/{name} {args}")
    return f"| unshare -m sh -c {shlex.quote(script)}"


def no_secret_read(pid: int, roots: RuntimeRoots) -> str:
    """What find_log says; if it names a file at all, opening it must not give the secret."""
    try:
        found = find_log(pid, roots=roots)
    except SourceUnavailable as exc:
        return exc.reason
    reader = open_log(found)
    try:
        assert SECRET not in reader.read_new()
    except SourceUnavailable as exc:
        return exc.reason
    finally:
        reader.close()
    return found.via


def test_a_reader_named_conmon_is_not_a_runtime(spawner: Spawner, tmp_path: Path, sleeper: Path, secret_file: Path) -> None:
    # GIVEN the server's pipe read by a user's binary called `conmon`, told to log to a root-only file
    fake = tmp_path / "conmon"
    shutil.copy(sleeper, fake)
    pid = start(spawner, tmp_path, f"| {fake} --cid {'ab' * 32} -l {secret_file}", reader="conmon")
    # WHEN its log is looked for, THEN the reader's name and flags are not believed
    assert runtime_binary(pipe_reader(pid)) is None
    why = no_secret_read(pid, RuntimeRoots(docker=str(tmp_path / "none"), pods=str(secret_file.parent.parent)))
    assert "not a container runtime" in why


def test_a_root_owned_runtime_binary_of_another_container_is_not_believed(
        spawner: Spawner, tmp_path: Path, sleeper: Path, secret_file: Path, cgroup: tuple[str, Path]) -> None:
    # GIVEN a real root-owned /usr/local/bin/conmon (own mount namespace) naming another container's id
    cid, group = cgroup
    other = "cd" * 32
    pid = start(spawner, tmp_path, in_private_bin(sleeper, "conmon", f"--cid {other} -l {secret_file}"), group=group, reader="conmon")
    assert runtime_binary(pipe_reader(pid)) == "conmon"
    why = no_secret_read(pid, RuntimeRoots(docker=str(tmp_path / "none"), pods=str(secret_file.parent.parent)))
    assert f"names container {other[:12]}, not the server's" in why


def test_the_real_runtime_of_the_servers_container_is_followed(
        spawner: Spawner, tmp_path: Path, sleeper: Path, cgroup: tuple[str, Path]) -> None:
    # GIVEN the root-owned runtime binary naming the server's own container id and a log under its root
    cid, group = cgroup
    log = tmp_path / "storage" / "overlay-containers" / cid / "userdata" / "ctr.log"
    log.parent.mkdir(parents=True)
    log.write_text("2026-12-01T22:00:00.000000000+00:00 stderr F Load weight begin.\n")
    log.chmod(0o600)
    pid = start(spawner, tmp_path, in_private_bin(sleeper, "conmon", f"--cid {cid} -l k8s-file:{log}"), group=group,
                reader="conmon")
    found = find_log(pid, roots=RuntimeRoots(podman=str(tmp_path / "storage"), docker=str(tmp_path / "none")))
    # THEN its log is read, as the runtime's root-owned log
    assert (found.path, found.format) == (str(log), "cri") and found.guard is not None and found.guard.runtime
    reader = open_log(found)
    assert reader.read_new() == b"Load weight begin.\n"
    reader.close()


def test_the_real_runtime_logging_outside_its_root_is_not_believed(
        spawner: Spawner, tmp_path: Path, sleeper: Path, secret_file: Path, cgroup: tuple[str, Path]) -> None:
    cid, group = cgroup
    pid = start(spawner, tmp_path, in_private_bin(sleeper, "conmon", f"--cid {cid} -l {secret_file}"), group=group, reader="conmon")
    why = no_secret_read(pid, RuntimeRoots(podman=str(tmp_path / "storage"), docker=str(tmp_path / "none")))
    assert "outside" in why and "not trusted" in why


def test_a_shim_named_by_a_user_with_another_containers_id(
        spawner: Spawner, tmp_path: Path, sleeper: Path, cgroup: tuple[str, Path]) -> None:
    # GIVEN docker's layout with a root-only log of another container, and a user binary named like the shim
    cid, group = cgroup
    other = "ef" * 32
    other_log = tmp_path / "docker" / "containers" / other / f"{other}-json.log"
    other_log.parent.mkdir(parents=True)
    other_log.write_bytes(b'{"log":"ROOT-ONLY-SECRET 5f1d\\n","stream":"stderr","time":"2026-12-01T22:00:00Z"}\n')
    other_log.chmod(0o600)
    fake = tmp_path / "containerd-shim-runc-v2"
    shutil.copy(sleeper, fake)
    pid = start(spawner, tmp_path, f"| {fake} -namespace moby -id {other}", group=group,
                reader="containerd-shim-runc-v2")
    why = no_secret_read(pid, RuntimeRoots(docker=str(tmp_path / "docker"), podman=str(tmp_path / "none")))
    assert "not a container runtime" in why
    # and the real shim binary (root-owned, own namespace) with that id is not believed either
    pid = start(spawner, tmp_path, in_private_bin(sleeper, "containerd-shim-runc-v2", f"-namespace moby -id {other}"),
                group=group, reader="containerd-shim-runc-v2")
    why = no_secret_read(pid, RuntimeRoots(docker=str(tmp_path / "docker"), podman=str(tmp_path / "none")))
    assert f"runs container {other[:12]}, not the server's" in why


def test_a_deleted_log_is_read_through_the_fd_never_by_its_name(spawner: Spawner, tmp_path: Path, secret_file: Path) -> None:
    # GIVEN `server > server.log`, the log deleted, and a link named `server.log (deleted)` to a root-only file
    pid = start(spawner, tmp_path, "2> server.log")
    wait_until(lambda: (tmp_path / "server.log").stat().st_size > 0)
    (tmp_path / "server.log").unlink()
    (tmp_path / "server.log (deleted)").symlink_to(secret_file)
    found = find_log(pid)
    assert found.path == f"/proc/{pid}/fd/2"
    reader = open_log(found)
    # THEN what is read is the server's own output
    assert reader.read_new() == b"Load weight begin.\n"
    reader.close()


def test_a_pipe_another_user_reads_is_not_followed(spawner: Spawner, tmp_path: Path) -> None:
    # GIVEN the server (root) writes into a pipe whose reader, a tee of user nobody, writes its own file
    out = tmp_path / "theirs"
    out.mkdir()
    os.chown(out, 65534, 65534)
    pid = start(spawner, tmp_path, f"| setpriv --reuid=65534 --regid=65534 --clear-groups tee {out}/tee.log",
                reader="tee")
    with pytest.raises(SourceUnavailable, match=r"runs as uid 65534, not as the server's uid 0: a pipe inherited"):
        find_log(pid, roots=RuntimeRoots(docker=str(tmp_path / "none")))


def test_a_file_the_servers_user_cannot_read_is_not_read(spawner: Spawner, tmp_path: Path, secret_file: Path) -> None:
    # GIVEN a server running as nobody whose stderr root opened onto a root-only file holding a secret
    ready = tmp_path / "pid"
    server = "echo 'Load weight begin.' >&2; exec sleep 120"
    script = f"echo $$ > {ready}; exec setpriv --reuid=65534 --regid=65534 --clear-groups sh -c {shlex.quote(server)}"
    spawner.start(["sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(secret_file, "ab"))
    pid = int(wait_until(lambda: ready.exists() and ready.read_text().strip()))
    wait_until(lambda: comm(pid) == "sleep")
    found = find_log(pid)
    assert found.guard is not None and found.guard.uid == 65534
    # WHEN it is opened, THEN refused: root never reads for the API what the server's user could not
    with pytest.raises(SourceUnavailable, match=r"the server's user \(uid 65534\) could not read it"):
        open_log(found).read_new()


NOBODY = "setpriv --reuid=65534 --regid=65534 --clear-groups"


def start_as_nobody(spawner: Spawner, tmp_path: Path, pipeline: str, reader: str) -> int:
    """A server run by nobody, `2>&1 PIPELINE`; its pid once it runs as nobody and its pipe's reader
    runs `reader` (see start)."""
    pidfile = tmp_path / "pid"
    pidfile.unlink(missing_ok=True)
    server = "echo 'Load weight begin.' >&2; exec sleep 120"
    writer = f"sh -c {shlex.quote(f'echo $$ > {pidfile}; exec {NOBODY} sh -c {shlex.quote(server)}')}"
    spawner.start(["sh", "-c", f"{writer} 2>&1 {pipeline}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip()))
    wait_until(lambda: comm(pid) == "sleep" and comm(pipe_reader(pid)) == reader[:15])
    return pid


def test_the_servers_own_conmon_is_read_as_that_user_only(spawner: Spawner, tmp_path: Path, sleeper: Path,
                                                           secret_file: Path) -> None:
    # GIVEN rootless podman's shape: the real conmon binary, run by the server's user (nobody)
    os.chmod(tmp_path, 0o755)
    own = tmp_path / "home" / "ctr.log"
    own.parent.mkdir()
    own.write_text("2026-12-01T22:00:00.000000000+00:00 stderr F Load weight begin.\n")
    os.chown(own, 65534, 65534)
    own.chmod(0o600)
    pid = start_as_nobody(spawner, tmp_path, in_private_bin(sleeper, "conmon", f"--cid {'ab' * 32} -l k8s-file:{own}")
                          .replace("exec /usr/local/bin/conmon", f"exec {NOBODY} /usr/local/bin/conmon"), "conmon")
    found = find_log(pid, roots=RuntimeRoots(docker=str(tmp_path / "none"), podman=str(tmp_path / "none")))
    # THEN its log is read, as the user's own (not as a runtime's root-owned log)
    assert found.path == str(own) and found.guard is not None and (found.guard.uid, found.guard.runtime) == (65534, False)
    reader = open_log(found)
    assert reader.read_new() == b"Load weight begin.\n"
    reader.close()
    # and the same conmon naming a root-only file gets nothing from it
    pid = start_as_nobody(spawner, tmp_path, in_private_bin(sleeper, "conmon", f"--cid {'ab' * 32} -l {secret_file}")
                          .replace("exec /usr/local/bin/conmon", f"exec {NOBODY} /usr/local/bin/conmon"), "conmon")
    why = no_secret_read(pid, RuntimeRoots(docker=str(tmp_path / "none"), podman=str(tmp_path / "none")))
    assert "could not read it" in why
