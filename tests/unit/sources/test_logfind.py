"""Finding the log behind a server's stdout/stderr: real pipelines (tee, cat >, chains),
container cgroups over real runtime directories, and what `missing` says when nothing is found."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from hangwatch.errors import SourceUnavailable
from hangwatch.sources.logfind import (
    LogGuard,
    RuntimeRoots,
    container_ids,
    find_log,
    pipe_readers,
)
from helpers.liveprocs import Spawner, comm, pipe_reader, wait_json, wait_until

# The "server": says its pid in a file, writes a line to stderr, then waits.
WRITER = (
    "import json, os, sys, time\n"
    "sys.stderr.write('Load weight begin.\\n'); sys.stderr.flush()\n"
    "open(os.environ['HW_READY'], 'w').write(json.dumps({'pid': os.getpid()}))\n"
    "time.sleep(120)\n"
)


def start_behind(spawner: Spawner, tmp_path: Path, shell_tail: str) -> int:
    """`python WRITER SHELL_TAIL` in tmp_path; returns the writer's pid once it runs and, behind a
    pipe, once the pipe's reader runs its program (before, it is the shell that execs it, and a look
    at the log then judges the shell). The shell's own stdout/stderr are /dev/null: no file of the
    test runner leaks into the pipeline."""
    ready = tmp_path / "ready.json"
    writer = f"{shlex.quote(sys.executable)} -c {shlex.quote(WRITER)}"
    spawner.start(["sh", "-c", f"{writer} {shell_tail}"], cwd=tmp_path, env={**os.environ, "HW_READY": str(ready)},
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid = int(wait_json(ready, None, 10.0)["pid"])
    if "|" in shell_tail:
        wait_until(lambda: comm(pipe_reader(pid)) not in ("", "sh", "dash", "bash"))
    return pid


def test_tee_with_a_relative_path(spawner: Spawner, tmp_path: Path) -> None:
    # GIVEN `server 2>&1 | tee server.log` (tee's own stdout a pipe too)
    pid = start_behind(spawner, tmp_path, "2>&1 | tee server.log | cat")
    # WHEN its log is looked for
    found = find_log(pid)
    # THEN it is the file tee writes, named as tee's argument
    assert found.path == str(tmp_path / "server.log")
    assert found.format == "plain" and found.via.startswith("tee (pid ")


def test_a_shell_redirect_behind_the_pipe(spawner: Spawner, tmp_path: Path) -> None:
    pid = start_behind(spawner, tmp_path, "2>&1 | cat >> out.log")
    found = find_log(pid)
    assert (found.path, found.format, found.guard) == (str(tmp_path / "out.log"), "plain", LogGuard(os.getuid(), found.guard.gids if found.guard else ()))
    assert "cat (pid" in find_log(pid).via


def test_a_chain_of_pipes(spawner: Spawner, tmp_path: Path) -> None:
    pid = start_behind(spawner, tmp_path, "2>&1 | grep --line-buffered . | tee -a chained.log")
    found = find_log(pid)
    assert found.path == str(tmp_path / "chained.log") and "tee" in found.via
    assert Path(found.path).read_bytes() == b"Load weight begin.\n"


def test_a_plain_redirect(spawner: Spawner, tmp_path: Path) -> None:
    pid = start_behind(spawner, tmp_path, "> direct.log 2>&1")
    assert find_log(pid).path == str(tmp_path / "direct.log")


def test_pipe_readers_are_the_read_end_only(spawner: Spawner, tmp_path: Path) -> None:
    pid = start_behind(spawner, tmp_path, "2>&1 | tee x.log")
    link = os.readlink(f"/proc/{pid}/fd/2")
    readers = pipe_readers(link, exclude=pid)
    assert len(readers) == 1
    assert Path(f"/proc/{readers[0]}/comm").read_text().strip() == "tee"


def test_nothing_found_says_what_was_tried(spawner: Spawner, tmp_path: Path) -> None:
    # GIVEN output to /dev/null on fd 1 and a pipe to a reader that writes no file on fd 2
    pid = start_behind(spawner, tmp_path, "2>&1 >/dev/null | sleep 120")
    # WHEN / THEN: a SourceUnavailable that lists each attempt, and how to give the log
    with pytest.raises(SourceUnavailable) as error:
        find_log(pid, roots=RuntimeRoots(docker=str(tmp_path / "none")))
    reason = error.value.reason
    assert "the pipe's reader sleep" in reason and "writes no regular file" in reason
    assert "fd 1 is /dev/null" in reason
    assert f"pid {pid} is in no container cgroup" in reason
    assert "--log" in (error.value.hint or "")


# ---------------------------------------------------------------- containers, by cgroup

CID = "7a3b603e5b9f7c8c95e3617cf479ab9eeb9dc0d3efaab8c8e841930e50ee72f6"
POD = "0d5c0a4e-3c1b-4bd9-9f0e-2f4c9e3f5a11"


def fake_proc(tmp_path: Path, cgroup: str) -> str:
    """A /proc with one pid whose fds cannot be read (as from a sidecar) and this cgroup file."""
    root = tmp_path / "proc"
    (root / "42").mkdir(parents=True)
    (root / "42" / "cgroup").write_text(cgroup)
    return str(root)


@pytest.mark.parametrize(("cgroup", "kind", "pod"), [
    (f"12:pids:/docker/{CID}\n", "docker", None),  # cgroupfs driver (this machine's dockerd)
    (f"0::/system.slice/docker-{CID}.scope\n", "docker", None),
    (f"9:name=systemd:/libpod_parent/libpod-{CID}\n", "libpod", None),  # podman 4.3, cgroupfs
    (f"0::/kubepods/burstable/pod{POD}/{CID}\n", None, POD),
    (f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{POD.replace('-', '_')}.slice/cri-containerd-{CID}.scope\n",
     "cri-containerd", POD),
    ("0::/user.slice/user-1000.slice/session-3.scope\n", None, None),
])
def test_container_ids_from_cgroup(tmp_path: Path, cgroup: str, kind: str | None, pod: str | None) -> None:
    got = container_ids(42, proc_root=fake_proc(tmp_path, cgroup))
    assert got == (kind, CID if "session" not in cgroup else None, pod)


def test_docker_json_file_from_the_cgroup(tmp_path: Path) -> None:
    log = tmp_path / "docker" / "containers" / CID / f"{CID}-json.log"
    log.parent.mkdir(parents=True)
    log.write_text("")
    found = find_log(42, proc_root=fake_proc(tmp_path, f"12:pids:/docker/{CID}\n"),
                     roots=RuntimeRoots(docker=str(tmp_path / "docker")))
    assert (found.path, found.format) == (str(log), "docker-json")


def test_cri_log_through_the_containers_symlink(tmp_path: Path) -> None:
    pod_dir = tmp_path / "pods" / f"llm_sglang-0_{POD}" / "server"
    pod_dir.mkdir(parents=True)
    (pod_dir / "0.log").write_text("")
    (pod_dir / "1.log").write_text("")
    links = tmp_path / "containers"
    links.mkdir()
    (links / f"sglang-0_llm_server-{CID}.log").symlink_to(pod_dir / "1.log")
    cgroup = f"0::/kubepods/burstable/pod{POD}/{CID}\n"
    roots = RuntimeRoots(pods=str(tmp_path / "pods"), containers=str(links))
    found = find_log(42, proc_root=fake_proc(tmp_path, cgroup), roots=roots)
    assert (found.path, found.format) == (str(pod_dir / "1.log"), "cri")


def test_cri_log_of_the_only_container_by_pod_uid(tmp_path: Path) -> None:
    pod_dir = tmp_path / "pods" / f"llm_sglang-0_{POD}" / "server"
    pod_dir.mkdir(parents=True)
    for n in (0, 2, 10):  # restarts: the newest count wins, numerically
        (pod_dir / f"{n}.log").write_text("")
    roots = RuntimeRoots(pods=str(tmp_path / "pods"), containers=str(tmp_path / "none"))
    found = find_log(42, proc_root=fake_proc(tmp_path, f"0::/kubepods/pod{POD}/{CID}\n"), roots=roots)
    assert found.path == str(pod_dir / "10.log")


def test_podman_k8s_file_from_the_cgroup(tmp_path: Path) -> None:
    log = tmp_path / "storage" / "vfs-containers" / CID / "userdata" / "ctr.log"
    log.parent.mkdir(parents=True)
    log.write_text("")
    found = find_log(42, proc_root=fake_proc(tmp_path, f"9:name=systemd:/libpod_parent/libpod-{CID}\n"),
                     roots=RuntimeRoots(podman=str(tmp_path / "storage")))
    assert (found.path, found.format) == (str(log), "cri")


def test_a_container_without_a_log_file_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailable, match=r"no json-file log at .*/containers/7a3b603e5b9f.*-json\.log"):
        find_log(42, proc_root=fake_proc(tmp_path, f"12:pids:/docker/{CID}\n"), roots=RuntimeRoots(docker=str(tmp_path)))


def test_discover_goes_past_a_pipeline_wrappers_subshells(spawner: Spawner, tmp_path: Path) -> None:
    # GIVEN `sh -c 'exec "$@" 2>&1 | while read …' sh python -m sglang.launch_server …`: the
    # shell's two pipeline subshells both carry the wrapper's command line naming the launcher
    from hangwatch.sources.discover import discover

    program = tmp_path / "sglang" / "launch_server.py"
    program.parent.mkdir()
    program.write_text(WRITER)
    script = 'exec "$@" 2>&1 | while IFS= read -r line; do printf "%s\\n" "$line" >> out.log; done'
    ready = tmp_path / "ready.json"
    spawner.start(["sh", "-c", script, "sh", sys.executable, "-m", "sglang.launch_server", "--port", "1"],
                  cwd=tmp_path, env={**os.environ, "HW_READY": str(ready), "PYTHONPATH": str(tmp_path)},
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid = int(wait_json(ready, None, 10.0)["pid"])
    shell = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    # WHEN discovery starts from the outer shell, THEN it lands on the process that exec'd
    server = discover(os.getpgid(pid))
    assert server.launcher_pid == pid, (server.launcher_pid, shell)
    assert server.log is None and "writes no regular file" in (server.log_missing or "")


def test_a_reader_that_is_no_copier_is_not_taken_for_the_log(spawner: Spawner, tmp_path: Path) -> None:
    # GIVEN the pipe's reader is a Python supervisor that writes some other file on its stdout
    # (as a test runner's capture file): that file is not the server's log
    reader = "import sys, time\nfor line in sys.stdin: pass\ntime.sleep(60)\n"
    pid = start_behind(spawner, tmp_path, f"2>&1 | {shlex.quote(sys.executable)} -c {shlex.quote(reader)} > other.txt")
    with pytest.raises(SourceUnavailable, match="nor is it a copier"):
        find_log(pid, roots=RuntimeRoots(docker=str(tmp_path / "none")))


def test_tee_writing_through_a_linked_folder(spawner: Spawner, tmp_path: Path) -> None:
    # GIVEN `| tee -a logs/server.log` where logs/ is a link (a worktree's lab/.work): the fd names the real file
    (tmp_path / "real").mkdir()
    (tmp_path / "logs").symlink_to(tmp_path / "real")
    pid = start_behind(spawner, tmp_path, f"2>&1 | tee -a {tmp_path / 'logs' / 'server.log'} > /dev/null")
    found = find_log(pid)
    assert found.path == str(tmp_path / "real" / "server.log") and "tee" in found.via
