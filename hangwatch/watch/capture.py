"""An `Observation` as `Evidence` (for the classifier) and as bundle files (docs/bundle-format.md).

Both are views of the same snapshot, so a bundle written by `collect` or `GET /bundle` and read
back by `diagnose` gives the classifier what the live loop gave it.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterable, Mapping
from typing import Any

from hangwatch._version import __version__
from hangwatch.bundle.write import gpus_json
from hangwatch.model import Evidence, GpuSample, ProcessRecord, ProcessStack, ThreadStack
from hangwatch.watch.observation import Observation, PhaseSpan, StackSample
from hangwatch.watch.rings import TimedPhase

__all__ = ["build_evidence", "bundle_files", "meta_dict", "phase_spans", "stacks_json", "timeline_json"]

_LOG_TAIL_BYTES = 4 << 20  # docs/bundle-format.md: "its tail, up to a few MiB"


def build_evidence(obs: Observation) -> Evidence:
    return obs.evidence(meta_dict(obs))


def meta_dict(obs: Observation) -> dict[str, Any]:
    server = obs.server
    flags = server.flags
    gpu = _first_gpu(obs.gpus[-1] if obs.gpus else None)
    return {
        "format": "hangwatch-bundle/1",
        "engine": server.engine,
        "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(obs.wall)),
        "observed_for_s": round(obs.t, 1),
        "since_last_progress_s": round(obs.progress.since_last_progress_s, 1),
        # extensions of docs/bundle-format.md's meta.json, read back by `diagnose`
        "log_quiet_s": round(obs.progress.log_quiet_s, 1),
        "progress_signals": list(obs.progress.signals),
        "missing": [{"source": m.source, "reason": m.reason, "hint": m.hint} for m in obs.missing],
        "endpoint": _endpoint_dict(obs.endpoint),
        "host": server.host_name or socket.gethostname(),
        "gpu_model": gpu.name if gpu else None,
        "compute_capability": gpu.compute_capability if gpu else None,
        "tp": _int(flags.get("tp") or flags.get("tp-size") or flags.get("tensor-parallel-size")),
        "nnodes": _int(flags.get("nnodes")) or 1,
        "source": f"hangwatch {__version__} attach",
        **({"stop": obs.stop} if obs.stop else {}),  # a stop hangwatch saw asked for (`stopped`, not `crashed`)
    }


def bundle_files(obs: Observation) -> dict[str, bytes]:
    server = obs.server
    files = {
        "meta.json": _json(meta_dict(obs)),
        "cmdline.txt": ((server.cmdline or "") + "\n").encode(),
        "env.txt": "".join(f"{k}={v}\n" for k, v in sorted(server.env.items())).encode(),
        "procs.json": _json([_proc_dict(p) for p in obs.procs]),
        "gpus.json": _json(gpus_json(obs.gpus)),  # the one gpus.json writer (bundle/write.py)
        "timeline.json": _json(_timeline_file(obs)),
        "stacktree.json": _json(obs.stack_tree),
    }
    if obs.log_tail:
        files["server.log"] = obs.log_tail[-_LOG_TAIL_BYTES:]
    if obs.ports_text is not None:
        files["ports.txt"] = obs.ports_text.encode()
    files.update(_stack_files(obs.stack_samples))
    if obs.preflight:
        files["preflight.json"] = _json({"findings": [f.to_dict() for f in obs.preflight]})
    return files


# ---------------------------------------------------------------- views for the published state


def stacks_json(latest: Mapping[str, ProcessStack]) -> dict[str, list[dict[str, Any]]]:
    return {label: [_thread_dict(th) for th in stack.threads] for label, stack in latest.items()}


def phase_spans(phases: Iterable[TimedPhase]) -> dict[str, tuple[PhaseSpan, ...]]:
    """`timeline_json` as frozen spans (what an Observation carries)."""
    return {rank: tuple(PhaseSpan(r["phase"], r["at"], r["end"], r["lineno"]) for r in rows)
            for rank, rows in timeline_json(phases).items()}


def timeline_json(phases: Iterable[TimedPhase]) -> dict[str, list[dict[str, Any]]]:
    """Rank -> phases in order: [{"phase", "at", "end"}]; a phase ends at its end line or the next begin."""
    out: dict[str, list[dict[str, Any]]] = {}
    for timed in phases:
        event, rows = timed.event, out.setdefault(timed.event.rank or "main", [])
        open_row = rows[-1] if rows and rows[-1]["end"] is None else None
        if event.end:
            if open_row is not None and open_row["phase"] == event.phase.value:
                open_row["end"] = timed.t
            continue
        if open_row is not None and open_row["phase"] == event.phase.value:
            continue  # a repeated begin (a tqdm bar's lines) is the same phase
        if open_row is not None:
            open_row["end"] = timed.t
        rows.append({"phase": event.phase.value, "at": timed.t, "end": None, "lineno": event.lineno})
    return out


# ---------------------------------------------------------------- helpers


def _endpoint_dict(answer: Any) -> dict[str, Any] | None:
    if answer is None:
        return None
    return {"url": answer.url, "status": answer.status, "ready": answer.ready, "detail": answer.detail}


def _timeline_file(obs: Observation) -> dict[str, Any]:
    return {
        "phases": {rank: [span.to_dict() for span in spans] for rank, spans in obs.phases.items()},
        "transitions": [tr.to_dict() for tr in obs.transitions],
        "progress": {"since_last_progress_s": round(obs.progress.since_last_progress_s, 1),
                     "signals": list(obs.progress.signals)},
        "sampler_latencies": dict(obs.timings),
    }


def _stack_files(samples: Iterable[StackSample]) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for sample in samples:
        stack = sample.stack
        suffix = ".native" if stack.native else ""
        files[f"stacks/{_safe(stack.label)}{suffix}.{stack.sample}.json"] = sample.raw
    return files


def _safe(label: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in label) or "process"


def _first_gpu(sample: GpuSample | None):  # -> GpuInfo | None
    return sample.gpus[0] if sample and sample.gpus else None


def _proc_dict(p: ProcessRecord) -> dict[str, Any]:
    return {
        "pid": p.pid, "ppid": p.ppid, "cmdline": p.cmdline, "role": p.role, "rank": p.rank, "state": p.state,
        "cpu_percent": p.cpu_percent, "rss_mib": p.rss_mib, "alive": p.alive, "exit_code": p.exit_code,
        "cpu_time_s": p.cpu_time_s, "num_threads": p.num_threads, "io_read_bytes": p.io_read_bytes,
        "wchan": list(p.wchan), "peer": p.peer,
    }


def _thread_dict(thread: ThreadStack) -> dict[str, Any]:
    return {"name": thread.name, "thread_id": thread.thread_id, "active": thread.active, "frames": [
        {"function": f.function, "qualname": f.qualname, "file": f.file, "line": f.line,
         "origin": f.origin.value, "library": f.library}
        for f in thread.frames
    ]}


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and value is not True else None
    except (TypeError, ValueError):
        return None


def _json(value: Any) -> bytes:
    return json.dumps(value, indent=2, default=str).encode() + b"\n"
