"""Fill what a live monitor would have measured from what the report pasted into its log.

`with_pasted(evidence)` returns the evidence with GPUs (from an `nvidia-smi` table or a harness's
device list), kernel messages (Xid, OOM-kill lines), stacks (the engines' own dumps in the log:
faulthandler, the scheduler watchdog's py-spy text), processes (`ps`/`top` rows), the rank count
and the size of /dev/shm added where the bundle itself has none. Evidence that was measured
always wins over evidence that was pasted. Pure.
"""

from __future__ import annotations

from dataclasses import replace

from hangwatch.engines import flag_aliases
from hangwatch.model import Evidence, GpuSample
from hangwatch.parse import logdumps, pasted


def with_pasted(evidence: Evidence) -> Evidence:
    if not evidence.log:
        return evidence
    texts = [line.text for line in evidence.log]
    whole = "\n".join(texts)  # each reader runs only where its marks appear at all: logs are long
    changes: dict[str, object] = {}
    if not evidence.gpus and ("MiB" in whole or "GPU " in whole or "device" in whole or "compute_cap" in whole):
        gpus = pasted.gpus_in(texts)
        if gpus:
            changes["gpus"] = (GpuSample(0.0, gpus),)
    if "NVRM" in whole or "Xid" in whole or "Kill" in whole or "oom" in whole or "blocked for more" in whole or "DMAR" in whole:
        kernel = pasted.kernel_lines_in(texts)
        if kernel:
            changes["dmesg"] = (*evidence.dmesg, *(k for k in kernel if k not in evidence.dmesg))
    # the engines' own dumps (faulthandler, the scheduler watchdog's py-spy text) when nothing was sampled
    if not evidence.stacks and ("most recent call first" in whole or ("Process " in whole and "Thread " in whole)):
        stacks = logdumps.stacks_in(evidence.log)
        if stacks:
            changes["stacks"] = stacks
    if not evidence.procs and "PID" in whole:  # a ps/top listing comes with its header
        procs = pasted.as_records(pasted.processes_in(texts))
        if procs:
            changes["procs"] = procs
    meta = dict(evidence.meta)
    if meta.get("tp") is None and not any(k.lstrip("-").replace("_", "-") in _tp_keys() for k in evidence.flags):
        ranks = pasted.ranks_in(texts) if ("ranks" in whole or "Rank" in whole) else None
        if ranks:
            meta["tp"] = ranks
    if meta.get("shm_size_mib") is None:
        size = pasted.shm_size_mib_in(texts) if "/dev/shm" in whole else None
        if size is not None:
            meta["shm_size_mib"] = size
    if meta != dict(evidence.meta):
        changes["meta"] = meta
    return replace(evidence, **changes) if changes else evidence  # type: ignore[arg-type]


def _tp_keys() -> frozenset[str]:
    """`tp` and every engine's spelling of it (`tp-size`, `tensor-parallel-size`)."""
    return frozenset({"tp", *(long for long, short in flag_aliases().items() if short == "tp")})
