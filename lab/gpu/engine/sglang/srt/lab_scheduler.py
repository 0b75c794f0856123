"""The rank side of lab/gpu/run.py: one `sglang::scheduler_TP<r>` process per GPU.

Not SGLang. The steps are named after SGLang's scheduler steps (init_distributed_environment,
load_model, get_available_gpu_memory, init_memory_pool, capture_one_batch_size) and write its log
markers, while every wait is the real one: torch.distributed + NCCL, CUDA, a CuPy kernel. The file
sits under `engine/sglang/srt/` on purpose: its frames read as engine code, as those of an SGLang
source checkout do, so that code the lab calls "user code" (lab/gpu/user_hooks.py) is told apart
from the engine exactly as in a real server.

LAB_GPU_CPU=1 runs the distributed scenarios on CPU with gloo (no CUDA): for checking the lab and
hangwatch end to end on a machine without a GPU. The figures in docs/gpu.md come from the GPU path.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from dataclasses import dataclass
from datetime import timedelta

CPU = os.environ.get("LAB_GPU_CPU") == "1"
_GIB = 2**30


def _log(rank: int, world: int) -> logging.Logger:
    prefix = f" TP{rank}" if world > 1 else ""
    logging.basicConfig(
        level=logging.INFO, format=f"[%(asctime)s{prefix}] %(message)s", datefmt="%Y-%m-%d %H:%M:%S", force=True
    )
    return logging.getLogger("lab")


def _title(rank: int, world: int) -> None:
    try:
        import setproctitle
    except ImportError:
        return
    setproctitle.setproctitle(f"sglang::scheduler_TP{rank}" if world > 1 else "sglang::scheduler")


def _onset(path: str | None, what: str) -> None:
    if path:
        with open(path + ".tmp", "w") as f:
            json.dump({"onset": time.time(), "what": what, "pid": os.getpid()}, f)
        os.replace(path + ".tmp", path)


@dataclass(frozen=True)
class RankOptions:
    """The launch flags a rank acts on. disable_cuda_graph: SGLang's --disable-cuda-graph (no
    CudaGraphRunner: nothing is captured, decode runs eagerly). launcher_says_ready: the launcher
    logs the ready line once its HTTP side answers (run.py --http-port), so rank 0 does not."""

    disable_cuda_graph: bool = False
    launcher_says_ready: bool = False


class Rank:
    """What one scheduler process knows: its rank, the world, the log, the onset file, the flags."""

    def __init__(self, rank: int, world: int, port: int, onset: str | None, options: RankOptions | None = None):
        self.rank, self.world, self.port, self.onset = rank, world, port, onset
        self.options = options or RankOptions()
        self.log = _log(rank, world)
        import torch

        self.torch = torch
        self.device = "cpu" if CPU else "cuda"
        self.dist = None
        self.cpu_group = None

    # ------------------------------------------------------------ CUDA helpers (no-ops on CPU)

    def synchronize(self) -> None:
        if not CPU:
            self.torch.cuda.synchronize()

    def free_gib(self) -> float:
        return 100.0 if CPU else self.torch.cuda.mem_get_info()[0] / _GIB

    def alloc_gib(self, gib: float):
        size = int(gib * _GIB)
        if CPU:
            size = min(size, 1 << 20)
        return self.torch.empty(size, dtype=self.torch.uint8, device=self.device)

    def mark(self, what: str) -> None:
        _onset(self.onset, what)


# ---------------------------------------------------------------- SGLang's steps


def share_gpus(r: Rank) -> None:
    """Each rank on GPU rank % count. Fewer GPUs than ranks (a one-GPU machine): NCCL refuses one
    GPU twice within a host, so each rank names a host of its own (NCCL_HOSTID) and NCCL joins
    them over loopback sockets; torch's watchdog is told not to tear a rank down on a peer's
    socket error, so that a survivor keeps waiting in its collective, as over NVLink."""
    count = r.torch.cuda.device_count()
    r.torch.cuda.set_device(r.rank % count)
    if count < r.world:
        os.environ["NCCL_HOSTID"] = f"lab-rank{r.rank}"
        for key, value in (("NCCL_SOCKET_IFNAME", "lo"), ("NCCL_IB_DISABLE", "1"),
                           ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")):
            os.environ.setdefault(key, value)


def init_distributed_environment(r: Rank, *, absent_rank: int | None = None) -> None:
    """torch rendezvous over TCPStore, then a first all-reduce that creates the NCCL communicator,
    as SGLang's init does before `Init torch distributed ends.` `absent_rank` waits on a store key
    nobody sets instead (a rank held up before NCCL): the others block in ncclCommInitRank."""
    import torch.distributed as dist

    r.log.info("Init torch distributed begin.")
    if not CPU:
        share_gpus(r)
    dist.init_process_group(
        "gloo" if CPU else "nccl", init_method=f"tcp://127.0.0.1:{r.port}", rank=r.rank,
        world_size=r.world, timeout=timedelta(hours=1),
    )
    r.dist = dist
    r.cpu_group = dist.new_group(backend="gloo")
    if r.rank == absent_rank:
        store = dist.distributed_c10d._get_default_store()
        store.wait(["lab/peer-never-arrives"], timedelta(hours=1))
    if absent_rank is not None:
        r.mark(f"rank 0 creates the NCCL communicator without rank {absent_rank}")
    t = r.torch.ones(1024, device=r.device)
    dist.all_reduce(t)  # the first collective creates the NCCL communicator
    r.synchronize()
    r.log.info("Init torch distributed ends. mem usage=0.50 GB")


def load_model(r: Rank, gib: int) -> list:
    r.log.info("Load weight begin. avail mem=%.2f GB", r.free_gib())
    weights = [r.alloc_gib(1) for _ in range(gib)]
    r.log.info("Load weight end. type=LabModel, dtype=torch.bfloat16, avail mem=%.2f GB, mem usage=%d.00 GB.",
               r.free_gib(), gib)
    return weights


def get_available_gpu_memory(r: Rank) -> float:
    """The minimum free memory over the ranks (SGLang takes it over the TP group after loading)."""
    t = r.torch.tensor([r.free_gib()], dtype=r.torch.float32, device=r.device)
    r.dist.all_reduce(t, op=r.dist.ReduceOp.MIN)
    r.synchronize()
    return float(t.item())


def init_memory_pool(r: Rank, gib: int, step_s: float) -> list:
    """Build the KV pool one 1 GiB block at a time: silent in the log, GPU memory rising."""
    pool = []
    for _ in range(gib):
        pool.append(r.alloc_gib(1))
        time.sleep(step_s)
    r.log.info("KV Cache is allocated. #tokens: 1000000, K size: %.2f GB, V size: %.2f GB", gib / 2, gib / 2)
    r.log.info("Memory pool end. avail mem=%.2f GB", r.free_gib())
    return pool


SPIN_SRC = r"""
extern "C" __global__ void spin_until_set(volatile int *flag) {
    while (*flag == 0) { }
}
"""


def _dummy_sampler_run(r: Rank, *, hang: bool = True) -> None:
    """The sampler's warm-up forward; its kernel spins on a device flag nobody sets (the shape of
    an architecture-specific sampling-kernel hang), and the host waits for it in synchronize.
    `hang=False`: the flag is set before the launch, so the same kernel returns at once."""
    import cupy

    cupy.cuda.Device(r.torch.cuda.current_device()).use()  # the rank's GPU, as torch's
    flag = cupy.zeros(1, dtype=cupy.int32) if hang else cupy.ones(1, dtype=cupy.int32)
    kernel = cupy.RawKernel(SPIN_SRC, "spin_until_set")
    kernel((1,), (1,), (flag,))
    if hang and r.rank == 0:
        r.mark("spin kernel launched; host synchronizes")
    r.synchronize()


def run_once(r: Rank) -> None:
    """One eager forward of the captured shape: its tensor-parallel all-reduce (NCCL)."""
    t = r.torch.ones(4096, device=r.device)
    r.dist.all_reduce(t)


def capture_one_batch_size(r: Rank, bs: int) -> None:
    """As SGLang's CudaGraphRunner: per shape, two eager warm-ups, each after a synchronize and a
    barrier over the CPU group, then the capture. Rank 1 here runs the first warm-up without its
    barrier (a capture loop out of step between the ranks): its all-reduce waits on the GPU for
    rank 0, which waits in the barrier for rank 1."""
    for i in range(2):
        r.synchronize()
        if not (r.rank == 1 and i == 0):
            if r.rank == 0:
                r.mark(f"rank 0 waits in the pre-capture barrier of bs={bs}")
            r.dist.barrier(group=r.cpu_group)
        run_once(r)
    if CPU:
        return
    graph = r.torch.cuda.CUDAGraph()
    x = r.torch.ones(1024, device="cuda")
    with r.torch.cuda.graph(graph):
        y = x * 2
    graph.replay()
    del y


def capture_healthy(r: Rank, batch_sizes: tuple[int, ...], layers: int = 8, hidden: int = 4096) -> list:
    """SGLang's CudaGraphRunner done right: per shape, two eager warm-ups each after a synchronize
    and the pre-capture barrier, then a real CUDA graph of `layers` matmuls + the TP all-reduce
    (NCCL inside the graph), replayed once. Logs SGLang's per-shape capture line."""
    torch = r.torch
    dtype = torch.float32 if CPU else torch.bfloat16  # gloo: no bf16 all-reduce
    hidden = 128 if CPU else hidden
    weight = torch.randn(hidden, hidden, device=r.device, dtype=dtype) / hidden**0.5
    graphs = []

    def forward(x):
        for _ in range(layers):
            x = x @ weight
        r.dist.all_reduce(x)
        return x

    for bs in batch_sizes:
        r.log.info("Capture cuda graph bs [%d]", bs)
        x = torch.randn(bs * 64, hidden, device=r.device, dtype=dtype)
        if CPU:  # gloo on CPU: the warm-ups and barriers only, no graph
            r.dist.barrier(group=r.cpu_group)
            forward(x)
            continue
        for _ in range(2):
            r.synchronize()
            r.dist.barrier(group=r.cpu_group)
            forward(x)
        r.synchronize()
        r.dist.barrier(group=r.cpu_group)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = forward(x)
        graph.replay()
        r.synchronize()
        graphs.append((graph, x, y))
    return graphs


