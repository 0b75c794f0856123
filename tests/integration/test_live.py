"""`hangwatch attach / run / collect` on real processes that really block (programs/).

The test server's launcher and ranks carry SGLang's titles and log lines; rank 0 waits in a real
accept() for its peers, the launcher in a real recv() for its ranks. See programs/sglang/launch_server.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from helpers.liveprocs import wait_until
from helpers.livetools import LAUNCHER, Procs, finish, free_port, json_lines, server_cmd, wait_for_text

GATE = ["--json", "--exit-on", "ready,stalled,crashed", "--timeout", "20"]
LOADED_S = 60.0  # the test server's first lines, on a host that runs several suites at once


@pytest.fixture
def procs() -> Iterator[Procs]:
    started = Procs()
    yield started
    started.stop()


# ---------------------------------------------------------------- attach


def test_attach_healthy_server_is_ready(procs: Procs, tmp_path: Path) -> None:
    # GIVEN a server that starts fine
    log = tmp_path / "server.log"
    server = procs.server("healthy", log)
    # WHEN hangwatch gates on it
    code, lines, err = finish(procs.hangwatch(["attach", str(server.pid), *GATE]), 30)
    # THEN it is ready, exit 0
    assert code == 0, err
    assert lines[-1]["state"] == "ready"
    assert lines[-1]["phases"]["TP0"] and lines[-1]["phases"]["TP1"]


def test_attach_rank_waiting_for_a_peer_that_never_comes(procs: Procs, tmp_path: Path) -> None:
    # GIVEN rank 0 blocked in accept() for rank 1, which was never started
    log = tmp_path / "server.log"
    server = procs.server("tcpstore", log)
    wait_for_text(log, "Init torch distributed begin.")
    # WHEN attached
    code, lines, err = finish(procs.hangwatch(["attach", str(server.pid), *GATE]), 30)
    # THEN stalled in distributed init, exit 1. The wait is in this program's own file, so a
    # user-code rule competes with the distributed-init one: both are true of it.
    assert code == 1, err
    verdict = lines[-1]
    assert (verdict["state"], verdict["phase"]) == ("stalled", "dist_init")
    causes = [verdict["cause"], *(r["cause"] for r in verdict["runners_up"])]
    assert verdict["cause"] in ("nccl_init", "patch_or_user_code") and "nccl_init" in causes


def test_attach_sees_a_rank_killed_while_the_other_waits(procs: Procs, tmp_path: Path) -> None:
    # GIVEN two ranks; TP1 is SIGKILLed 3 s in, TP0 waits for it in accept() forever
    log = tmp_path / "server.log"
    server = procs.server("dead_rank", log, HW_DIE_AFTER="3")
    watch = procs.hangwatch(["attach", str(server.pid), "--json", "--timeout", "20"])
    # WHEN the rank dies THEN the verdict names it within a couple of ticks
    found = next((v for v in json_lines(watch, 20) if v["cause"] == "dead_rank"), None)
    assert found is not None, watch.stderr.read().decode() if watch.stderr else ""
    assert (found["state"], found["ranks"]) == ("stalled", ["TP1"])
    watch.send_signal(signal.SIGINT)
    assert watch.wait(timeout=10) == 130


def test_attach_pid_that_does_not_exist(procs: Procs) -> None:
    code, lines, err = finish(procs.hangwatch(["attach", "999999999", "--json"]), 20)
    assert code == 2 and lines == []
    assert err.startswith("hangwatch: error: no process with pid 999999999")


def test_attach_process_that_is_not_a_server(procs: Procs) -> None:
    sleeper = procs.start(["sleep", "30"])
    code, _, err = finish(procs.hangwatch(["attach", str(sleeper.pid), "--json"]), 20)
    assert code == 2
    assert "is not an SGLang or vLLM server" in err


def test_attach_without_pyspy_still_gives_a_verdict(procs: Procs, tmp_path: Path) -> None:
    # GIVEN py-spy cannot be found
    log = tmp_path / "server.log"
    server = procs.server("tcpstore", log)
    wait_for_text(log, "Init torch distributed begin.")
    env = {**os.environ, "HANGWATCH_PYSPY": str(tmp_path / "no-py-spy")}
    # WHEN attached THEN the verdict comes from the log, and `missing` says how to get stacks
    code, lines, err = finish(procs.hangwatch(["attach", str(server.pid), *GATE], env=env), 30)
    assert code == 1, err
    assert lines[-1]["cause"] == "nccl_init"
    stacks = [m for m in lines[-1]["missing"] if m["source"] == "stacks"]
    assert stacks and "py-spy" in stacks[0]["hint"]


def test_attach_timeout_prints_the_verdict(procs: Procs, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    server = procs.server("tcpstore", log)
    started = time.monotonic()
    code, lines, _ = finish(procs.hangwatch(["attach", str(server.pid), "--json", "--exit-on", "ready", "--timeout", "3"]), 20)
    assert code == 1 and time.monotonic() - started < 10
    assert lines[-1]["final"] is True and lines[-1]["timeout"] is True


def test_attach_serves_the_api(procs: Procs, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    server = procs.server("tcpstore", log)
    wait_for_text(log, "Init torch distributed begin.")
    port = free_port()
    watch = procs.hangwatch(["attach", str(server.pid), "--json", "--serve", "--port", str(port), "--timeout", "40"])
    assert any(line["state"] == "stalled" for line in json_lines(watch, 30))
    verdict = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/verdict", timeout=5))
    assert verdict["state"] == "stalled"
    bundle = urllib.request.urlopen(f"http://127.0.0.1:{port}/bundle", timeout=10).read()
    names = tarfile.open(fileobj=io.BytesIO(bundle)).getnames()
    assert any(name.endswith("meta.json") for name in names) and any("/stacks/TP0." in name for name in names)
    watch.send_signal(signal.SIGINT)
    assert watch.wait(timeout=10) == 130


# ---------------------------------------------------------------- run


def test_run_reports_an_exit_as_crashed_with_its_status(procs: Procs, tmp_path: Path) -> None:
    # GIVEN a server that exits with status 3 one second after start
    log = tmp_path / "run.log"
    # --no-preflight: this measures how fast an exit is seen, not the checks run before the launch
    watch = procs.hangwatch(["run", "--json", "--no-preflight", "--log", str(log), "--", *server_cmd(free_port())], env=_env(HW_MODE="exit"))
    code, lines, err = finish(watch, 30)
    # THEN crashed, with the exit status (how soon is a benchmark figure, not a test: bench/bench_live.py)
    assert code == 1, err
    assert lines[-1]["state"] == "crashed"
    assert "exited with status 3" in err
    assert "ValueError: the model config is invalid" in log.read_text()


def test_run_gate_on_a_healthy_server(procs: Procs, tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    watch = procs.hangwatch(["run", *GATE, "--log", str(log), "--", *server_cmd(free_port())], env=_env(HW_MODE="healthy"))
    code, lines, err = finish(watch, 30)
    procs.adopt_group(_started_pid(err))  # a ready server outlives the gate: stop it at teardown
    assert code == 0, err
    assert lines[-1]["state"] == "ready"
    assert "The server is fired up and ready to roll!" in err  # server output: stderr under --json
    assert "The server is fired up and ready to roll!" in log.read_text()


def test_run_forwards_ctrl_c_to_the_server(procs: Procs, tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    watch = procs.hangwatch(["run", "--json", "--log", str(log), "--", *server_cmd(free_port())], env=_env(HW_MODE="tcpstore"))
    wait_for_text(log, "Init torch distributed begin.")
    watch.send_signal(signal.SIGINT)
    code, _, err = finish(watch, 20)
    assert code == 1
    pid = _started_pid(err)
    assert f"server pid {pid} exited with status -2" in err
    assert _alive_in_group(pid) == []  # the ranks too


def test_run_started_ignoring_ctrl_c_leaves_it_ignored_as_the_server_does(procs: Procs, tmp_path: Path) -> None:
    # GIVEN `hangwatch run` started as a script's `cmd &` starts it: SIGINT ignored, which its server inherits
    log = tmp_path / "run.log"
    watch = procs.hangwatch(["run", "--json", "--log", str(log), "--", *server_cmd(free_port())], env=_env(HW_MODE="tcpstore"),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    wait_for_text(log, "Init torch distributed begin.")
    # WHEN a SIGINT comes, THEN both go on as the server alone would
    watch.send_signal(signal.SIGINT)
    with pytest.raises(subprocess.TimeoutExpired):
        watch.wait(timeout=3)
    # and a crash after it is a crash, not the end of a stop that was never passed on
    pid = _started_pid(next(line for line in iter(watch.stderr.readline, b"") if b"started pid" in line).decode())  # type: ignore[union-attr]
    os.kill(pid, signal.SIGKILL)
    code, lines, err = finish(watch, 20)
    assert lines[-1]["state"] == "crashed", (lines[-1]["state"], lines[-1]["evidence"][:3])


def test_run_a_command_that_cannot_start(procs: Procs, tmp_path: Path) -> None:
    code, _, err = finish(procs.hangwatch(["run", "--log", str(tmp_path / "x.log"), "--", str(tmp_path / "nope")]), 20)
    assert code == 2 and "cannot start" in err


# ---------------------------------------------------------------- collect


def test_collect_writes_a_bundle_that_diagnoses_the_same(procs: Procs, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    server = procs.server("tcpstore", log)
    wait_for_text(log, "Init torch distributed begin.")
    out = tmp_path / "bundle.tar.gz"
    collect = procs.hangwatch(["collect", str(server.pid), "-o", str(out), "--samples", "2", "--interval", "0.5"])
    stdout, stderr = collect.communicate(timeout=30)
    assert collect.returncode == 0, stderr
    live_cause = stdout.decode().strip().rsplit("(", 1)[1].rstrip(")")  # "wrote X: stalled (CAUSE)"
    with tarfile.open(out) as tar:
        files = {Path(m.name).relative_to(Path(m.name).parts[0]).as_posix(): tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    meta = json.loads(files["meta.json"])
    assert meta["format"] == "hangwatch-bundle/1" and meta["engine"] == "sglang" and meta["tp"] == 2
    assert b"Init torch distributed begin." in files["server.log"]
    tp0 = [name for name in files if name.startswith("stacks/TP0.")]
    assert len(tp0) >= 2 and b"accept" in files[tp0[-1]]
    # the bundle read back gives the classifier what the live loop gave it
    diagnose = procs.hangwatch(["diagnose", str(out), "--json"])
    stdout, stderr = diagnose.communicate(timeout=30)
    verdict = json.loads(stdout)
    assert (verdict["state"], verdict["cause"]) == ("stalled", live_cause), stderr


def _started_pid(stderr: str) -> int:
    return int(stderr.split("started pid ")[1].split(",")[0])


def _alive_in_group(pgid: int) -> list[int]:
    """Pids of processes in group `pgid` that are not zombies (PID 1 here may not reap orphans)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(entry.name))
    return alive


