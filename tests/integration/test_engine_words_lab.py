"""The engines' own raise sites, live: real SGLang and vLLM servers on CPU started into errors they
raise themselves, watched by `hangwatch run`, then read back by `hangwatch diagnose`. The mined
index (docs/engine-words.md) must find the site that raised the error and the cause the table
(hangwatch/data/raise_site_causes.yaml) gives it — from the real text, not a copied string. And the
index's log formats (parse/logformats.py) read a real start's phases with no hand marker at all.

Slow: each start is a real server (30-140 s on two shared cores); one start per test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from hangwatch.bundle.read import FORMAT
from hangwatch.engines import get_engine, rank_positions
from hangwatch.model import Phase
from hangwatch.parse.logformats import FORMAT_KEY, formats_for, read_phases
from hangwatch.parse.logs import read_log_lines
from lab import _procs
from lab._runner import COMMON_FLAGS

HANGWATCH = str(Path(sys.executable).parent / "hangwatch")
LAB_PYTHON = os.environ.get("HANGWATCH_LAB_PYTHON", "")
VLLM_PYTHON = os.environ.get("HANGWATCH_VLLM_PYTHON", "")
START_TIMEOUT_S = 540  # a vLLM start under load on 2 shared cores; never a timing assertion
MARKER = "HANGWATCH_ENGINE_WORDS_RUN"

pytestmark = [pytest.mark.lab, pytest.mark.slow]
needs_sglang = pytest.mark.skipif(not LAB_PYTHON, reason="HANGWATCH_LAB_PYTHON not set (lab/install.sh prints it)")
needs_vllm = pytest.mark.skipif(not VLLM_PYTHON, reason="HANGWATCH_VLLM_PYTHON not set (lab/install_vllm.sh prints it)")
# the lab's flags with its KV pool: without --max-total-tokens SGLang sizes the pool from the host's
# memory, and three such starts side by side (CI runs lab tests three at a time) get one OOM-killed
SGLANG_FLAGS = [*COMMON_FLAGS, "--max-total-tokens", "4096", "--skip-server-warmup"]
VLLM_FLAGS = ["--host", "127.0.0.1", "--dtype", "float32", "--disable-log-stats", "--enforce-eager"]


@pytest.fixture
def marker() -> Iterator[str]:
    """A mark in the environment of everything a test starts; whatever still carries it at the end
    (vLLM's EngineCore can outlive its API server) is killed by pid."""
    mark = uuid.uuid4().hex
    yield mark
    for pid in _procs_with(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _procs_with(mark: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if f"{MARKER}={mark}".encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _run(argv: list[str], env: dict[str, str], mark: str, tmp: Path) -> tuple[list[dict[str, Any]], Path]:
    """`hangwatch run` of the real server until it crashes; the verdicts it printed, and its log."""
    log = tmp / "server.log"
    cmd = [HANGWATCH, "run", "--json", "--exit-on", "crashed,ready", "--timeout", str(START_TIMEOUT_S),
           "--no-preflight", "--log", str(log), "--", *argv]  # fmt: skip
    # TMPDIR short: vLLM's ZMQ IPC paths under it must fit 107 bytes (tmp_path is longer under xdist)
    short = Path(tempfile.mkdtemp(prefix="hw-", dir="/tmp"))
    full_env = {**os.environ, **env, MARKER: mark, "PYTHONUNBUFFERED": "1", "TMPDIR": str(short)}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=START_TIMEOUT_S + 60)
    finally:
        shutil.rmtree(short, ignore_errors=True)
    verdicts = [json.loads(line) for line in done.stdout.splitlines() if line.strip().startswith("{")]
    assert verdicts, done.stderr[-3000:]
    return verdicts, log


def _diagnose(log: Path, engine: str, argv: list[str], tmp: Path) -> dict[str, Any]:
    bundle = tmp / "bundle"
    bundle.mkdir()
    shutil.copy(log, bundle / "server.log")
    (bundle / "meta.json").write_text(json.dumps({"format": FORMAT, "engine": engine}))
    (bundle / "cmdline.txt").write_text(" ".join(argv))
    done = subprocess.run([HANGWATCH, "diagnose", str(bundle), "--json"], capture_output=True, text=True, timeout=300)
    assert done.stdout, done.stderr[-3000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _site_fact(verdict: dict[str, Any], where: str, *, raised: str = "raised by") -> str:
    """The evidence naming the site: "raised by" a mined template, "raised in" a traceback's frame."""
    texts = [e["text"] for e in verdict["evidence"]]
    found = [t for t in texts if t.startswith(f"{raised} {where}")]
    assert found, json.dumps(verdict, indent=1)[:4000]
    return found[0]


@needs_vllm
def test_vllm_kv_cache_that_cannot_hold_one_request(tmp_path: Path, marker: str) -> None:
    # GIVEN a real vLLM start whose KV cache (64 KiB) cannot hold one request of max_model_len 512
    argv = [str(Path(VLLM_PYTHON).parent / "vllm"), "serve", str(_procs.tiny_model_hd64()),
            "--port", str(_procs.free_port(31000, 31999)), *VLLM_FLAGS, "--max-model-len", "512",
            "--kv-cache-memory-bytes", "65536"]  # fmt: skip
    env = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CACHE_ROOT": str(tmp_path / "vllm-cache")}
    # WHEN hangwatch watches it from its first second, and diagnoses its log afterwards
    verdicts, log = _run(argv, env, marker, tmp_path)
    live, offline = verdicts[-1], _diagnose(log, "vllm", argv, tmp_path)
    # THEN both trace vLLM's own ValueError to the KV cache check that raised it, and name the cause
    for verdict in (live, offline):
        assert verdict["state"] == "crashed", json.dumps(verdict, indent=1)[:3000]
        assert verdict["cause"] == "kv_cache_alloc", json.dumps(verdict, indent=1)[:3000]
        # the engine's site names it, or a hand signature of the same failure that reads more does
        assert verdict["rule"] in ("engine-site.kv_cache_alloc", "first-failure-oom-in-kv-pool"), verdict["rule"]
        fact = _site_fact(verdict, "vllm/v1/core/kv_cache_utils.py:")
        assert "vLLM" in fact and "0.32.0" in fact and "→ kv_cache_alloc" in fact


@needs_vllm
def test_vllm_max_model_len_the_model_cannot_take_is_evidence_without_a_cause(tmp_path: Path, marker: str) -> None:
    # GIVEN a real vLLM start asking a max_model_len (4096) above the model's own (512): vLLM's config
    # check raises it inside pydantic's validation error ("Value error, ..."), before any engine starts
    argv = [str(Path(VLLM_PYTHON).parent / "vllm"), "serve", str(_procs.tiny_model_hd64()),
            "--port", str(_procs.free_port(31000, 31999)), *VLLM_FLAGS, "--max-model-len", "4096"]  # fmt: skip
    env = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CACHE_ROOT": str(tmp_path / "vllm-cache")}
    verdicts, log = _run(argv, env, marker, tmp_path)
    # THEN the site is found under the other prefix, with its values; the table maps no cause to it
    for verdict in (verdicts[-1], _diagnose(log, "vllm", argv, tmp_path)):
        assert verdict["state"] == "crashed", json.dumps(verdict, indent=1)[:3000]
        fact = _site_fact(verdict, "vllm/config/model.py:")
        assert "vLLM" in fact and "0.32.0" in fact and "4096" in fact and "→" not in fact


MEMORY_ATTEMPTS = 3


@needs_sglang
def test_sglang_memory_fraction_that_cannot_be_met(tmp_path: Path, marker: str) -> None:
    for attempt in range(MEMORY_ATTEMPTS):
        # GIVEN a real SGLang start whose static memory fraction leaves no room for the KV pool
        argv = [LAB_PYTHON, "-m", "sglang.launch_server", "--model-path", str(_procs.tiny_model()),
                "--port", str(_procs.free_port(31000, 31999)), *COMMON_FLAGS, "--skip-server-warmup", "--mem-fraction-static", "0.0001",
                "--max-total-tokens", "4096"]  # a cap: below the profile it changes nothing, above it no start takes GBs  # fmt: skip
        # WHEN hangwatch watches it, and diagnoses its log afterwards
        (runs := tmp_path / str(attempt)).mkdir()
        verdicts, log = _run(argv, {}, marker, runs)
        if verdicts[-1]["state"] != "ready":
            break
        # SGLang on CPU sizes the pool as the memory available now minus (1 - f) of what was
        # available before the weights: another test's server that exits in between frees more
        # than the weights took, the pool comes out positive and the server starts. Such a start
        # has no crash to diagnose and says nothing of hangwatch: start again
    live, offline = verdicts[-1], _diagnose(log, "sglang", argv, runs)
    # THEN both find SGLang's own "Not enough memory" raise site and name the KV pool sizing
    for verdict in (live, offline):
        assert verdict["state"] == "crashed", json.dumps(verdict, indent=1)[:3000]
        assert verdict["cause"] == "kv_cache_alloc", json.dumps(verdict, indent=1)[:3000]
        fact = _site_fact(verdict, "sglang/srt/")
        assert "SGLang" in fact and "0.5.23" in fact


@contextmanager
def _held_port() -> Iterator[int]:
    """A free port, then taken: a real socket listening on it for as long as the test runs."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        port = _procs.free_port(31000, 31999)
        sock.bind(("127.0.0.1", port))
        sock.listen(1)
        yield port
    finally:
        sock.close()


@needs_vllm
def test_vllm_api_port_already_taken(tmp_path: Path, marker: str) -> None:
    # GIVEN a real vLLM start asked to serve on a port another socket already listens on
    with _held_port() as port:
        argv = [str(Path(VLLM_PYTHON).parent / "vllm"), "serve", str(_procs.tiny_model_hd64()), "--port", str(port),
                *VLLM_FLAGS]  # fmt: skip
        env = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CACHE_ROOT": str(tmp_path / "vllm-cache")}
        # WHEN hangwatch watches it, and diagnoses its log afterwards
        verdicts, log = _run(argv, env, marker, tmp_path)
    # THEN vLLM's bind of its API socket raised `OSError: [Errno 98]` with no message of vLLM's own:
    # the traceback's innermost vLLM frame is the site, and the table's frame entry names the cause
    for verdict in (verdicts[-1], _diagnose(log, "vllm", argv, tmp_path)):
        assert verdict["state"] == "crashed", json.dumps(verdict, indent=1)[:3000]
        assert verdict["cause"] == "port_in_use", json.dumps(verdict, indent=1)[:3000]
        fact = _site_fact(verdict, "vllm/entrypoints/launchers/launcher.py:create_server_socket", raised="raised in")
        assert "vLLM frame" in fact and "→ port_in_use" in fact


@needs_sglang
def test_sglang_api_port_already_taken(tmp_path: Path, marker: str) -> None:
    # GIVEN a real SGLang start asked to serve on a port another socket already listens on. SGLang
    # 0.5.23 checks no port of its own on one node without DP attention: uvicorn binds it after every
    # scheduler is up and logs `[Errno 98] error while attempting to bind` (uvicorn is not mined, so
    # no engine site names it: docs/engine-words.md), and SGLang then logs its ready line anyway
    with _held_port() as port:
        argv = [LAB_PYTHON, "-m", "sglang.launch_server", "--model-path", str(_procs.tiny_model()),
                "--port", str(port), *SGLANG_FLAGS]  # fmt: skip
        verdicts, log = _run(argv, {}, marker, tmp_path)
    # THEN the watch names the taken port (the port held by another process from the launch on, or
    # the bind error), never `ready`
    assert all(v["state"] != "ready" for v in verdicts), json.dumps(verdicts[-1], indent=1)[:3000]
    verdict = verdicts[-1]
    assert (verdict["state"], verdict["cause"]) == ("crashed", "port_in_use"), json.dumps(verdict, indent=1)[:3000]
    assert any(str(port) in e["text"] for e in verdict["evidence"]), json.dumps(verdict, indent=1)[:3000]
    if "[Errno 98]" in log.read_text(encoding="utf-8", errors="replace"):
        # the watch let it run to uvicorn's bind: the log alone says it too, ready line or not
        offline = _diagnose(log, "sglang", argv, tmp_path)
        assert offline["state"] != "ready" and offline["cause"] == "port_in_use", json.dumps(offline, indent=1)[:3000]


@needs_sglang
def test_sglang_dist_init_port_already_taken(tmp_path: Path, marker: str) -> None:
    # GIVEN a real SGLang start whose --nccl-port (its rendezvous: tcp://127.0.0.1:PORT) another socket
    # holds: torch's c10d TCPStore cannot listen there, and c10d's C++ raises DistNetworkError
    with _held_port() as port:
        argv = [LAB_PYTHON, "-m", "sglang.launch_server", "--model-path", str(_procs.tiny_model()),
                "--port", str(_procs.free_port(32000, 32999)), "--nccl-port", str(port), *SGLANG_FLAGS]  # fmt: skip
        verdicts, log = _run(argv, {}, marker, tmp_path)
    # THEN both verdicts name the taken port, and the site is torch's store creation in the traceback:
    # the message is c10d's own C++ text, so the frame entry of the table names it
    for verdict in (verdicts[-1], _diagnose(log, "sglang", argv, tmp_path)):
        assert (verdict["state"], verdict["cause"]) == ("crashed", "port_in_use"), json.dumps(verdict, indent=1)[:3000]
        fact = _site_fact(verdict, "torch/distributed/rendezvous.py:_create_c10d_store", raised="raised in")
        assert "torch frame" in fact and "→ port_in_use" in fact


@needs_sglang
def test_sglang_phases_read_by_the_mined_formats_alone(tmp_path: Path, marker: str) -> None:
    # GIVEN the log of a real SGLang 0.5.23 start on CPU, from launch to ready
    argv = [LAB_PYTHON, "-m", "sglang.launch_server", "--model-path", str(_procs.tiny_model()),
            "--port", str(_procs.free_port(31000, 31999)), *SGLANG_FLAGS]  # fmt: skip
    verdicts, log = _run(argv, {}, marker, tmp_path)
    assert verdicts[-1]["state"] == "ready", json.dumps(verdicts[-1], indent=1)[:3000]
    lines = read_log_lines(log.read_bytes())
    # WHEN only the mined log formats read it (no hand marker: `taken` is empty)
    formats = formats_for("sglang")
    assert formats is not None
    mined = formats.events(lines, "0.5.23")
    # THEN they follow the start through weights, the KV pool and the ready line, in order, each
    # event naming the SGLang code that logged it
    phases = [event.phase for event in mined]
    assert phases == sorted(phases, key=lambda phase: phase.order), phases
    assert {Phase.WEIGHT_LOAD, Phase.KV_CACHE, Phase.READY} <= set(phases), phases
    assert all(event.detail[FORMAT_KEY].startswith("sglang/srt/") for event in mined)
    weight_end = [e for e in mined if e.phase is Phase.WEIGHT_LOAD and e.end]
    assert weight_end and "Load weight end" in weight_end[0].text
    assert rank_positions(mined) == {"main": (Phase.READY, True)}
    # and with the hand markers they agree on where the start ended
    assert rank_positions(read_phases(get_engine("sglang"), lines, version="0.5.23")) == {"main": (Phase.READY, True)}
