"""Process, port and log helpers for the lab. Standard library only.

The lab is driven from any python3 (the hangwatch venv, a test runner, the system python); only
the SGLang servers it starts run in the lab venv. So nothing here may import psutil or torch.
"""
from __future__ import annotations

import ctypes
import os
import random
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

LAB = Path(__file__).resolve().parent
ROOT = LAB.parent
WORK = LAB / ".work"
MARKER_ENV = "HANGWATCH_LAB_RUN"  # set in every server process: lets stop() find strays
_PR_SET_PDEATHSIG = 1


class LabError(RuntimeError):
    """The lab cannot run: not installed, no free port, ..."""


def lab_python() -> Path:
    """The lab venv's python; HANGWATCH_LAB_PYTHON or HANGWATCH_LAB_VENV override it."""
    if os.environ.get("HANGWATCH_LAB_PYTHON"):
        return Path(os.environ["HANGWATCH_LAB_PYTHON"])
    venv = Path(os.environ.get("HANGWATCH_LAB_VENV", ROOT / ".lab-venv"))
    python = venv / "bin" / "python"
    if not python.exists():
        raise LabError(f"lab venv missing ({python}); run lab/install.sh")
    return python


def tiny_model() -> Path:
    model = WORK / "tiny-llama"
    if not (model / "model.safetensors").exists():
        raise LabError(f"tiny model missing ({model}); run lab/install.sh")
    return model


def vllm_python() -> Path:
    """The vLLM lab venv's python; HANGWATCH_VLLM_PYTHON or HANGWATCH_VLLM_VENV override it."""
    if os.environ.get("HANGWATCH_VLLM_PYTHON"):
        return Path(os.environ["HANGWATCH_VLLM_PYTHON"])
    venv = Path(os.environ.get("HANGWATCH_VLLM_VENV", ROOT / ".vllm-venv"))
    python = venv / "bin" / "python"
    if not python.exists():
        raise LabError(f"vLLM lab venv missing ({python}); run lab/install_vllm.sh")
    return python


def tiny_model_hd64() -> Path:
    """The vLLM lab's model: vLLM's CPU attention needs head_dim 64 (lab/make_tiny_llama.py)."""
    model = WORK / "tiny-llama-hd64"
    if not (model / "model.safetensors").exists():
        raise LabError(f"tiny head_dim-64 model missing ({model}); run lab/install_vllm.sh")
    return model


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return not listening(port)  # a wildcard (0.0.0.0) listener does not always block 127.0.0.1


def free_port(lo: int, hi: int, span: int = 1) -> int:
    """A port in [lo, hi] whose `span` consecutive ports are all free; random start so that
    parallel tests rarely race for the same one."""
    candidates = list(range(lo, hi - span + 2))
    random.shuffle(candidates)
    for port in candidates:
        if all(_bindable(p) for p in range(port, port + span)):
            return port
    raise LabError(f"no free port in {lo}-{hi}")