def _env(**extra: str) -> dict[str, str]:
    from helpers.livetools import _env as env

    return env(**extra)


# ---------------------------------------------------------------- what was not read


def test_a_joined_title_on_its_own_port_accuses_no_holder_of_the_default_port(procs: Procs, tmp_path: Path) -> None:
    # GIVEN a launcher whose argv is one space-joined string (--port P, not the default) and a
    # stranger on the default port 30000 (ours, or whoever already holds it on this host)
    stranger = socket.socket()
    with contextlib.suppress(OSError):
        stranger.bind(("127.0.0.1", 30000))
        stranger.listen()
    log = tmp_path / "server.log"
    try:
        server = procs.server("tcpstore", log, HW_JOINED_TITLE="1")
        wait_for_text(log, "Init torch distributed begin.", LOADED_S)
        assert b"\x00" not in Path(f"/proc/{server.pid}/cmdline").read_bytes().rstrip(b"\x00")
        # WHEN attached
        code, lines, err = finish(procs.hangwatch(["attach", str(server.pid), *GATE]), 30)
    finally:
        stranger.close()
    # THEN stalled for what it is; the default port that it does not use accuses nobody
    assert code == 1, err
    assert lines and all(line["cause"] != "port_in_use" for line in lines)
    assert lines[-1]["state"] == "stalled" and lines[-1]["phase"] == "dist_init"


