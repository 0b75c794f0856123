"""Python stacks of live processes: the only module that runs py-spy.

    dump_stacks(pid) -> (ProcessStack, raw JSON bytes)     one process
    dump_many([(pid, label), ...]) -> (dumps, missing)     every rank at once, in parallel

py-spy's JSON is parsed by `hangwatch.parse.stacks.parse_pyspy_json`, the same parser the bundle
reader uses on stacks/NAME.json. Each failure becomes SourceUnavailable whose hint names the fix.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hangwatch.errors import SourceUnavailable
from hangwatch.model import Missing, ProcessStack, Source

__all__ = ["PTRACE_HINT", "dump_many", "dump_stacks"]

PTRACE_HINT = (
    "py-spy needs ptrace: run hangwatch as root or as the server's user with CAP_SYS_PTRACE "
    "(docker: `--cap-add SYS_PTRACE`; Kubernetes: `securityContext: {capabilities: {add: [SYS_PTRACE]}}`, "
    "and `shareProcessNamespace: true` for a sidecar); with Yama, `sysctl kernel.yama.ptrace_scope=0` "
    "or run as root"
)
_INSTALL_HINT = "pip install py-spy"
_GONE_HINT = "the process exited; see the log and procs for its exit code"
_DENIED = ("permission denied", "operation not permitted", "os error 1)", "os error 13)")
_GONE = ("no such process", "os error 3)", "check that the process is running")


def dump_stacks(
    pid: int,
    *,
    label: str | None = None,
    native: bool = False,
    nonblocking: bool = True,
    timeout_s: float = 5.0,
    pyspy: str = "py-spy",
) -> tuple[ProcessStack, bytes]:
    """`py-spy dump --pid PID --json [--nonblocking | --native]`, parsed.

    `nonblocking` reads the target without pausing it (cheap, can tear a stack now and then).
    `native` adds C/C++/CUDA frames but py-spy refuses it together with --nonblocking: a native
    unwind must stop the process (0.5-1 s on a torch process), so `native=True` drops
    `nonblocking`. On timeout py-spy is killed and the target resumes (ptrace detaches on exit).
    """
    command = _command(_resolve(pyspy), pid, native=native, nonblocking=nonblocking and not native)
    data = _run_pyspy(command, pid, timeout_s)
    threads = _json(data, pid)
    if "--nonblocking" in command and _torn(threads):
        data = _run_pyspy(command, pid, timeout_s)  # a torn read is rare: the next one is whole
        threads = _json(data, pid)
        if _torn(threads):
            raise SourceUnavailable("stacks", f"py-spy read pid {pid}'s stack while it changed (twice)", "it is retried next round")
    return _parse(threads, label or str(pid), pid), data


def dump_many(
    targets: Sequence[tuple[int, str]],
    *,
    native: bool = False,
    timeout_s: float = 5.0,
    max_workers: int = 8,
    pyspy: str = "py-spy",
) -> tuple[list[tuple[ProcessStack, bytes]], list[Missing]]:
    """Stacks of every (pid, label) in parallel; a failed rank becomes a Missing, in input order.

    Each dump has its own timeout, so a rank that hangs py-spy costs only its own slot. Raises
    SourceUnavailable when py-spy itself is not installed (no rank could be dumped).
    """
    _require(pyspy)
    if not targets:
        return [], []
    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(targets))), thread_name_prefix="py-spy") as pool:
        futures = [pool.submit(_dump_or_missing, pid, label, native, timeout_s, pyspy) for pid, label in targets]
        results = [future.result() for future in futures]
    dumps = [r for r in results if not isinstance(r, Missing)]
    missing = [r for r in results if isinstance(r, Missing)]
    return dumps, missing


def _dump_or_missing(pid: int, label: str, native: bool, timeout_s: float, pyspy: str) -> tuple[ProcessStack, bytes] | Missing:
    try:
        return dump_stacks(pid, label=label, native=native, timeout_s=timeout_s, pyspy=pyspy)
    except SourceUnavailable as exc:
        return Missing("stacks", f"{label} (pid {pid}): {exc.reason}", exc.hint)


def _command(pyspy: str, pid: int, *, native: bool, nonblocking: bool) -> list[str]:
    cmd = [pyspy, "dump", "--pid", str(pid), "--json"]
    if native:
        cmd.append("--native")
    elif nonblocking:
        cmd.append("--nonblocking")
    return cmd


def _resolve(pyspy: str) -> str:
    """`py-spy` from PATH, else the one pip installed beside this Python (a venv not on PATH)."""
    if shutil.which(pyspy) is None and os.sep not in pyspy:
        beside = os.path.join(os.path.dirname(sys.executable), pyspy)
        if os.access(beside, os.X_OK):
            return beside
    return pyspy


def _require(pyspy: str) -> None:
    if shutil.which(_resolve(pyspy)) is None:
        raise SourceUnavailable("stacks", f"py-spy not found ({pyspy!r} is not on PATH)", _INSTALL_HINT)


def _run_pyspy(cmd: list[str], pid: int, timeout_s: float) -> bytes:
    # stdout is read to the end by communicate(): py-spy on a pipe closed early dies with
    # "Error: Broken pipe". stdin is closed so it can never wait on a terminal.
    try:
        done = subprocess.run(cmd, capture_output=True, stdin=subprocess.DEVNULL, timeout=timeout_s, check=False)
    except FileNotFoundError as exc:
        raise SourceUnavailable("stacks", f"py-spy not found ({cmd[0]!r})", _INSTALL_HINT) from exc
    except PermissionError as exc:
        raise SourceUnavailable("stacks", f"cannot run {cmd[0]!r}: {exc.strerror}", _INSTALL_HINT) from exc
    except subprocess.TimeoutExpired as exc:
        raise SourceUnavailable(
            "stacks", f"py-spy dump of pid {pid} took longer than {timeout_s:g} s and was stopped",
            "the process may be stuck in the kernel (state D) or under heavy load; it is retried next round",
        ) from exc
    if done.returncode != 0:
        raise _failure(pid, done.stderr.decode("utf-8", "replace"))
    return done.stdout


def _failure(pid: int, stderr: str) -> SourceUnavailable:
    """Turn py-spy's error text into a reason and the fix for it."""
    message = _first_error_line(stderr)
    lower = stderr.lower()
    if not _exists(pid):
        return SourceUnavailable("stacks", f"pid {pid} is gone ({message})", _GONE_HINT)
    # before _GONE: py-spy says "Check that the process is running" on EACCES too
    if any(mark in lower for mark in _DENIED):
        return SourceUnavailable("stacks", f"py-spy may not trace pid {pid}: {message}", PTRACE_HINT)
    if any(mark in lower for mark in _GONE):
        return SourceUnavailable("stacks", f"pid {pid} is gone ({message})", _GONE_HINT)
    if "python version" in lower or "python interpreter" in lower:
        return SourceUnavailable(
            "stacks", f"pid {pid} is not a Python process py-spy can read ({message})",
            "it may not be Python, or is still starting (no interpreter yet); it is retried next round",
        )
    return SourceUnavailable("stacks", f"py-spy failed on pid {pid}: {message}", None)


