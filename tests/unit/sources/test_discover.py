"""discover() on real process trees started from tests/data/fake_servers."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch.errors import TargetError
from hangwatch.sources.discover import Server, discover, log_path, read_cmdline
from helpers.liveprocs import FAKE_SERVERS, Spawner, start_fake_server, wait_json, wait_until


@pytest.fixture
def spawner() -> Iterator[Spawner]:
    spawner = Spawner()
    yield spawner
    spawner.stop()


def test_from_the_launcher(spawner: Spawner, tmp_path: Path) -> None:
    # GIVEN a fake SGLang launcher logging to a file, with a secret flag and a mixed environment
    log = tmp_path / "server.log"
    args = ["--model-path", "/models/tiny", "--tp", "2", "--port", "31001", "--host", "0.0.0.0", "--api-key", "sk-secret"]
    env = {"NCCL_DEBUG": "INFO", "HF_TOKEN": "hf_secret", "SOME_UNRELATED": "x"}
    launcher, _ = start_fake_server(spawner, tmp_path, "sglang", args, log=log, env=env)
    # WHEN
    server = discover(launcher.pid)
    # THEN
    assert server.engine == "sglang" and server.launcher_pid == launcher.pid
    assert server.cmdline.startswith(shlex.join([sys.executable, "-m", "sglang.launch_server"]))
    assert "sk-secret" not in server.cmdline and "--api-key <redacted>" in server.cmdline
    assert server.flags["tp"] == "2" and server.flags["model"] == "/models/tiny"
    assert (server.host, server.port) == ("0.0.0.0", 31001)
    assert server.log_path == str(log)
    assert server.env["NCCL_DEBUG"] == "INFO" and server.env["HF_TOKEN"] == "<redacted>"
    assert "SOME_UNRELATED" not in server.env and "PATH" not in server.env


def test_from_a_scheduler_walks_up_to_its_launcher(spawner: Spawner, tmp_path: Path) -> None:
    launcher, info = start_fake_server(spawner, tmp_path, "sglang", ["--tp", "2"])
    for title in ("sglang::scheduler_TP1", "sglang::detokenizer"):
        server = discover(info["children"][title])
        assert (server.engine, server.launcher_pid) == ("sglang", launcher.pid)


def test_defaults_without_flags_and_a_log_on_a_pipe(spawner: Spawner, tmp_path: Path) -> None:
    launcher, _ = start_fake_server(spawner, tmp_path, "sglang")  # stdout/stderr: /dev/null
    server = discover(launcher.pid)
    assert (server.host, server.port, server.log_path) == ("127.0.0.1", 30000, None)


def test_vllm(spawner: Spawner, tmp_path: Path) -> None:
    launcher, info = start_fake_server(spawner, tmp_path, "vllm", ["--model", "m"])
    server = discover(info["children"]["VLLM::EngineCore"])
    assert (server.engine, server.launcher_pid, server.port) == ("vllm", launcher.pid, 8000)


def test_from_a_container_init_walks_down(spawner: Spawner, tmp_path: Path) -> None:
    # GIVEN init -> sh -c "python -m sglang.launch_server ..." (the shell stays: it runs two commands)
    ready = tmp_path / "ready.json"
    command = f"{shlex.quote(sys.executable)} -m sglang.launch_server --port 30555; true"
    env = {**os.environ, "PYTHONPATH": str(FAKE_SERVERS), "HW_READY": str(ready)}
    init = spawner.start([sys.executable, "-c", f"import subprocess; subprocess.run(['sh', '-c', {command!r}])"], env=env)
    info = wait_json(ready, init, 15.0)
    for title, pid in info["children"].items():
        spawner.adopt(pid, title)
    # WHEN / THEN
    server = discover(init.pid)
    assert (server.launcher_pid, server.port) == (info["pid"], 30555)


def test_a_deleted_log_is_read_through_the_fd(spawner: Spawner, tmp_path: Path) -> None:
    log = tmp_path / "gone.log"
    launcher, _ = start_fake_server(spawner, tmp_path, "sglang", log=log)
    log.unlink()
    path = discover(launcher.pid).log_path
    assert path == f"/proc/{launcher.pid}/fd/2"
    assert b"[fake] launcher started" in Path(path).read_bytes()


def test_no_such_pid() -> None:
    with pytest.raises(TargetError, match="no process with pid 999999999"):
        discover(999999999)


def test_not_a_server(spawner: Spawner) -> None:
    plain = spawner.python("import time; time.sleep(60)")
    wait_until(lambda: read_cmdline(plain.pid))  # empty for an instant after a vfork+exec
    with pytest.raises(TargetError) as err:
        discover(plain.pid)
    message = str(err.value)
    assert message.startswith(f"pid {plain.pid} ({sys.executable} -c") and "not an SGLang or vLLM server" in message


def test_read_cmdline_strips_title_padding(tmp_path: Path) -> None:
    # setproctitle leaves the title followed by NUL padding: a fake /proc entry shows it
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "cmdline").write_bytes(b"sglang::scheduler_DP0_TP3" + b"\x00" * 40)
    assert read_cmdline(7, proc_root=str(tmp_path)) == "sglang::scheduler_DP0_TP3"
    assert read_cmdline(8, proc_root=str(tmp_path)) is None
    assert log_path(7, proc_root=str(tmp_path)) is None


def test_server_is_plain_data() -> None:
    server = Server(engine="vllm", launcher_pid=1, cmdline="vllm serve m", port=8000)
    assert server.host == "127.0.0.1" and server.env == {} and server.log_path is None
    with pytest.raises(AttributeError):
        server.port = 1  # type: ignore[misc]


def test_a_script_that_embeds_the_engine(spawner: Spawner, tmp_path: Path) -> None:
    # GIVEN a user's script (no launcher command line) whose child is titled as SGLang's scheduler
    ready = tmp_path / "ready.json"
    code = (
        "import json, os, subprocess, sys, time\n"
        "child = subprocess.Popen(['sglang::scheduler_TP0', '-c', 'import time; time.sleep(60)'], executable=sys.executable)\n"
        f"open({str(ready)!r}, 'w').write(json.dumps({{'pid': os.getpid(), 'child': child.pid}}))\n"
        "time.sleep(60)\n"
    )
    script = spawner.python(code)
    info = wait_json(ready, script, 15.0)
    spawner.adopt(info["child"], "sglang::scheduler_TP0")
    wait_until(lambda: (read_cmdline(info["child"]) or "").startswith("sglang::scheduler"))
    # WHEN discovery starts from the script or from its rank
    # THEN the script is the launcher, and the engine comes from the rank's title
    for start in (script.pid, info["child"]):
        server = discover(start)
        assert (server.launcher_pid, server.engine, server.port) == (script.pid, "sglang", 30000)


def test_a_launcher_title_joined_into_one_string_is_split_as_its_shell_did(spawner: Spawner, tmp_path: Path) -> None:
    # GIVEN a launcher whose argv setproctitle replaced with one space-joined string
    title = "python3 -m sglang.launch_server --model-path '/models/my model' --port 31234 --tp-size 2"
    proc = spawner.python(f"import setproctitle, time; setproctitle.setproctitle({title!r}); time.sleep(60)")
    wait_until(lambda: (read_cmdline(proc.pid) or "").startswith("python3 -m"))
    raw = Path(f"/proc/{proc.pid}/cmdline").read_bytes().rstrip(b"\x00")
    assert b"\x00" not in raw  # one argument: what this test is about
    # WHEN / THEN its flags are read, not the engine's defaults assumed
    server = discover(proc.pid)
    assert (server.launcher_pid, server.port) == (proc.pid, 31234)
    assert server.flags["tp"] == "2" and server.flags["model-path"] == "/models/my model"


def test_a_title_with_spaces_that_is_no_launcher_stays_whole(tmp_path: Path) -> None:
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "cmdline").write_bytes(b"my worker: idle since 3 s" + b"\x00" * 8)
    assert read_cmdline(7, proc_root=str(tmp_path)) == "'my worker: idle since 3 s'"


def test_a_process_running_several_things_is_no_servers_wrapper(spawner: Spawner, tmp_path: Path) -> None:
    # GIVEN a process like a host's init or a login shell: three children, one of them a server
    ready = tmp_path / "ready.json"
    env = {**os.environ, "PYTHONPATH": str(FAKE_SERVERS), "HW_READY": str(ready)}
    code = (
        "import subprocess, sys, time\n"
        "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']) for _ in range(2)]\n"
        "kids.append(subprocess.Popen([sys.executable, '-m', 'sglang.launch_server', '--port', '30777']))\n"
        "time.sleep(60)\n"
    )
    host = spawner.python(code, env=env)
    info = wait_json(ready, host, 15.0)
    for title, pid in info["children"].items():
        spawner.adopt(pid, title)
    wait_until(lambda: len(Path(f"/proc/{host.pid}/task/{host.pid}/children").read_text().split()) == 3)
    # WHEN / THEN: it says so, and adopts no server from under it
    with pytest.raises(TargetError, match=rf"pid {host.pid} .* is not an SGLang or vLLM server"):
        discover(host.pid)
    # the server itself is still found from its own pid
    assert discover(info["pid"]).port == 30777


def test_a_server_a_shell_runs_as_a_job_of_its_own_is_not_the_shells(spawner: Spawner, tmp_path: Path) -> None:
    # GIVEN an interactive shell's way of running a command: the server in a process group of its own
    ready = tmp_path / "ready.json"
    env = {**os.environ, "PYTHONPATH": str(FAKE_SERVERS), "HW_READY": str(ready)}
    code = ("import os, subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-m', 'sglang.launch_server', '--port', '30778'], preexec_fn=os.setpgrp)\n"
            "time.sleep(60)\n")
    shell = spawner.python(code, env=env)
    info = wait_json(ready, shell, 15.0)
    for title, pid in info["children"].items():
        spawner.adopt(pid, title)
    try:
        # WHEN / THEN the shell is no server; the server is found from its own pid
        with pytest.raises(TargetError, match="is not an SGLang or vLLM server"):
            discover(shell.pid)
        assert discover(info["pid"]).port == 30778
    finally:
        os.killpg(info["pid"], 9)  # the launcher's own group, outside the spawner's