# ---------------------------------------------------------------- stops are stops


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_of_run_ends_as_stopped_not_crashed(procs: Procs, tmp_path: Path, signum: int) -> None:
    # GIVEN `hangwatch run` watching a server stuck in its rendezvous
    log = tmp_path / "run.log"
    watch = procs.hangwatch(["run", "--json", "--no-preflight", "--log", str(log), "--", *server_cmd(free_port())],
                            env=_env(HW_MODE="tcpstore"))
    wait_for_text(log, "Init torch distributed begin.", LOADED_S)
    # WHEN the user stops it (Ctrl-C, or SIGTERM from a supervisor)
    watch.send_signal(signum)
    code, lines, err = finish(watch, 20)
    # THEN the server is stopped, and the last verdict says so: no crash, no dead rank
    pid = _started_pid(err)
    assert f"server pid {pid} exited with status -{int(signum)}" in err
    assert lines[-1]["state"] == "stopped" and lines[-1]["cause"] is None, lines[-1]
    assert all(line["state"] != "crashed" and line["cause"] != "dead_rank" for line in lines)
    assert code == 1


def test_the_orchestrators_sigterm_to_the_server_is_a_stop(procs: Procs, tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    watch = procs.hangwatch(["run", "--json", "--no-preflight", "--log", str(log), "--", *server_cmd(free_port())],
                            env=_env(HW_MODE="tcpstore"))
    wait_for_text(log, "Init torch distributed begin.", LOADED_S)
    launcher = wait_until(lambda: [c for c in psutil.Process(watch.pid).children() if "launch_server" in " ".join(c.cmdline())])
    os.kill(launcher[0].pid, signal.SIGTERM)  # to the launcher only, as an orchestrator does
    code, lines, err = finish(watch, 20)
    assert lines[-1]["state"] == "stopped", (lines[-1], err)
    assert any("exited on SIGTERM" in fact["text"] for fact in lines[-1]["evidence"]), lines[-1]["evidence"]


def test_a_crash_during_a_stop_is_a_crash(procs: Procs, tmp_path: Path) -> None:
    # the launcher aborts (SIGABRT) while it handles the SIGTERM: a crash, stop or no stop
    log = tmp_path / "run.log"
    watch = procs.hangwatch(["run", "--json", "--no-preflight", "--log", str(log), "--", *server_cmd(free_port())],
                            env=_env(HW_MODE="tcpstore", HW_ABORT_ON_SIGTERM="1"))
    wait_for_text(log, "Init torch distributed begin.", LOADED_S)
    watch.send_signal(signal.SIGTERM)
    code, lines, err = finish(watch, 20)
    assert f"exited with status -{int(signal.SIGABRT)}" in err
    assert lines[-1]["state"] == "crashed", lines[-1]


# ---------------------------------------------------------------- history per setup


def _model_dir(root: Path, layers: int) -> Path:
    (root / "model").mkdir(parents=True)
    (root / "model" / "config.json").write_text(json.dumps({"num_hidden_layers": layers}))
    return root


def _relative_model_cmd() -> list[str]:
    return [sys.executable, str(LAUNCHER), "--model-path", "model", "--tp-size", "2", "--port", str(free_port())]


def _history(port: int, query: str = "") -> dict:
    return json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/history{query}", timeout=10))


def test_two_servers_on_one_default_history_share_neither_budgets_nor_episodes(procs: Procs, tmp_path: Path) -> None:
    # GIVEN two models, each given as the same relative text `--model-path model` from its own directory
    a, b = _model_dir(tmp_path / "a", 2), _model_dir(tmp_path / "b", 4)
    # server A started fine once: its phase durations are in the default history
    gate = ["--json", "--exit-on", "ready,stalled,crashed", "--timeout", str(LOADED_S)]
    code, _, err = finish(procs.hangwatch(["run", *gate, "--no-preflight", "--log", str(tmp_path / "a1.log"), "--",
                                           *_relative_model_cmd()], env=_env(HW_MODE="healthy"), cwd=a), LOADED_S + 30)
    procs.adopt_group(_started_pid(err))
    assert code == 0, err
    # WHEN A starts again and B starts, both stuck, both served, on the same default history
    ports = {name: free_port() for name in ("a", "b")}
    watches = {name: procs.hangwatch(["run", "--json", "--no-preflight", "--serve", "--port", str(ports[name]),
                                      "--log", str(tmp_path / f"{name}2.log"), "--", *_relative_model_cmd()],
                                     env=_env(HW_MODE="tcpstore"), cwd=root)
               for name, root in (("a", a), ("b", b))}
    seen = {name: next(line for line in json_lines(watch, LOADED_S) if line["state"] == "stalled")
            for name, watch in watches.items()}
    histories = {name: _history(port) for name, port in ports.items()}
    everything = {name: _history(port, "?all=1") for name, port in ports.items()}
    for watch in watches.values():
        watch.send_signal(signal.SIGINT)
    for watch in watches.values():
        watch.communicate(timeout=30)
    # THEN A's learned start gives A an ETA (its setup matched) and B none (another model)
    assert seen["a"]["eta"] is not None and seen["a"]["eta"]["from_starts"] == 1, seen["a"]
    assert seen["b"]["eta"] is None, seen["b"]
    # and each page's history holds its own server's episode only, even when all are asked for
    for name, other in (("a", "b"), ("b", "a")):
        assert [e["server"] for e in histories[name]["episodes"]] == [seen[name]["server"]]
        assert seen[other]["server"] not in json.dumps(everything[name])


def test_a_shared_history_file_closes_the_episodes_of_gone_servers(procs: Procs, tmp_path: Path) -> None:
    # GIVEN a history file an agent of server A left an open stall episode in, A since gone
    history = tmp_path / "shared.sqlite"
    first = procs.server("tcpstore", tmp_path / "a.log")
    wait_for_text(tmp_path / "a.log", "Init torch distributed begin.", LOADED_S)
    port = free_port()
    watch = procs.hangwatch(["attach", str(first.pid), "--json", "--serve", "--port", str(port), "--history", str(history),
                             "--timeout", "60"])
    stalled_a = next(line for line in json_lines(watch, 40) if line["state"] == "stalled")
    wait_until(lambda: _history(port)["episodes"], timeout_s=15)
    watch.send_signal(signal.SIGINT)
    watch.communicate(timeout=20)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    # WHEN an agent of server B opens the same file
    second = procs.server("tcpstore", tmp_path / "b.log")
    wait_for_text(tmp_path / "b.log", "Init torch distributed begin.", LOADED_S)
    port = free_port()
    watch = procs.hangwatch(["attach", str(second.pid), "--json", "--serve", "--port", str(port), "--history", str(history),
                             "--timeout", "60"])
    stalled_b = next(line for line in json_lines(watch, 40) if line["state"] == "stalled")
    wait_until(lambda: _history(port)["episodes"], timeout_s=15)
    mine, every = _history(port), _history(port, "?all=1")
    watch.send_signal(signal.SIGINT)
    watch.communicate(timeout=20)
    # THEN B's history is B's; asked for all, A's episode is there and ended
    assert {e["server"] for e in mine["episodes"]} == {stalled_b["server"]}
    assert {t["server"] for t in mine["transitions"]} == {stalled_b["server"]}
    ended = {e["server"]: e["ended"] for e in every["episodes"]}
    assert ended[stalled_a["server"]] is not None and ended[stalled_b["server"]] is None


def test_attach_to_a_server_interrupted_in_its_terminal_ends_the_gate_as_stopped(procs: Procs, tmp_path: Path) -> None:
    # GIVEN attach gating on a stuck server (not hangwatch's child: its exit status is unknown here)
    log = tmp_path / "server.log"
    server = procs.server("tcpstore", log, HW_DIE_WITH_PARENT="1")
    wait_for_text(log, "Init torch distributed begin.", LOADED_S)
    watch = procs.hangwatch(["attach", str(server.pid), "--json", "--exit-on", "ready,crashed", "--timeout", "120"])
    next(json_lines(watch, LOADED_S))  # attached: it watches the server now
    # WHEN the server gets the Ctrl-C of its terminal (its log ends in the KeyboardInterrupt)
    server.send_signal(signal.SIGINT)
    code, lines, err = finish(watch, LOADED_S)
    # THEN the gate ends at once on `stopped`, not at its timeout, and not as a crash
    assert "KeyboardInterrupt" in log.read_text()
    assert code == 1 and lines[-1]["state"] == "stopped", (lines[-1:], err[-2000:])
    assert all(line["state"] != "crashed" for line in lines) and lines[-1]["t"] < 100