def _first_error_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error:")]
    causes = [line for line in lines if line[:2].rstrip(":").isdigit() and "os error" in line]
    picked = (errors or lines or ["no error text"])[0]
    return f"{picked} {causes[0]}" if causes else picked


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def _json(data: bytes, pid: int) -> Any:
    try:
        return json.loads(data)
    except ValueError as exc:
        raise SourceUnavailable("stacks", f"py-spy printed no JSON for pid {pid}: {exc}", "upgrade py-spy (>= 0.3.14)") from exc


def _torn(threads: Any) -> bool:
    """A --nonblocking read can catch a frame while the interpreter rewrites it, and py-spy then
    prints memory that was never a frame: a negative line, a file name that is no path (seen on a
    vLLM rank compiling: `? (㬀⠔羌:-1450938592)`, which read as user code, a false `stalled`)."""
    for thread in threads if isinstance(threads, list) else ():
        frames = thread.get("frames") if isinstance(thread, dict) else None
        for frame in frames if isinstance(frames, list) else ():
            if isinstance(frame, dict) and frame.get("module") is None and not _whole_frame(frame):
                return True
    return False


def _whole_frame(frame: dict[str, Any]) -> bool:
    line, filename = frame.get("line"), frame.get("filename")
    if isinstance(line, int) and line < 0:
        return False
    return isinstance(filename, str) and (filename.startswith("<") or "/" in filename or filename.endswith((".py", ".pyx", ".pyw")))


def _parse(threads: Any, label: str, pid: int) -> ProcessStack:
    from hangwatch.parse.stacks import parse_pyspy_json

    return parse_pyspy_json(threads, label, Source(file=f"stacks/{label}.json", detail=f"pid {pid}"))
