"""The differential: up to three causes, each with a calibrated confidence, the evidence for and
against it, and the one check that tells it from the next.

Pure functions over ranked matches (engine.rank_matches). Confidence starts at the rule's own
(what its evidence is worth when everything it names holds) and is discounted where the match is
weaker than the rule assumed: it only quotes what followed the first failure, or its hold time
has not passed. docs/accuracy.md shows how these figures line up with how often they are right.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from hangwatch.classify.language.rule import Rule
from hangwatch.classify.verdict.priors import PriorRow, prior_rows, rows_for, where_of
from hangwatch.model import Candidate, Fact

if TYPE_CHECKING:
    from hangwatch.classify.verdict.context import Context


class Match(Protocol):
    """What the differential reads of a classifier match (classifier.Match)."""

    @property
    def rule(self) -> Rule: ...
    @property
    def facts(self) -> tuple[Fact, ...]: ...
    @property
    def held(self) -> bool: ...

MAX_CANDIDATES = 3
MAX_ITEMS = 3
# A match that quotes only lines that followed the first failure explains a consequence, not the
# start: worth little more than a prior.
CONSEQUENCE_ONLY_FACTOR = 0.55
PENDING_FACTOR = 0.6  # a match whose hold has not passed yet: it may still resolve by itself

# The one check per cause that tells it from its usual neighbours (a rule's `check:` overrides).
CHECKS: dict[str, str] = {
    "nccl_init": "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET and read the last Bootstrap/NET line; "
                 "set NCCL_SOCKET_IFNAME to the interface the ranks share",
    "nccl_p2p_topology": "rerun with NCCL_P2P_DISABLE=1: if it then starts, P2P between the GPUs is broken "
                         "(check `nvidia-smi topo -m`, IOMMU/ACS)",
    "custom_allreduce": "restart with --disable-custom-all-reduce: if it then starts, the engine's own "
                        "IPC all-reduce is the cause, not NCCL",
    "nccl_version_bug": "print the NCCL version (`python -c 'import torch; print(torch.cuda.nccl.version())'`) "
                        "and try the next NCCL release (pip install nvidia-nccl-cu12==NEWER)",
    "multinode_rendezvous": "from each node, `nc -zv MASTER_ADDR MASTER_PORT`; check every node got the same "
                            "--nnodes/--dist-init-addr and that all of them started",
    "flashinfer_arch": "restart with --attention-backend triton (vLLM: VLLM_ATTENTION_BACKEND=FLASH_ATTN): if it "
                       "then starts, the FlashInfer build lacks this GPU's architecture",
    "arch_kernel_hang": "py-spy dump --native the busy rank: a kernel spinning at 100 % GPU on a new "
                        "architecture; try the engine's fallback kernels for that op",
    "jit_compile_slow": "look for nvcc/cicc/ptxas children (`ps -ef --forest`) using CPU: if they run, wait or "
                        "pre-build the kernels; none running points to a lock instead",
    "jit_lock_deadlock": "list lock files under ~/.cache/torch_extensions, ~/.cache/flashinfer, ~/.cache/vllm "
                         "with no compiler running: delete the stale lock and restart",
    "autotune_rank_desync": "compare the ranks' stacks (py-spy dump on each): ranks in different autotune "
                            "configs; disable autotuning or pin the configs",
    "kv_cache_alloc": "lower --mem-fraction-static / --gpu-memory-utilization (or the host KV pool size) and "
                      "restart: if it then starts, the KV pool allocation was the cause",
    "cuda_graph_capture": "restart with --disable-cuda-graph (vLLM: --enforce-eager): if it then starts, "
                          "graph capture is the cause",
    "weight_loading_io": "watch read throughput of the model directory (`iostat -x 2`, `cat /proc/PID/io`): "
                         "copy the weights to local NVMe and compare",
    "cpu_thread_oversubscription": "set OMP_NUM_THREADS=1 (or cores / ranks) and restart: if it then moves, "
                                   "threads oversubscribed the CPU",
    "dead_rank": "find the first rank that exited and why (`dmesg -T | grep -i -e oom -e killed`, its own "
                 "traceback); the others only wait for it",
    "shm_too_small": "`df -h /dev/shm` inside the container: under 1 GiB, start it with --shm-size=16g "
                     "(or --ipc=host)",
    "port_in_use": "`ss -ltnp | grep PORT` for the ports the server binds (HTTP, dist-init, ZMQ): "
                   "another process holds one",
    "tokenizer_or_detokenizer": "load the tokenizer alone (`AutoTokenizer.from_pretrained(MODEL)`) and time it; "
                                "check HF_TOKEN and hub rate limits",
    "warmup_request": "`curl -v http://127.0.0.1:PORT/get_model_info` from the host: check proxies "
                      "(no_proxy=127.0.0.1,localhost,0.0.0.0) and what the first request does",
    "patch_or_user_code": "py-spy dump the rank: if the innermost non-library frame is your code, start "
                          "without the plugin/patch",
    "driver_or_xid": "`dmesg -T | grep -i xid` and `nvidia-smi -q | grep -i -e fabric -e retired`: an Xid, "
                     "a stopped fabric manager or a bad GPU needs a reset or reboot",
    "gpu_memory_held": "`nvidia-smi --query-compute-apps=pid,used_memory --format=csv` before the start: memory another "
                       "process holds settles it; alone on the GPU, the model does not fit the fraction (kv_cache_alloc)",
    "unknown": "collect what is missing (stacks with `py-spy dump`, `dmesg -T`, `nvidia-smi`) and diagnose again",
}  # fmt: skip


# Causes that the same observable evidence also fits, and why (the mechanism they share). The
# differential lists them after the matched causes, at low confidence, so that the check that
# tells them apart is on the page.
NEIGHBOURS: dict[str, tuple[tuple[str, str], ...]] = {
    "custom_allreduce": (("nccl_p2p_topology", "both move data between GPUs over P2P/IPC; a broken P2P path breaks either"),
                         ("cuda_graph_capture", "the custom all-reduce registers its buffers around graph capture")),
    "nccl_p2p_topology": (("custom_allreduce", "both move data between GPUs over P2P/IPC"),
                          ("nccl_version_bug", "a first collective that never completes is also how NCCL release bugs show")),
    "nccl_init": (("multinode_rendezvous", "both are ranks failing to meet at start-up"),
                  ("driver_or_xid", "communicator init is the first thing that touches every GPU, NVLink and NVSwitch")),
    "multinode_rendezvous": (("nccl_init", "both are ranks failing to meet at start-up"),
                             ("port_in_use", "a rendezvous port held by another process looks like a peer that never answers")),
    "nccl_version_bug": (("nccl_p2p_topology", "a collective that never completes"),
                         ("driver_or_xid", "NCCL's kernels and the driver must agree")),
    "driver_or_xid": (("nccl_init", "NCCL init is where a bad GPU or fabric shows first"),
                      ("nccl_version_bug", "NCCL's kernels and the driver must agree")),
    "shm_too_small": (("nccl_init", "NCCL sets up its SHM transport inside communicator init"),
                      ("dead_rank", "SIGBUS on /dev/shm kills the rank")),
    "port_in_use": (("multinode_rendezvous", "a taken rendezvous port stops the ranks meeting"),
                    ("dead_rank", "the process that failed to bind exits and the rest wait")),
    "cuda_graph_capture": (("custom_allreduce", "its buffers are registered around capture"),
                           ("kv_cache_alloc", "capture needs the memory the KV pool leaves")),
    "kv_cache_alloc": (("cuda_graph_capture", "capture needs the memory the KV pool leaves"),
                       ("dead_rank", "host or GPU memory exhaustion kills a rank")),
    "jit_compile_slow": (("jit_lock_deadlock", "a build waiting on another's lock looks like a slow build"),
                         ("flashinfer_arch", "kernels built for a new architecture build long or fail")),
    "jit_lock_deadlock": (("jit_compile_slow", "a build waiting on another's lock looks like a slow build"),
                          ("flashinfer_arch", "FlashInfer's JIT holds those locks")),
    "flashinfer_arch": (("jit_compile_slow", "FlashInfer builds its kernels JIT on first use"),
                        ("arch_kernel_hang", "kernels run on an architecture they were not tuned for")),
    "arch_kernel_hang": (("flashinfer_arch", "kernels run on an architecture they were not built for"),
                         ("cuda_graph_capture", "the first forwards run inside graph capture")),
    "weight_loading_io": (("dead_rank", "a rank killed while loading leaves the others at the barrier"),
                          ("kv_cache_alloc", "the KV pool is sized right after the weights")),
    "gpu_memory_held": (("kv_cache_alloc", "memory another process holds is missing from the KV pool's budget"),
                        ("dead_rank", "an earlier server still alive holds the memory")),
    "dead_rank": (("driver_or_xid", "a GPU fault kills the rank"),
                  ("kv_cache_alloc", "memory exhaustion kills the rank")),
    "tokenizer_or_detokenizer": (("warmup_request", "the warm-up request is the first to need the tokenizer"),),
    "warmup_request": (("tokenizer_or_detokenizer", "the warm-up request is the first to need the tokenizer"),
                       ("port_in_use", "the warm-up talks to the server's own port")),
    "cpu_thread_oversubscription": (("weight_loading_io", "a starved CPU loads weights slowly"),
                                    ("jit_compile_slow", "a starved CPU compiles slowly")),
    "autotune_rank_desync": (("jit_compile_slow", "autotuning is a long first-start step"),
                             ("nccl_p2p_topology", "ranks wait for each other in a collective")),
    "patch_or_user_code": (("cuda_graph_capture", "added hooks run inside graph capture"),
                           ("dead_rank", "a hook that raises kills its rank")),
}  # fmt: skip
NEIGHBOUR_FACTOR = 0.3
NEIGHBOUR_MAX = 0.25


# A hardware or driver fault, as the kernel driver, NVML or the CUDA runtime reports it: a GPU that
# fell off the bus, an ECC error, a GSP timeout, an Xid the hardware raised. What follows it (a
# rendezvous that never completes, a rank that died, an NCCL error) is its consequence. Xids 13, 31
# and 43 are raised by the application's own kernels (an illegal address, an MMU fault, a stopped
# context) and 45 by the driver cleaning up after a kill: those follow a failure, they do not start one.
HARDWARE_FAULT = re.compile(
    r"(?i)\bXid\b[^\n]{0,40}?\):?\s*(?!(?:13|31|43|45)\b)\d+\b|\bSXid\b|fallen off the bus|"
    r"\b(?:uncorrectable|double[- ]bit|DBE)\b[^\n]{0,20}\bECC\b|\bECC error|ECCUncorrectable|"
    r"GPU is lost|GPU_IS_LOST|GSP (?:RPC )?timeout|RmInitAdapter failed|NVLink[^\n]{0,40}(?:fatal|error)"
)


def quotes_fault(facts: Iterable[Fact]) -> bool:
    """A fact quotes a hardware/driver fault: a first failure, whatever the log says later."""
    return any(HARDWARE_FAULT.search(fact.text) for fact in facts)


def cites(facts: Iterable[Fact], role: str) -> bool:
    return any(fact.role == role for fact in facts)


def consequence_only(facts: Sequence[Fact]) -> bool:
    """Quotes a failure that followed the first one, and not the first one itself."""
    return cites(facts, "consequence") and not cites(facts, "root")


def failure_tier(facts: Sequence[Fact]) -> int:
    """0: quotes the first failure; 1: quotes no failure; 2: quotes only what followed it."""
    if cites(facts, "root"):
        return 0
    return 2 if cites(facts, "consequence") else 1


def calibrated(match: Match) -> float:
    confidence = match.rule.confidence
    if consequence_only(match.facts):
        confidence *= CONSEQUENCE_ONLY_FACTOR
    if not match.held:
        confidence *= PENDING_FACTOR
    return round(confidence, 3)


def _fact_text(fact: Fact) -> str:
    role = f" [{fact.role}]" if fact.role else ""
    return f"{fact.text} ({fact.source}){role}"


def _against(match: Match, best: Match | None, ctx: Context) -> list[str]:
    """What speaks against this cause: the first failure it does not explain, a hold not yet
    passed, evidence that points to the cause ranked above it, and the kinds of evidence absent."""
    out: list[str] = []
    root = ctx.root_failure
    if root is not None and not cites(match.facts, "root"):
        out.append(f"does not explain the first failure: {root.text[:160]} (server.log:{root.lineno})")
    if not match.held:
        out.append(f"its hold ({match.rule.hold_s:.0f}s without progress) has not passed")
    if best is not None and best is not match and best.rule.cause != match.rule.cause and best.facts:
        out.append(f"points to {best.rule.cause} instead: {_fact_text(best.facts[0])}")
    if ctx.only_meta:
        out.append("nothing from the run itself (no log, stacks, GPUs or processes): a prior from the configuration")
    return out[:MAX_ITEMS]


def candidates_for(ranked: Sequence[Match], ctx: Context) -> tuple[Candidate, ...]:
    """The best match of each cause, in ranked order, at most three."""
    seen: dict[str, Match] = {}
    for match in ranked:
        seen.setdefault(match.rule.cause, match)
    best = ranked[0] if ranked else None
    out: list[Candidate] = []
    fault_first = best is not None and quotes_fault(best.facts)
    for match in list(seen.values())[:MAX_CANDIDATES]:
        confidence = calibrated(match)
        if fault_first and not quotes_fault(match.facts):
            # what follows a hardware fault (the rendezvous it stalls, the rank it kills) explains
            # a consequence, not the start
            confidence = round(confidence * CONSEQUENCE_ONLY_FACTOR, 3)
        out.append(
            Candidate(
                cause=match.rule.cause, confidence=confidence, rule=match.rule.id,
                evidence_for=tuple(_fact_text(f) for f in match.facts[:MAX_ITEMS]),
                evidence_against=tuple(_against(match, best, ctx)),
                check=match.rule.check or CHECKS.get(match.rule.cause, ""),
            )
        )  # fmt: skip
    # a winner that quotes only what followed the first failure explains no part of it: its
    # neighbours share its mechanism, not the root's (the caller fills from where it stopped)
    if best is not None and best.held and not consequence_only(best.facts):
        out.extend(_neighbours(best, [c.cause for c in out], MAX_CANDIDATES - len(out)))
    return tuple(out)


def _neighbours(best: Match, present: list[str], room: int) -> list[Candidate]:
    """Causes the winner's evidence also fits, for the differential's check; low confidence."""
    confidence = round(min(NEIGHBOUR_MAX, calibrated(best) * NEIGHBOUR_FACTOR), 3)
    out = []
    for cause, why in NEIGHBOURS.get(best.rule.cause, ())[: max(room, 0)]:
        if cause in present:
            continue
        out.append(Candidate(
            cause=cause, confidence=confidence, rule=None,
            evidence_for=(f"the evidence for {best.rule.cause} also fits it: {why}",),
            evidence_against=("no evidence of its own",),
            check=CHECKS.get(cause, ""),
        ))  # fmt: skip
    return out[:room]


PRIOR_MARK = "where the start stopped"  # how a prior candidate's evidence opens (the report names it a prior)


def with_priors(
    candidates: Sequence[Candidate], ctx: Context, outcome: str, rows: Sequence[PriorRow] | None = None
) -> tuple[Candidate, ...]:
    """`candidates`, filled up to three from where the start stopped (classify/verdict/priors.py): when no
    rule decides a stalled or crashed start, the differential is never empty."""
    room = MAX_CANDIDATES - len(candidates)
    if room <= 0:
        return tuple(candidates)
    where = where_of(ctx, outcome)
    present = {c.cause for c in candidates}
    out: list[Candidate] = []
    for row in rows_for(where, prior_rows() if rows is None else rows):
        for prior in sorted(row.causes, key=lambda c: (-row.confidence(c), row.causes.index(c))):
            if len(out) >= room:
                return (*candidates, *out)
            if prior.cause in present:
                continue
            present.add(prior.cause)
            out.append(Candidate(
                cause=prior.cause, confidence=row.confidence(prior), rule=None,
                evidence_for=(f"{PRIOR_MARK} ({where.describe()}): {prior.count} of {row.count} such "
                              f"reports had this cause (prior `{row.id}`, hangwatch/data/phase_priors.yaml)",),
                evidence_against=("a prior from where the start stopped: no evidence of its own",),
                check=CHECKS.get(prior.cause, ""),
            ))  # fmt: skip
    return (*candidates, *out)
