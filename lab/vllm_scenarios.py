"""Real vLLM 0.32.0 startup hangs on CPU (`vllm serve` from the vLLM lab venv, tiny head_dim-64 Llama).

Registered in lab/scenarios.py as `vllm-*`; run them like the SGLang ones (`lab/run.py vllm-...`).
The process tree is the API server (`vllm serve`, it keeps its command line) → `VLLM::EngineCore`
→ `VLLM::Worker` (with TP>1 `VLLM::Worker_TP<n>`, but only once distributed init is done). Every
hang is vLLM/torch code really blocking (a TCPStore rendezvous, open() on a FIFO, a user patch in
the warm-up forward); README.md ("vLLM") says what each does on this machine.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
from pathlib import Path

from lab import _procs
from lab._runner import HS_DUMP_SHM_PREFIX, Node, RunningScenario

MASTER_PORTS = (29700, 29799)  # --master-port of the --nnodes 2 starts, clear of SGLang's range
# One NUMA node, 2 cores: each TP rank gets its own core (auto binding would reserve one).
TP2_ENV = {"VLLM_CPU_OMP_THREADS_BIND": "0|1"}
TP2_FLAGS = ["--tensor-parallel-size", "2", "--distributed-executor-backend", "mp"]
WARMUP_LINE = "Warming up model for the compilation"
DP_WAIT_LINE = "Waiting for READY message from DP Coordinator"


def _titled(node: Node, prefix: str) -> list[int]:
    return [p for p in node.members() if _procs.title(p).startswith(prefix)]


def _two_node_flags(rs: RunningScenario) -> list[str]:
    return [*TP2_FLAGS, "--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1",
            "--master-port", str(rs.opts["master_port"])]


def _fifo_model(rs: RunningScenario) -> Path:
    """A copy of the tiny model whose weights file is a FIFO nobody writes: a hung filesystem."""
    model = rs.tmp / "tiny-llama-hd64-fifo"
    shutil.copytree(_procs.tiny_model_hd64(), model)
    (model / "model.safetensors").unlink()
    os.mkfifo(model / "model.safetensors")
    return model


def healthy(rs: RunningScenario) -> None:
    """TP=1 with vLLM's defaults: torch.compile's warm-up keeps the log silent for 10-35 s here.
    The onset marks that slow phase (never a hang); the scenario's state is ready."""
    rs.opts["expect_ready"] = True
    node = rs.launch(0, rs.vllm_args(rs.port), rs.port)
    if rs.until(lambda: node.watch.find(WARMUP_LINE), watch=[node]):
        rs.mark_onset("torch.compile warm-up begins (slow, not hung)")
        rs.await_ready(node)


def healthy_tp2(rs: RunningScenario) -> None:
    """TP=2 on one node (mp executor, one core per rank). --enforce-eager: the compile warm-up
    is healthy_tp1's, and skipping it saves ~40 s of a ~110 s start."""
    rs.opts["expect_ready"] = True
    node = rs.launch(0, [*rs.vllm_args(rs.port, eager=True), *TP2_FLAGS], rs.port, env=TP2_ENV)
    rs.await_ready(node)


def two_node_missing(rs: RunningScenario) -> None:
    """--nnodes 2, node 1 never started: the local worker (rank 0) owns the TCPStore on
    --master-port and waits in the rendezvous (30 min torch default)."""
    port = rs.opts["master_port"]
    node = rs.launch(0, [*rs.vllm_args(rs.port, eager=True), *_two_node_flags(rs)], rs.port,
                     env=TP2_ENV)
    # never connect to the port: a connect would count as a worker joining
    found = rs.until(lambda: _procs.listening(port)
                     and node.watch.find("distributed_init_method=tcp://"), watch=[node])
    if found:
        rs.mark_onset("rendezvous waits for node 1 (never started)",
                      master_addr=f"127.0.0.1:{port}", line=found.strip())