# ---------------------------------------------------------------- scenarios


def scenario_healthy(r: Rank) -> None:
    """A start that works: NCCL group, small weights, a KV pool, the sampler warm-up kernel run to
    completion, real CUDA graphs for a few shapes, then the ready line (fills hangwatch's history)."""
    init_distributed_environment(r)
    weights = load_model(r, 4)
    r.log.info("KV Cache is allocated. #tokens: 100000, K size: 1.00 GB, V size: 1.00 GB")
    pool = [r.alloc_gib(1) for _ in range(2)]
    if not CPU:
        _dummy_sampler_run(r, hang=False)
    r.log.info("Memory pool end. avail mem=%.2f GB", r.free_gib())
    graphs = []
    if not r.options.disable_cuda_graph:
        r.log.info("Capture cuda graph begin. This can take up to several minutes. avail mem=%.2f GB", r.free_gib())
        t = time.time()
        graphs = capture_healthy(r, (1, 2, 4, 8, *range(16, 257, 8)))  # SGLang's default shapes
        r.log.info("Capture cuda graph end. Time elapsed: %.2f s. mem usage=0.10 GB. avail mem=%.2f GB.",
                   time.time() - t, r.free_gib())
    r.log.info("max_total_num_tokens=100000, chunked_prefill_size=8192, max_prefill_tokens=16384")
    if r.rank == 0 and not r.options.launcher_says_ready:
        r.log.info("The server is fired up and ready to roll!")
    r.healthy_keep = (weights, pool, graphs)  # type: ignore[attr-defined]  # held while the server runs


