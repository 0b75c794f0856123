"""The relaunch loop's decisions (bounded by --max-relaunches, only with --remedy), what it says, what
it remembers (a real SQLite history), and the clean stop of a real process tree with its leftovers."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hangwatch.cli.remedy import RemedyLoop, attach_hint, print_proposals, setup_key, stop_server
from hangwatch.model import Fact, State, Verdict
from hangwatch.sinks.store import HistoryStore
from hangwatch.watch.remedies import Shutdown
from helpers.recorded_host import RecordedHost

ARGV = ["python", "-m", "sglang.launch_server", "--model-path", "/m/llama", "--port", "30000", "--nccl-port", "29650"]
GRAPH = Verdict(State.STALLED, "cuda_graph_capture", 0.9)
PORT = Verdict(State.CRASHED, "port_in_use", 0.88, evidence=(Fact("port: 29650, name: EADDRINUSE", "server.log"),))
PATCH = Verdict(State.STALLED, "patch_or_user_code", 0.8)


def loop(**kw: object) -> RemedyLoop:
    kw.setdefault("host", RecordedHost(taken={29650}))
    return RemedyLoop(list(ARGV), {}, err=io.StringIO(), out=io.StringIO(), **kw)  # type: ignore[arg-type]


def test_without_remedy_nothing_is_relaunched() -> None:
    assert not loop(enabled=False).handoff(GRAPH)


def test_relaunches_are_bounded_by_max_relaunches() -> None:
    remedy = loop(max_relaunches=1)
    assert remedy.handoff(PORT)
    plan = remedy.take()
    assert plan.change.id == "sglang-nccl-port" and remedy.argv[-1] == "24311" and remedy.relaunches == 1
    assert not remedy.handoff(GRAPH)  # a second cause, but the bound is reached
    assert "--max-relaunches 1 reached" in remedy.err.getvalue()  # type: ignore[attr-defined]


def test_each_change_is_tried_once_and_changes_accumulate() -> None:
    remedy = loop(max_relaunches=5)
    assert remedy.handoff(GRAPH)
    remedy.take()
    assert not remedy.handoff(GRAPH)  # the same change again would not help
    assert remedy.handoff(PORT)
    remedy.take()
    assert "--disable-cuda-graph" in remedy.argv and "24311" in remedy.argv and remedy.relaunches == 2


def test_no_safe_change_is_said_once_and_never_relaunched() -> None:
    remedy = loop()
    for _ in range(3):
        assert not remedy.handoff(PATCH)
    said = remedy.err.getvalue()  # type: ignore[attr-defined]
    assert said.count("no relaunch: patch_or_user_code has no safe launch change for sglang") == 1


def test_the_json_line_before_a_relaunch() -> None:
    remedy = loop(json_out=True)
    assert remedy.handoff(PORT)
    old = list(remedy.argv)
    remedy.announce(remedy.take(), old, "sglang pid 1", 12.5)
    body = json.loads(remedy.out.getvalue())  # type: ignore[attr-defined]
    assert body["relaunch"]["cause"] == "port_in_use" and body["relaunch"]["change"] == "--nccl-port 29650 -> 24311"
    assert body["relaunch"]["argv"][-1] == "24311" and (body["n"], body["of"]) == (1, 2)


def test_the_terminal_shows_the_command_diff() -> None:
    remedy = loop()
    assert remedy.handoff(PORT)
    remedy.announce(remedy.take(), ARGV, "s", 1.0)
    text = remedy.err.getvalue()  # type: ignore[attr-defined]
    assert "relaunch 1/2: port_in_use -> --nccl-port 29650 -> 24311" in text
    assert "  - --nccl-port 29650\n  + --nccl-port 24311\n" in text


def test_ready_after_a_change_names_it_and_the_history_keeps_it_for_the_setup(tmp_path: Path) -> None:
    store = HistoryStore(str(tmp_path / "h.sqlite"))
    key = setup_key(ARGV)
    assert key is not None and key.engine == "sglang" and key.model == "/m/llama"
    remedy = loop(store=store, key=key)
    assert remedy.annotate(Verdict(State.READY, None, 1.0)).remedy is None  # nothing applied yet
    assert remedy.handoff(GRAPH)
    remedy.take()
    ready = remedy.annotate(Verdict(State.READY, None, 1.0))
    assert ready.remedy and "added --disable-cuda-graph" in ready.remedy and "slower decode" in ready.remedy
    remedy.annotate(Verdict(State.READY, None, 1.0))  # recorded once
    assert [r.change_id for r in store.remedies(key)] == ["sglang-disable-cuda-graph"]
    # the next run of the same setup: proposed without --remedy, applied before the launch with it
    proposing = loop(store=store, key=key, enabled=False)
    proposing.apply_learned()
    assert "past starts of this setup needed --disable-cuda-graph" in proposing.err.getvalue()  # type: ignore[attr-defined]
    assert proposing.argv == ARGV
    applying = loop(store=store, key=key)
    applying.apply_learned()
    assert applying.argv == [*ARGV, "--disable-cuda-graph"] and applying.relaunches == 0
    out = io.StringIO()
    assert print_proposals(ARGV, store, out)[0]["change"] == "sglang-disable-cuda-graph"
    assert "info      cuda_graph_capture" in out.getvalue()
    store.close()


def test_attach_prints_the_relaunch_command_instead() -> None:
    err, said = io.StringIO(), set[str]()
    attach_hint(GRAPH, " ".join(ARGV), "sglang", err, said)
    attach_hint(GRAPH, " ".join(ARGV), "sglang", err, said)
    text = err.getvalue()
    assert text.count("not relaunching (attach: not our process)") == 1
    assert f"{' '.join(ARGV)} --disable-cuda-graph" in text
    attach_hint(PATCH, " ".join(ARGV), "sglang", err, said)
    assert err.getvalue() == text


# ---------------------------------------------------------------- a real process tree

TREE = r"""
import os, signal, subprocess, sys, time
shm, lock = sys.argv[1], sys.argv[2]
signal.signal(signal.SIGTERM, lambda *a: None)   # a launcher that ignores the polite signal
child = subprocess.Popen([sys.executable, "-c", "import time, sys; f = open(sys.argv[1], 'w'); time.sleep(300)", shm])
held = open(lock, "w")
open(sys.argv[3], "w").write(str(child.pid))
time.sleep(300)
"""


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm")
def test_stop_server_kills_the_tree_and_removes_what_it_left(tmp_path: Path) -> None:
    shm = Path(f"/dev/shm/hangwatch-test-remedy-{os.getpid()}")
    other = Path(f"/dev/shm/hangwatch-test-remedy-other-{os.getpid()}")
    lock, pidfile = tmp_path / "build.lock", tmp_path / "child.pid"
    keeper = None
    popen = subprocess.Popen([sys.executable, "-c", TREE, str(shm), str(lock), str(pidfile)], start_new_session=True)
    try:
        other.write_text("x")
        keeper = subprocess.Popen([sys.executable, "-c", "import sys, time; f = open(sys.argv[1]); time.sleep(300)", str(other)])
        deadline = time.monotonic() + 20
        while not (pidfile.exists() and pidfile.read_text() and shm.exists()) and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(pidfile.read_text())
        started = time.monotonic()
        removed = stop_server(popen, Shutdown(signal=15, repeat_after_s=0.3, grace_s=1.0))
        assert time.monotonic() - started < 10
        assert popen.returncode is not None
        assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split(")")[-1][:3]
        assert str(shm) in removed and str(lock) in removed and not shm.exists() and not lock.exists()
        assert other.exists()  # another process still holds it
    finally:
        for proc in (popen, keeper):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        for path in (shm, other):
            path.unlink(missing_ok=True)