def dp_remote_missing(rs: RunningScenario) -> None:
    """Data parallel over two "nodes" (`--data-parallel-size 2 --data-parallel-size-local 1`),
    the remote DP rank (a `--headless` start on node 1) never started. The local engine core
    finishes its own start, then waits for the DP coordinator's READY, which needs every DP rank,
    and logs "Waiting for READY message from DP Coordinator..." every 10 s (`core.py:1247`); the
    onset is its first such line. Measured here: onset 4-6 min after the launch under load. One API
    server (`--api-server-count 1`): by default vLLM starts one per DP rank, each a process importing
    the whole stack (79 CPU-s a start with two, 46 with one; the wait is the engine's either way)."""
    port = rs.opts["master_port"]
    args = [*rs.vllm_args(rs.port, eager=True), "--data-parallel-size", "2", "--data-parallel-size-local", "1",
            "--api-server-count", "1", "--data-parallel-address", "127.0.0.1", "--data-parallel-rpc-port", str(port)]
    node = rs.launch(0, args, rs.port)
    found = rs.until(lambda: node.watch.find(DP_WAIT_LINE), watch=[node])
    if found:
        rs.mark_onset("the local DP engine waits for the remote DP rank (never started)", line=found.strip())


def weights_fifo(rs: RunningScenario) -> None:
    model = _fifo_model(rs)
    node = rs.launch(0, rs.vllm_args(rs.port, model=model, eager=True), rs.port)
    waiters = rs.until(lambda: _procs.fifo_waiters(node.members()), watch=[node])
    if waiters:
        rs.mark_onset("weights open() blocks on a FIFO (hung filesystem)",
                      fifo=str(model / "model.safetensors"), blocked=waiters)


def master_port_taken(rs: RunningScenario) -> None:
    """--nnodes 2 whose --master-port is already held: not a hang, the worker fails to listen
    (EADDRINUSE), the engine fails, and vLLM exits."""
    port = rs.opts["master_port"]
    holder = socket.socket()  # a real listener on the master port, opened before the server
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", port))
    holder.listen(8)
    rs.add_cleanup(holder.close)
    rs.emit("port-held", port=port, holder_pid=os.getpid())
    node = rs.launch(0, [*rs.vllm_args(rs.port, eager=True), *_two_node_flags(rs)], rs.port,
                     env=TP2_ENV)
    line = rs.until(lambda: node.watch.find("EADDRINUSE"))
    if line:
        rs.mark_onset("the worker cannot listen on the master port", line=line.strip())


def warmup_blocked(rs: RunningScenario) -> None:
    """A user's hidden-state dump patch (lab/patches/hs_dump.py, loaded by sitecustomize) wraps
    vLLM's LlamaForCausalLM.forward; the compile warm-up's first forward blocks opening the dump
    consumer's FIFO, which nobody reads."""
    dump_dir = Path(f"{HS_DUMP_SHM_PREFIX}{rs.run_id}")
    rs.add_cleanup(lambda: shutil.rmtree(dump_dir, ignore_errors=True))
    env = {"PYTHONPATH": str(_procs.LAB / "patches" / "site"), "HS_DUMP_DIR": str(dump_dir),
           "HS_DUMP_TARGET": "vllm"}
    node = rs.launch(0, rs.vllm_args(rs.port), rs.port, env=env)
    found = rs.until(lambda: node.watch.find("waiting for consumer on")
                     and _procs.fifo_waiters(node.members()), watch=[node])
    if found:
        rs.mark_onset("hidden-state dump patch blocks the warm-up forward (consumer FIFO never read)",
                      blocked=found, dump_dir=str(dump_dir))


def worker_killed(rs: RunningScenario) -> None:
    """The worker is SIGKILLed (as by the OOM killer) once it logs `--kill-at` (default: the
    compile warm-up). What vLLM does then is in README.md."""
    kill_at = rs.opts.get("kill_at") or WARMUP_LINE
    node = rs.launch(0, rs.vllm_args(rs.port), rs.port)
    if not rs.until(lambda: node.watch.find(kill_at), watch=[node]):
        return
    victims = _titled(node, "VLLM::Worker")
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    rs.mark_onset(f"SIGKILLed VLLM::Worker at '{kill_at}'", killed=victims)


SCENARIOS = {
    "vllm-healthy": healthy,
    "vllm-healthy-tp2": healthy_tp2,
    "vllm-two-node-missing": two_node_missing,
    "vllm-dp-remote-missing": dp_remote_missing,
    "vllm-weights-fifo": weights_fifo,
    "vllm-master-port-taken": master_port_taken,
    "vllm-warmup-blocked": warmup_blocked,
    "vllm-worker-killed": worker_killed,
}
NEEDS_MASTER_PORT = {"vllm-two-node-missing", "vllm-master-port-taken", "vllm-dp-remote-missing"}