def scenario_collective(r: Rank) -> None:
    """Rank 1's user hook never returns, so it never calls the all-reduce rank 0 is already in."""
    import user_hooks

    init_distributed_environment(r)
    weights = load_model(r, 20)
    user_hooks.after_weights_loaded(r.rank)
    if r.rank == 0:
        r.mark("rank 0 enters the all-reduce that rank 1 skips")
    get_available_gpu_memory(r)
    del weights


def scenario_nccl_init(r: Rank) -> None:
    """Both ranks complete the TCPStore rendezvous; rank 1 then waits for a store key nobody sets,
    so it never calls ncclCommInitRank, and rank 0's first all-reduce blocks in NCCL bootstrap."""
    init_distributed_environment(r, absent_rank=1)


def scenario_dead_rank(r: Rank) -> None:
    """The group forms, weights load, then rank 1 is SIGKILLed; rank 0 waits in the next all-reduce."""
    init_distributed_environment(r)
    weights = load_model(r, 4)
    if r.rank == 1:
        time.sleep(2.0)
        r.mark("rank 1 SIGKILLed")
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get("LAB_DEAD_WAIT") == "store":  # a survivor that waits where no transport sees the death
        r.dist.distributed_c10d._get_default_store().wait(["lab/TP1-free-memory"], timedelta(hours=1))
    get_available_gpu_memory(r)
    del weights


