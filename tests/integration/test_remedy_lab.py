"""`hangwatch run --remedy` on the real SGLang lab (CPU): a crash with a safe change is relaunched with
exactly that change and the server then answers its own health endpoint on its own port; a hang
with no safe change (the user's patch) is never relaunched. Real processes throughout: the real
`sglang.launch_server`, a real listener holding the port, the real SQLite history.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import sqlite3
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.liveprocs import kill_group, running
from helpers.livetools import HANGWATCH, Procs, _env, finish
from helpers.paths import ROOT

LAB_PYTHON = os.environ.get("HANGWATCH_LAB_PYTHON") or str(ROOT / ".lab-venv" / "bin" / "python")
needs_lab = pytest.mark.skipif(not Path(LAB_PYTHON).exists(), reason="no lab venv (lab/install.sh, or set HANGWATCH_LAB_PYTHON)")
RUN_TIMEOUT_S = 600  # two SGLang starts on 2 shared cores: 1-3 min each under load


@pytest.fixture
def procs() -> Iterator[Procs]:
    started = Procs()
    yield started
    started.stop()


@contextlib.contextmanager
def held_port(lo: int, hi: int) -> Iterator[int]:
    """A real listener on a free port of [lo, hi]: another process holding it."""
    from lab import _procs

    port = _procs.free_port(lo, hi)
    holder = socket.socket()
    holder.bind(("127.0.0.1", port))
    holder.listen(4)
    try:
        yield port
    finally:
        holder.close()


def sglang_argv(http_port: int, *extra: str, warmup: bool = False) -> list[str]:
    from lab import _procs
    from lab._runner import COMMON_FLAGS

    argv = [LAB_PYTHON, "-m", "sglang.launch_server", "--model-path", str(_procs.tiny_model()), "--port", str(http_port),
            *COMMON_FLAGS, "--max-total-tokens", "4096", *extra]  # fmt: skip
    return argv if warmup else [*argv, "--skip-server-warmup"]


def stop_server(verdicts: list[dict[str, Any]], argv: list[str]) -> None:
    """A ready server outlives `--exit-on ready`: stop every launcher the run named (its own session),
    known as ours by the serving port of `argv` (one the run stopped and reaped may be a stranger now)."""
    port = argv[argv.index("--port") + 1]
    for pid in {int(m) for v in verdicts for m in re.findall(r"pid (\d+)", str(v.get("server", "")))}:
        kill_group(pid, running("--port", port))


def relaunch_lines(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line["relaunch"] for line in lines if "relaunch" in line]


@pytest.mark.lab
@pytest.mark.slow
@needs_lab
def test_lab_taken_nccl_port_is_relaunched_on_a_free_one_and_the_server_answers(procs: Procs, tmp_path: Path) -> None:
    from lab import _procs

    http = _procs.free_port(31000, 31999)
    state = tmp_path / "state"
    env = _env(XDG_STATE_HOME=str(state), TMPDIR=str(tmp_path))
    with held_port(29600, 29699) as nccl:
        argv = sglang_argv(http, "--nccl-port", str(nccl))
        watch = procs.hangwatch(["run", "--json", "--remedy", "--exit-on", "ready", "--timeout", str(RUN_TIMEOUT_S),
                                 "--log", str(tmp_path / "run.log"), "--", *argv], env=env)  # fmt: skip
        code, lines, err = finish(watch, 2 * RUN_TIMEOUT_S + 60)
        try:
            assert code == 0, err[-3000:]
            (relaunch,) = relaunch_lines(lines)
            assert (relaunch["cause"], relaunch["id"]) == ("port_in_use", "sglang-nccl-port")
            before = lines[[i for i, line in enumerate(lines) if "relaunch" in line][0] - 1]
            assert (before["state"], before["cause"]) == ("crashed", "port_in_use")
            new = relaunch["argv"]
            # exactly one change: the nccl port; the model, the host and the serving port stay
            changed = [i for i, (a, b) in enumerate(zip(argv, new, strict=True)) if a != b]
            assert [argv[i - 1] for i in changed] == ["--nccl-port"] and new[changed[0]] != str(nccl)
            final = lines[-1]
            assert final["state"] == "ready" and "--nccl-port" in final["remedy"] and "port_in_use" in final["remedy"]
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/health", timeout=10) as resp:
                assert resp.status == 200
        finally:
            stop_server(lines, argv)
    # the history keeps the change for this setup; the next preflight of it proposes it
    with sqlite3.connect(state / "hangwatch" / "history.sqlite") as db:
        assert db.execute("SELECT cause, change_id FROM remedies").fetchall() == [("port_in_use", "sglang-nccl-port")]
    out = subprocess.run([*HANGWATCH, "preflight", "--", *argv], env=env, capture_output=True, text=True, timeout=120)
    assert "past starts of this setup needed --nccl-port" in out.stdout, out.stdout + out.stderr


@pytest.mark.lab
@pytest.mark.slow
@needs_lab
def test_lab_user_patch_hang_is_never_relaunched(procs: Procs, tmp_path: Path) -> None:
    from lab import _procs

    http = _procs.free_port(31000, 31999)
    env = _env(PYTHONPATH=str(ROOT / "lab" / "patches" / "site"), HS_DUMP_DIR=str(tmp_path / "hsdump"),
               XDG_STATE_HOME=str(tmp_path / "state"), TMPDIR=str(tmp_path))
    argv = sglang_argv(http, warmup=True)  # the patch blocks in the warm-up request's forward
    watch = procs.hangwatch(["run", "--json", "--remedy", "--exit-on", "stalled,crashed", "--timeout", "280",
                             "--log", str(tmp_path / "run.log"), "--", *argv], env=env)  # fmt: skip
    code, lines, err = finish(watch, 400)
    stop_server(lines, argv)
    assert code == 1, err[-3000:]
    assert relaunch_lines(lines) == []
    final = lines[-1]
    assert (final["state"], final["cause"]) == ("stalled", "patch_or_user_code"), final
    assert "no relaunch: patch_or_user_code has no safe launch change for sglang" in err
    assert err.count("hangwatch: started pid") == 1


@pytest.mark.lab
@needs_lab
def test_stale_torch_build_lock_whose_owner_is_gone_is_removed_and_the_server_starts(procs: Procs, tmp_path: Path) -> None:
    """The test server under the lab's python (torch): rank 0 waits on torch's own FileBaton for a
    `lock` that a killed build left an hour ago; `run --remedy` removes it, relaunches, ready."""
    from helpers.livetools import LAUNCHER, free_port

    ext = tmp_path / "torch_extensions"
    lock = ext / "hw_test_ext" / "lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    os.utime(lock, (lock.stat().st_atime - 3600, lock.stat().st_mtime - 3600))  # an old build's leftover
    argv = [LAB_PYTHON, str(LAUNCHER), "--model-path", "/models/tiny", "--tp-size", "2", "--port", str(free_port())]
    env = _env(HW_MODE="jit_lock", HW_DIE_WITH_PARENT="1", TORCH_EXTENSIONS_DIR=str(ext),
               XDG_STATE_HOME=str(tmp_path / "state"), HOME=str(tmp_path))
    watch = procs.hangwatch(["run", "--json", "--remedy", "--exit-on", "ready", "--timeout", "240",
                             "--log", str(tmp_path / "run.log"), "--", *argv], env=env)  # fmt: skip
    code, lines, err = finish(watch, 300)
    stop_server(lines, argv)
    assert code == 0, err[-3000:]
    (relaunch,) = relaunch_lines(lines)
    assert (relaunch["cause"], relaunch["id"], relaunch["removed"]) == ("jit_lock_deadlock", "stale-jit-lock", [str(lock)])
    assert relaunch["argv"] == argv  # nothing else changed
    assert lines[-1]["state"] == "ready" and "stale lock" in lines[-1]["remedy"]


VLLM_PYTHON = os.environ.get("HANGWATCH_VLLM_PYTHON") or str(ROOT / ".vllm-venv" / "bin" / "python")


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.skipif(not Path(VLLM_PYTHON).exists(), reason="no vLLM lab venv (lab/install_vllm.sh, or set HANGWATCH_VLLM_PYTHON)")
def test_lab_vllm_taken_master_port_of_a_two_node_launch_is_never_relaunched(procs: Procs, tmp_path: Path,
                                                                             short_tmp: Path) -> None:
    """Every node must be given the same --master-port: changing node 0's alone is not safe, so the
    crash is reported with its remedy text and nothing is relaunched."""
    from lab import _procs
    from lab._runner import VLLM_FLAGS
    from lab.vllm_scenarios import TP2_ENV, TP2_FLAGS

    http = _procs.free_port(31000, 31999)
    with held_port(29700, 29799) as master:
        argv = [VLLM_PYTHON, str(Path(VLLM_PYTHON).parent / "vllm"), "serve", str(_procs.tiny_model_hd64()),
                "--port", str(http), *VLLM_FLAGS, "--enforce-eager", *TP2_FLAGS, "--nnodes", "2", "--node-rank", "0",
                "--master-addr", "127.0.0.1", "--master-port", str(master)]  # fmt: skip
        env = _env(**TP2_ENV, VLLM_TARGET_DEVICE="cpu", VLLM_CPU_KVCACHE_SPACE="1", VLLM_CACHE_ROOT=str(tmp_path / "vc"),
                   TMPDIR=str(short_tmp), XDG_STATE_HOME=str(tmp_path / "state"))  # ZMQ IPC paths: 107 bytes
        watch = procs.hangwatch(["run", "--json", "--remedy", "--exit-on", "crashed", "--timeout", "400",
                                 "--log", str(tmp_path / "run.log"), "--", *argv], env=env)  # fmt: skip
        code, lines, err = finish(watch, 500)
    stop_server(lines, argv)
    assert code == 1, err[-3000:]
    assert relaunch_lines(lines) == []
    assert (lines[-1]["state"], lines[-1]["cause"]) == ("crashed", "port_in_use"), lines[-1]
    assert "no relaunch: port_in_use has no safe launch change for vllm" in err
    assert err.count("hangwatch: started pid") == 1
