"""The causes a verdict may name: id, what it is, the evidence that shows it, the usual remedy.

The one table every module checks against (`CAUSES` are its ids; the first 21 and `unknown`
are the shared catalogue's, `gpu_memory_held` is hangwatch's own, for `hangwatch preflight`); `hangwatch causes` prints it
with the states and rules of each cause, and docs/causes.md is generated from it
(`hangwatch causes --markdown > docs/causes.md`; a test keeps the two in step). Drawn from 83
public reports of inference servers that hung at start-up, grouped by what fixed them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CATALOGUE", "CAUSES", "SEVERITIES", "STATES", "Cause"]


@dataclass(frozen=True)
class Cause:
    id: str
    what: str  # what goes wrong
    signals: str  # the evidence that typically shows it
    remedy: str  # what usually fixes it


CATALOGUE: tuple[Cause, ...] = (
    Cause(
        'nccl_init',
        'NCCL communicator creation or the torch process-group rendezvous blocks inside one node (bootstrap, NVLS/multicast setup, symmetric-memory rendezvous, a CUDA interposer)',
        'last line `Init parallel begin.` / `Init torch distributed begin.`; stacks in `init_distributed_environment`, `TCPStore`, `PyNcclCommunicator.__init__`, native `ncclCommInitRank*`/`bootstrapInit`; GPU util 0 %',
        'check every rank started; `NCCL_DEBUG=INFO`; `NCCL_NVLS_ENABLE=0`; `NCCL_CUMEM_ENABLE=0`',
    ),
    Cause(
        'nccl_p2p_topology',
        'PCIe peer-to-peer reported but broken (IOMMU/ACS redirect, consumer GPUs without P2P); the first collective never completes',
        'stuck right after NCCL init or in the first all-reduce; waiting ranks at 100 % GPU util with flat memory; PCIe-only GPUs (RTX 4090/5090, RTX PRO 6000, L40S)',
        '`NCCL_P2P_DISABLE=1`; disable IOMMU/ACS; `--disable-custom-all-reduce`',
    ),
    Cause(
        'custom_allreduce',
        "the engine's own all-reduce kernel (IPC buffers) hangs",
        'stacks in `custom_all_reduce`, `CustomAllreduce`, `register_graph_buffers`; often during CUDA graph capture; PCIe topology',
        '`--disable-custom-all-reduce`',
    ),
    Cause(
        'nccl_version_bug',
        'a specific NCCL release deadlocks on this hardware',
        'NCCL version line in the log matches a known-bad release for the arch',
        'change the NCCL version',
    ),
    Cause(
        'multinode_rendezvous',
        'ranks on other nodes never join (wrong `--dist-init-addr`, wrong NIC, firewall, a node not started)',
        '`--nnodes > 1`; rank 0 in `TCPStore` waiting for workers; `NCCL_SOCKET_IFNAME`/`GLOO_SOCKET_IFNAME` unset or wrong',
        'start every node; set `NCCL_SOCKET_IFNAME`/`GLOO_SOCKET_IFNAME`; check the address is reachable',
    ),
    Cause(
        'flashinfer_arch',
        'FlashInfer does not support, or JIT-fails on, this GPU architecture (SM120 Blackwell workstation parts, SM103)',
        '`--attention-backend flashinfer` or the default picked it; compute capability 12.0; stacks in `flashinfer` JIT/`build_and_load`, or silent after `Load weight end.`',
        '`--attention-backend triton` (or another supported backend); newer FlashInfer',
    ),
    Cause(
        'arch_kernel_hang',
        'another kernel spins forever on one architecture (a sampler or attention kernel)',
        'a GPU kernel at 100 % util with the stack in a warm-up forward/sampler on that arch',
        'the engine fix or a flag that avoids the kernel',
    ),
    Cause(
        'jit_compile_slow',
        'a JIT/compile/autotune step is slow but progressing (DeepGEMM, FlashInfer, Triton, torch.compile)',
        'compiler children (`nvcc`, `ninja`, `cicc`, `ptxas`) busy; cache directory growing; CPU busy',
        'wait, or warm the cache / precompile; raise the readiness timeout',
    ),
    Cause(
        'jit_lock_deadlock',
        'a JIT step blocks on a file lock (stale lock, NFS, concurrent ranks)',
        'stacks in `filelock`/`FileLock.acquire`; no compiler child alive; cache dir on a network filesystem',
        'delete the stale lock; put the cache on local disk',
    ),
    Cause(
        'autotune_rank_desync',
        'a distributed autotuner takes different paths on different ranks, so a per-tactic collective never matches',
        'ranks stuck in different autotune steps; one rank had a cache hit',
        'clear/share the autotune cache; disable autotune',
    ),
    Cause(
        'kv_cache_alloc',
        'the KV cache / memory pool sizing or allocation blocks or overcommits (host KV pools, oversize `--mem-fraction-static`)',
        '`Load weight end.` but no `KV Cache is allocated`; stacks in `init_memory_pool`, `profile_max_num_token`, token-to-KV pool constructors; memory moving or host swapping',
        'lower `--mem-fraction-static` / host pool size',
    ),
    Cause(
        'cuda_graph_capture',
        'CUDA graph capture blocks (a captured collective, a broken attention build)',
        '`Capture cuda graph begin.` (or `Capture ... CUDA graph begin.`) without end; stacks in `CudaGraphRunner.capture`, `capture_one_shape`',
        '`--disable-cuda-graph` / `--enforce-eager`, smaller `--cuda-graph-max-bs`',
    ),
    Cause(
        'weight_loading_io',
        'weight loading is slow or stalled on I/O (network filesystem, download, cold page cache)',
        '`Load weight begin.` with a shard bar that crawls; processes in `D` state; GPU memory rising slowly',
        'copy weights to local NVMe; prefetch; more loader threads',
    ),
    Cause(
        'cpu_thread_oversubscription',
        'loader thread pools times OpenMP threads swamp the host CPUs',
        'hundreds of runnable threads; load average far above cores',
        'set `OMP_NUM_THREADS`; fewer loader threads',
    ),
    Cause(
        'dead_rank',
        'a rank process died (OOM killer, segfault) while the others wait for it forever',
        'a scheduler/worker gone or zombie; exit code -9 / signal; `dmesg` OOM line; the others in a collective or barrier',
        'find why it died (`dmesg -T`); lower memory use',
    ),
    Cause(
        'shm_too_small',
        '`/dev/shm` too small in a container for NCCL/IPC',
        'container with 64 MiB `/dev/shm`; NCCL SHM errors or hang at first collective',
        '`--shm-size` / `--ipc=host`',
    ),
    Cause(
        'port_in_use',
        'the HTTP, dist-init or NCCL port is taken (orphaned server, port race)',
        '`address already in use`; another process listening on the port',
        'free the port or pick another',
    ),
    Cause(
        'tokenizer_or_detokenizer',
        'the tokenizer/detokenizer process blocks or dies (hub rate limit, `trust_remote_code` prompt)',
        'tokenizer process stack in `from_pretrained`/network; schedulers ready',
        'pre-download the tokenizer; set `HF_HUB_OFFLINE=1`',
    ),
    Cause(
        'warmup_request',
        "the server's own warm-up request never completes (port open, no `fired up` line)",
        '`Uvicorn running on` without `The server is fired up and ready to roll!`; warm-up thread in `requests.post`',
        'check proxies (`NO_PROXY`), `--skip-server-warmup` to isolate',
    ),
    Cause(
        'patch_or_user_code',
        'code the user added or patched (a hidden-state dump hook, a plugin, a launch wrapper) blocks',
        "frames from files outside the installed engine package, or a patched engine file newer than its install; the user's own log markers (e.g. `[HS_DUMP]`)",
        'fix or remove the patch; test it without the engine',
    ),
    Cause(
        'driver_or_xid',
        'an NVIDIA driver or GPU fault (Xid, GSP, NVLink)',
        '`NVRM: Xid` in `dmesg`; NVML errors; unkillable process in `D` state',
        'reset the GPU / reboot; driver change',
    ),
    Cause(
        'gpu_memory_held',
        "processes of an earlier start (or another job) still hold memory on the GPUs this launch will use, so the engine's memory pool sizing fails, overcommits or waits",
        "NVML: memory used and compute processes on the launch's GPUs before it starts (`hangwatch preflight`)",
        'stop the earlier server (`nvidia-smi`), pick other GPUs (`CUDA_VISIBLE_DEVICES`), or lower `--mem-fraction-static`',
    ),
    Cause(
        'unknown',
        'stalled, but no rule explains it',
        '',
        'the evidence and what is missing',
    ),
)

CAUSES: tuple[str, ...] = tuple(cause.id for cause in CATALOGUE)

# What each verdict state means (the `state` beside the cause).
STATES: dict[str, str] = {
    'starting': 'moving through the phases, nothing unusual yet',
    'progressing': 'slow in a phase but something is still moving (log, GPU memory, compiler children, CPU time of the rank, changing stacks)',
    'stalled': "nothing has moved for longer than the phase's budget, or the evidence shows a wait that cannot end",
    'ready': "the server finished its own start-up: it printed its ready line (SGLang `The server is fired up and ready to roll!`; vLLM `Application startup complete.` after the engine is up) or answered a real generation. An open port alone is not ready: the server's own warm-up request may still hang (`warmup_request`)",
    'crashed': 'the server or one of its ranks exited',
    'unknown': 'a bundle that holds no observation at all (only `meta.json`): not enough evidence to say whether the start hung (never live: a watched server always has processes)',
    'stopped': 'a stop someone asked for ended it, and nothing crashed: Ctrl-C or SIGTERM to `hangwatch run` (forwarded to the server), the launcher exiting on SIGINT/SIGTERM/SIGHUP or with status 0 (the engine\'s own clean shutdown), or the log ending in the `KeyboardInterrupt` a stop raises (vLLM turns SIGTERM during its start into one). What a stop unwinds (KeyboardInterrupt, SystemExit, peers\' sockets closing, ranks killed with their parent; with the interrupt in the log, a rank it ended with status 1, multiprocessing\'s status for any exception, and tracebacks cut short where the group\'s interrupts interleave in one log) is no crash evidence; a fatal signal (SIGSEGV, SIGABRT, ...), a CUDA/NCCL error or any other exception is, and makes it `crashed`. Attached to a server that exits silently with a status hangwatch cannot read (not its child), no stop is seen: `crashed`',
}

# Severity order: a higher index wins a tie between matches of equal confidence and specificity.
SEVERITIES: tuple[str, ...] = ("info", "warning", "critical")