def scenario_rendezvous_mismatch(r: Rank) -> None:
    """The user's process-group setup (user_hooks.join_process_group) puts rank 1 on another port
    than the TCPStore rank 0 serves: rank 0 waits for its worker in the store, rank 1 retries its
    connect; neither reaches NCCL. On one GPU both ranks share it (device rank % count): the
    rendezvous never gets far enough to mind."""
    import user_hooks

    r.log.info("Init torch distributed begin.")
    if not CPU:
        share_gpus(r)
    if r.rank == 0:
        r.mark(f"rank 0 serves the TCPStore on {r.port}, rank 1 looks for it on {r.port + 1}")
    user_hooks.join_process_group("gloo" if CPU else "nccl", r.rank, r.world, r.port)
    r.log.info("Init torch distributed ends. mem usage=0.50 GB")  # never reached


def scenario_kv_slow(r: Rank) -> None:
    """Slow but healthy: a 90 GiB pool built in 45 s with nothing in the log, then ready."""
    weights = load_model(r, 8)
    r.mark("KV pool allocation starts (silent, GPU memory rising)")
    pool = init_memory_pool(r, int(os.environ.get("LAB_KV_GIB", "90")), 0.5)
    r.log.info("max_total_num_tokens=1000000, chunked_prefill_size=8192, max_prefill_tokens=16384")
    r.log.info("The server is fired up and ready to roll!")
    while True:
        time.sleep(1.0)
    del weights, pool


def scenario_spin_kernel(r: Rank) -> None:
    """Both ranks' sampler warm-up kernel spins (an architecture's kernel bug hits every rank)."""
    if not CPU:
        r.torch.cuda.set_device(r.rank)  # one GPU per rank (no NCCL init here to set it)
    weights = load_model(r, 4)
    r.log.info("KV Cache is allocated. #tokens: 100000, K size: 1.00 GB, V size: 1.00 GB")
    _dummy_sampler_run(r)
    del weights


def scenario_graph_capture(r: Rank) -> None:
    """The capture loop out of step between the ranks (capture_one_batch_size) hangs in the first
    shape. With --disable-cuda-graph (r.options) SGLang creates no CudaGraphRunner: the loop is
    never entered, and the same ranks, weights and pool go on to ready (decode would run eagerly)."""
    init_distributed_environment(r)
    weights = load_model(r, 4)
    r.log.info("KV Cache is allocated. #tokens: 100000, K size: 1.00 GB, V size: 1.00 GB")
    pool = [r.alloc_gib(1) for _ in range(2)]
    r.log.info("Memory pool end. avail mem=%.2f GB", r.free_gib())
    if not r.options.disable_cuda_graph:
        r.log.info("Capture cuda graph begin. This can take up to several minutes. avail mem=%.2f GB", r.free_gib())
        for bs in (1, 2, 4, 8):
            capture_one_batch_size(r, bs)
        r.log.info("Capture cuda graph end. Time elapsed: 1.00 s.")
    get_available_gpu_memory(r)  # the ranks agree on the memory left, as after a capture (a real collective)
    r.log.info("max_total_num_tokens=100000, chunked_prefill_size=8192, max_prefill_tokens=16384")
    if r.rank == 0 and not r.options.launcher_says_ready:
        r.log.info("The server is fired up and ready to roll!")
    r.graph_keep = (weights, pool)  # type: ignore[attr-defined]  # held while the server runs


SCENARIOS = {
    "healthy": scenario_healthy,
    "collective": scenario_collective,
    "nccl-init": scenario_nccl_init,
    "dead-rank": scenario_dead_rank,
    "rendezvous-mismatch": scenario_rendezvous_mismatch,
    "kv-slow": scenario_kv_slow,
    "spin-kernel": scenario_spin_kernel,
    "graph-capture": scenario_graph_capture,
}
SINGLE_RANK = ("kv-slow",)


def run_scheduler_process(scenario: str, rank: int, world: int, port: int, log_path: str,
                          onset: str | None, ready_writer, wait_file: str | None = None,
                          options: RankOptions | None = None) -> None:
    """A scheduler process: log to the server log (`-`: the launcher's stdout and stderr, which it
    inherits), take the title, run the scenario, then report ready to the launcher (which none of
    the hanging scenarios reaches)."""
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # multicast off: it can wedge the shared host's GPUs
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
    if log_path != "-":
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    _title(rank, world)
    while wait_file and not os.path.exists(wait_file):  # hangwatch attached first: it times every phase
        time.sleep(0.05)
    SCENARIOS[scenario](Rank(rank, world, port, onset, options))
    ready_writer.send({"status": "ready", "rank": rank})
    while True:  # the event loop of a ready scheduler
        time.sleep(1.0)
