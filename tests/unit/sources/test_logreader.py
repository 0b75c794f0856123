"""Reading a found log: runtime formats decoded across rotation, and the journal (where journald runs)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch.sources.logfind import LogLocation, find_log
from hangwatch.sources.logreader import DecodedTail, JournalTail, open_log
from helpers.liveprocs import Spawner, wait_until


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


def cri(stream: str, tag: str, msg: str) -> bytes:
    return f"2026-11-30T23:30:33.931469959+00:00 {stream} {tag} {msg}\n".encode()


def test_cri_file_decoded_and_followed_across_rotation(tmp_path: Path) -> None:
    # GIVEN a CRI log (kubelet's N.log) with a line cut in two
    log = tmp_path / "0.log"
    log.write_bytes(cri("stderr", "P", "Load weight ") + cri("stderr", "F", "begin."))
    reader = open_log(LogLocation(str(log), "cri"))
    assert isinstance(reader, DecodedTail)
    assert reader.read_new() == b"Load weight begin.\n"
    # WHEN the runtime rotates it (rename, new file) while a partial line is pending
    append(log, cri("stderr", "P", "torn by rotation"))
    assert reader.read_new() == b""
    os.rename(log, tmp_path / "0.log.20261130-233000")
    log.write_bytes(cri("stderr", "F", "Load weight end."))
    # THEN the old file is drained and the new one read from its start
    got = wait_until(lambda: reader.read_new(), timeout_s=5.0)
    assert got == b"torn by rotation\nLoad weight end.\n"  # the old file's unfinished line is not lost
    reader.close()


def test_docker_json_file_rotation(tmp_path: Path) -> None:
    log = tmp_path / "c-json.log"

    def entry(text: str) -> bytes:
        return json.dumps({"log": text, "stream": "stdout", "time": "2026-11-30T23:30:31.6Z"}).encode() + b"\n"

    log.write_bytes(entry("Init torch distributed begin.\n"))
    reader = open_log(LogLocation(str(log), "docker-json"))
    assert reader.read_new() == b"Init torch distributed begin.\n"
    os.rename(log, tmp_path / "c-json.log.1")  # json-file's max-size rotation
    log.write_bytes(entry("Init torch distributed ends.\n"))
    assert wait_until(lambda: reader.read_new(), timeout_s=5.0) == b"Init torch distributed ends.\n"
    reader.close()


def test_plain_location_is_a_plain_tail(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"a\n")
    reader = open_log(LogLocation(str(log)))
    assert reader.read_new() == b"a\n" and reader.path == str(log)
    reader.close()


# ---------------------------------------------------------------- journald

JOURNALD = next((p for p in ("/lib/systemd/systemd-journald", "/usr/lib/systemd/systemd-journald") if os.path.exists(p)), None)


def _journald_running() -> bool:
    """A live systemd-journald (`pgrep -r` skips zombies: a journald killed under a shell that never reaped it)."""
    found = subprocess.run(["pgrep", "-x", "-r", "R,S,D", "systemd-journal"], capture_output=True, check=False)
    return found.returncode == 0


def _journal_accepts() -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect("/run/systemd/journal/stdout")
        except OSError:
            return False
    return True


def _fd_is_socket(pid: int, fd: int) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    except OSError:
        return False


@pytest.fixture
def journald() -> Iterator[None]:
    """journald where present: the running one, else (as root) one started for the test."""
    if shutil.which("journalctl") is None or shutil.which("systemd-cat") is None:
        pytest.skip("no journalctl/systemd-cat here")
    started = None
    if not _journald_running():
        if JOURNALD is None or os.geteuid() != 0:
            pytest.skip("no systemd-journald here")
        os.makedirs("/run/systemd/journal", exist_ok=True)
        started = subprocess.Popen([JOURNALD], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
        wait_until(_journal_accepts, timeout_s=10.0)  # the socket file may be a dead journald's
    yield
    if started is not None:
        started.terminate()
        started.wait(timeout=10)


def test_a_server_writing_to_the_journal(journald: None, spawner: Spawner, tmp_path: Path) -> None:
    # GIVEN a process whose stdout and stderr are a journald stream (`systemd-cat`, a unit's default)
    marker = f"hw-{os.getpid()}-{tmp_path.name}"
    script = f"echo '{marker} Init torch distributed begin.'; sleep 1; echo '{marker} Load weight begin.' >&2; sleep 60"
    proc = spawner.start(["systemd-cat", "-t", "hangwatch-test", "sh", "-c", script])
    wait_until(lambda: _fd_is_socket(proc.pid, 2) or proc.poll() is not None, timeout_s=10.0)
    assert proc.poll() is None, f"systemd-cat exited with {proc.returncode}: journald does not take streams"
    # WHEN its log is found and read
    found = find_log(proc.pid)
    assert found.format == "journald" and found.journal_args[0] == f"_PID={proc.pid}"
    assert found.journal_args[1].startswith("--since=@")  # not an earlier process with the same pid
    reader = open_log(found)
    assert isinstance(reader, JournalTail)
    seen: list[bytes] = []
    wait_until(lambda: seen.append(reader.read_new()) or b"Load weight begin." in b"".join(seen), timeout_s=20.0)
    reader.close()
    # THEN both lines, in order, through `journalctl _PID=… -o cat --follow`
    lines = [line for line in b"".join(seen).splitlines() if marker.encode() in line]
    assert lines == [f"{marker} Init torch distributed begin.".encode(), f"{marker} Load weight begin.".encode()]


def test_journalctl_failing_is_a_missing_log(journald: None) -> None:
    from hangwatch.errors import SourceUnavailable

    reader = JournalTail(LogLocation(None, "journald", journal_args=("--no-such-flag",)))
    with pytest.raises(SourceUnavailable, match="journalctl exited with status"):
        wait_until(lambda: reader.read_new() or False, timeout_s=10.0)
    reader.close()