def listening(port: int) -> bool:
    """Whether some socket LISTENs on `port` (read from /proc, so it never connects: a connect
    to a TCPStore would count as a worker joining)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def title(pid: int) -> str:
    """The process title (SGLang renames its children `sglang::scheduler_TP0`, ...)."""
    return _read(f"/proc/{pid}/cmdline").replace("\0", " ").strip()


def pgid_members(pgid: int, live: bool = False) -> list[int]:
    """Processes of group `pgid`; `live` leaves out zombies (a dead child not yet reaped)."""
    members = []
    for pid in all_pids():
        stat = _read(f"/proc/{pid}/stat")
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and int(fields[2]) == pgid and not (live and fields[0] == "Z"):
            members.append(pid)
    return members


def marked_pids(marker: str) -> list[int]:
    """Processes whose environment carries MARKER_ENV=marker (children included)."""
    needle = f"{MARKER_ENV}={marker}\0"
    return [p for p in all_pids() if p != os.getpid() and needle in _read(f"/proc/{p}/environ")]


def fifo_waiters(pids: Iterable[int]) -> list[tuple[int, int]]:
    """(pid, tid) of threads blocked opening a FIFO with no peer (kernel `wait_for_partner`)."""
    found = []
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            if _read(f"/proc/{pid}/task/{tid}/wchan") == "wait_for_partner":
                found.append((pid, int(tid)))
    return found


def rss_mib(pids: Iterable[int]) -> float:
    total_kib = 0
    for pid in pids:
        match = re.search(r"VmRSS:\s+(\d+)", _read(f"/proc/{pid}/status"))
        total_kib += int(match.group(1)) if match else 0
    return total_kib / 1024


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: if the thread that started it dies (run.py
    # SIGKILLed), the launcher gets SIGKILL, and SGLang's own children follow it
    # (SGLang calls prctl(PR_SET_PDEATHSIG) in its scheduler and detokenizer).
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


# How the server's stdout+stderr reach the log (`--output`): the ways production wrappers do it.
# The shell runs the launcher with `exec` in its pipeline side, so the server's fd 1/2 is the pipe.
OUTPUTS = {
    "file": None,  # the server writes the file itself (a plain `> log 2>&1`)
    "tee": 'exec "$@" 2>&1 | tee -a "$HW_LAB_LOG" > /dev/null',
    "cat": 'exec "$@" 2>&1 | cat >> "$HW_LAB_LOG"',  # a shell redirect behind the pipe
    # a wrapper that appends line by line, holding no file open: nothing on the host names the log
    "line-loop": 'exec "$@" 2>&1 | while IFS= read -r line; do printf "%s\\n" "$line" >> "$HW_LAB_LOG"; done',
}


def spawn(argv: Sequence[str], env: dict[str, str], log: Path, output: str = "file") -> subprocess.Popen:
    """Start argv in its own session (so its whole tree is one process group), output to log.

    With `output` other than "file", a shell runs `argv | READER` and the returned process is
    that shell: the launcher is its child, the reader its other child, all in one group."""
    log.parent.mkdir(parents=True, exist_ok=True)
    if output not in OUTPUTS:
        raise LabError(f"unknown output {output!r}; one of: {', '.join(OUTPUTS)}")
    script = OUTPUTS[output]
    if script is not None:
        return subprocess.Popen(
            ["sh", "-c", script, "sh", *argv], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env={**env, "HW_LAB_LOG": str(log)}, cwd=str(ROOT),
            start_new_session=True, preexec_fn=_die_with_parent,
        )
    with open(log, "ab") as out:
        return subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env=env, cwd=str(ROOT), start_new_session=True, preexec_fn=_die_with_parent,
        )


def _gone_to_a_stranger(leader: subprocess.Popen[bytes]) -> bool:
    """The group id is the leader's pid; once the leader is reaped, a process at that pid is a
    stranger heading its own group, and ours is empty (hangwatch.cli.launch.signal_group says why)."""
    return leader.returncode is not None and os.path.exists(f"/proc/{leader.pid}")


def _signal_group(leader: subprocess.Popen[bytes], sig: int) -> None:
    if _gone_to_a_stranger(leader):
        return
    try:
        os.killpg(leader.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_groups(leaders: Sequence[subprocess.Popen[bytes]], marker: str, grace: float, term_twice: bool = False) -> None:
    """SIGTERM each group, wait up to `grace` s, then SIGKILL the groups and any marked stray.

    A rank blocked in open() on a FIFO with the GIL held cannot run Python signal handlers, so
    SIGTERM alone is not enough there; SIGKILL always is.

    term_twice (vLLM): SIGTERM again 2 s later. vLLM 0.32 swallows the first SIGTERM while its
    engine starts (`zmq_socket_ctx` catches the KeyboardInterrupt its handler raises); the second
    one shuts the tree down in about 9 s. The group, not the leader: with `--output tee` the
    leader is the shell.
    """
    for leader in leaders:
        _signal_group(leader, signal.SIGTERM)
    if term_twice:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and any(_live_members(leader) for leader in leaders):
            time.sleep(0.2)
        for leader in leaders:
            _signal_group(leader, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_live_members(leader) for leader in leaders):
        time.sleep(0.2)
    for leader in leaders:
        _signal_group(leader, signal.SIGKILL)
    for pid in marked_pids(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _live_members(leader: subprocess.Popen[bytes]) -> list[int]:
    if _gone_to_a_stranger(leader):
        return []
    return pgid_members(leader.pid, live=True)


def shm_inodes(pids: Iterable[int]) -> set[int]:
    """Inodes of the /dev/shm files the processes hold open or mapped.

    Inodes, not names: glibc's sem_open maps a temp file and then links it as `sem.mp-*`, so
    /proc/PID/maps shows the deleted temp name. SGLang is SIGKILLed here (by stop(), or by its
    own kill_process_tree), which skips its unlink paths; stop() unlinks these afterwards.
    """
    try:
        shm = os.stat("/dev/shm")
    except OSError:
        return set()
    dev = f"{os.major(shm.st_dev):02x}:{os.minor(shm.st_dev):02x}"
    found: set[int] = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if st.st_dev == shm.st_dev:
                found.add(st.st_ino)
        for line in _read(f"/proc/{pid}/maps").splitlines():
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[3] == dev:
                found.add(int(fields[4]))
    return found


def unlink_shm(inodes: set[int], extra: Iterable[str] = ()) -> list[str]:
    """Unlink the /dev/shm entries with these inodes (and the `extra` paths)."""
    removed = []
    for path in [*Path("/dev/shm").iterdir(), *map(Path, extra)]:
        try:
            if path.is_file() and (str(path) in extra or path.stat().st_ino in inodes):
                path.unlink()
                removed.append(path.name)
        except OSError:
            pass
    return removed


def pid_stamped_shm(pids: Iterable[int]) -> set[str]:
    """SGLang's own segments carry their creator's pid: `sgl_shm_<kind>_<pid>_<rand>`."""
    return {str(f) for pid in pids for f in Path("/dev/shm").glob(f"sgl_shm_*_{pid}_*")}


class LogWatch:
    """Incremental reader of one log file: keeps every line seen, finds patterns in them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[str] = []
        self._pos = 0
        self._partial = ""

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._pos)
                chunk = f.read()
        except OSError:
            return
        self._pos += len(chunk)
        text = self._partial + chunk.decode(errors="replace")
        *full, self._partial = text.split("\n")
        self.lines.extend(full)

    def find(self, pattern: str) -> str | None:
        """The first line containing `pattern` (a plain substring)."""
        self.poll()
        return next((line for line in self.lines if pattern in line), None)
