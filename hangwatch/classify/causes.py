"""The cause ids a verdict may name: shared/CAUSES.md's, then the ones hangwatch adds
(docs/causes.md). The one list every module checks against."""

from __future__ import annotations

CAUSES: tuple[str, ...] = (
    "nccl_init",
    "nccl_p2p_topology",
    "custom_allreduce",
    "nccl_version_bug",
    "multinode_rendezvous",
    "flashinfer_arch",
    "arch_kernel_hang",
    "jit_compile_slow",
    "jit_lock_deadlock",
    "autotune_rank_desync",
    "kv_cache_alloc",
    "cuda_graph_capture",
    "weight_loading_io",
    "cpu_thread_oversubscription",
    "dead_rank",
    "shm_too_small",
    "port_in_use",
    "tokenizer_or_detokenizer",
    "warmup_request",
    "patch_or_user_code",
    "driver_or_xid",
    "unknown",
    # added by hangwatch (docs/causes.md)
    "gpu_memory_held",
)

# Severity order: a higher index wins a tie between matches of equal confidence and specificity.
SEVERITIES: tuple[str, ...] = ("info", "warning", "critical")
