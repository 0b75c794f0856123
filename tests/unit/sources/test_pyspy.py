"""dump_stacks / dump_many with the real py-spy on real processes."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from hangwatch.errors import SourceUnavailable
from hangwatch.sources.pyspy import PTRACE_HINT, dump_many, dump_stacks
from helpers.liveprocs import Spawner

PYSPY = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")  # as dump_stacks finds it
pytestmark = pytest.mark.skipif(not os.path.exists(PYSPY), reason="py-spy not installed")

SLEEPER = """
import json, os, threading, time

def wait_for_peer():
    time.sleep(60)

threading.Thread(target=wait_for_peer, name="peer-waiter", daemon=True).start()
open(os.environ["HW_READY"], "w").write(json.dumps(os.getpid()))
wait_for_peer()
"""


@pytest.fixture
def sleeper(spawner: Spawner, tmp_path: Path) -> int:
    proc, _ = spawner.ready(SLEEPER, tmp_path / "ready.json")
    time.sleep(0.2)  # past the write: both threads are in time.sleep
    return proc.pid


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_a_sleeping_process_has_its_python_frames(sleeper: int) -> None:
    stack, raw = dump_stacks(sleeper, label="TP0", pyspy=PYSPY)
    assert stack.label == "TP0" and stack.pid == sleeper and not stack.native
    assert raw.lstrip().startswith(b"[") and b'"frames"' in raw
    assert stack.source.file == "stacks/TP0.json"
    names = {thread.name for thread in stack.threads}
    assert "peer-waiter" in names
    for thread in stack.threads:
        assert thread.frames[0].function == "wait_for_peer"


def test_native_frames_and_no_nonblocking(sleeper: int) -> None:
    stack, _ = dump_stacks(sleeper, native=True, pyspy=PYSPY)  # nonblocking=True is dropped
    assert stack.native and stack.label == str(sleeper)
    functions = {frame.function for thread in stack.threads for frame in thread.frames}
    assert "wait_for_peer" in functions and "time_sleep" in functions


def test_a_dead_pid_is_gone(spawner: Spawner) -> None:
    child = spawner.python("pass")
    child.wait(timeout=10)
    with pytest.raises(SourceUnavailable, match=f"pid {child.pid} is gone"):
        dump_stacks(child.pid, pyspy=PYSPY)


def test_a_non_python_process(spawner: Spawner) -> None:
    proc = spawner.start(["sleep", "30"])
    time.sleep(0.1)
    with pytest.raises(SourceUnavailable, match="not a Python process"):
        dump_stacks(proc.pid, pyspy=PYSPY)


def test_missing_pyspy_names_the_install(sleeper: int) -> None:
    with pytest.raises(SourceUnavailable) as err:
        dump_stacks(sleeper, pyspy="/nonexistent/py-spy")
    assert err.value.hint == "pip install py-spy"
    with pytest.raises(SourceUnavailable, match="py-spy not found"):
        dump_many([(sleeper, "TP0")], pyspy="/nonexistent/py-spy")


def test_ptrace_refused_names_the_capability(sleeper: int, tmp_path: Path) -> None:
    # py-spy run as `nobody` may not trace our (root's) process: a real EACCES/EPERM
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run py-spy as another user")
    nobody = script(tmp_path, "py-spy", f'exec setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all {PYSPY} "$@"\n')
    with pytest.raises(SourceUnavailable) as err:
        dump_stacks(sleeper, pyspy=nobody)
    assert err.value.hint == PTRACE_HINT
    assert "SYS_PTRACE" in PTRACE_HINT and "ptrace_scope" in PTRACE_HINT and "capabilities" in PTRACE_HINT


def test_a_slow_dump_is_killed_at_its_timeout(sleeper: int, tmp_path: Path) -> None:
    slow = script(tmp_path, "py-spy", "exec sleep 30\n")
    started = time.monotonic()
    with pytest.raises(SourceUnavailable, match="longer than 0.5 s"):
        dump_stacks(sleeper, timeout_s=0.5, pyspy=slow)
    assert time.monotonic() - started < 3


def test_all_ranks_in_parallel_and_one_slow_rank_delays_no_other(spawner: Spawner, tmp_path: Path) -> None:
    # GIVEN three sleeping ranks, and a py-spy that hangs on the middle one only
    pids = [spawner.ready(SLEEPER, tmp_path / f"r{i}.json")[1] for i in range(3)]
    time.sleep(0.2)
    hangs_on_one = script(tmp_path, "py-spy", f'case " $* " in *" {pids[1]} "*) exec sleep 30;; esac\nexec {PYSPY} "$@"\n')
    # WHEN
    started = time.monotonic()
    dumps, missing = dump_many([(pid, f"TP{i}") for i, pid in enumerate(pids)], timeout_s=2.0, pyspy=hangs_on_one)
    elapsed = time.monotonic() - started
    # THEN the others are dumped, the slow one is a Missing, and the round took about one timeout
    assert [stack.label for stack, _ in dumps] == ["TP0", "TP2"]
    assert [m.reason.split(":")[0] for m in missing] == [f"TP1 (pid {pids[1]})"]
    assert "longer than 2 s" in missing[0].reason
    assert elapsed < 4


def test_dump_many_of_nothing(sleeper: int) -> None:
    assert dump_many([], pyspy=PYSPY) == ([], [])


def test_the_default_finds_pyspy_beside_python_when_not_on_path(sleeper: int, monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    if not (Path(sys.executable).parent / "py-spy").exists():
        pytest.skip("py-spy is not installed beside this Python")
    stack, _ = dump_stacks(sleeper)
    assert stack.pid == sleeper


# The torn frame a real `py-spy dump --nonblocking` printed for a vLLM rank mid-compile (a CI run):
# memory read while the interpreter rewrote it, which read as user code and made a false `stalled`
TORN_FRAME = '{"name": "?", "filename": "\\ubc00\\u2814\\u7f8c", "module": null, "short_filename": "\\ubc00\\u2814\\u7f8c", "line": -1450938592, "locals": null}'


def tearing_pyspy(tmp_path: Path, reads_torn: int) -> str:
    """The real py-spy, with the recorded torn frame put innermost in its first `reads_torn` dumps."""
    count, tear = tmp_path / "reads", tmp_path / "tear.py"
    tear.write_text(f"import json, sys\nthreads = json.load(sys.stdin)\nthreads[0]['frames'].insert(0, json.loads({TORN_FRAME!r}))\n"
                    "json.dump(threads, sys.stdout)\n")
    return script(tmp_path, "py-spy", f'echo x >> {count}\nif [ $(wc -l < {count}) -le {reads_torn} ]; then\n'
                                      f'  {PYSPY} "$@" | {sys.executable} {tear}\nelse\n  exec {PYSPY} "$@"\nfi\n')


def test_a_torn_read_is_read_again(sleeper: int, tmp_path: Path) -> None:
    stack, raw = dump_stacks(sleeper, pyspy=tearing_pyspy(tmp_path, reads_torn=1))
    assert (tmp_path / "reads").read_text().count("x") == 2
    assert all(frame.line is None or frame.line >= 0 for thread in stack.threads for frame in thread.frames)
    assert "wait_for_peer" in {frame.function for thread in stack.threads for frame in thread.frames}
    assert b"-1450938592" not in raw


def test_a_stack_torn_twice_is_missing_this_round(sleeper: int, tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailable, match="while it changed"):
        dump_stacks(sleeper, pyspy=tearing_pyspy(tmp_path, reads_torn=2))
