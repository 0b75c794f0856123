"""A watcher's state as `Evidence` (for the classifier) and as bundle files (BUNDLE.md).

Both are views of the same ring buffers, so a bundle written by `collect` or `GET /bundle` and
read back by `diagnose` gives the classifier what the live loop gave it.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterable, Mapping
from typing import Any

from hangwatch._version import __version__
from hangwatch.model import Evidence, GpuSample, ProcessRecord, ThreadStack
from hangwatch.sources.gpus import gpus_json
from hangwatch.watch.rings import StackSample, TimedPhase

# The watcher whose rings are read. Typed loosely on purpose: importing `Watcher` here would make
# watcher <-> capture a cycle; the frozen `Observation` that watch hands out replaces this.
Watcher = Any

__all__ = ["build_evidence", "bundle_files", "meta_dict", "stacks_json", "timeline_json"]

_LOG_TAIL_BYTES = 4 << 20  # BUNDLE.md: "its tail, up to a few MiB"


def build_evidence(watcher: Watcher, t: float) -> Evidence:
    server, sources = watcher.server, watcher.sources
    lines = list(watcher.log.lines)
    return Evidence(
        meta=meta_dict(watcher, t),
        engine=sources.engine_name,
        log=tuple(lines[-watcher.config.evidence_log_lines:]),
        phases=tuple(tp.event for tp in watcher.log.phases),
        cmdline=getattr(server, "cmdline", None),
        flags=dict(getattr(server, "flags", None) or {}),
        env=_filtered_env(server),
        procs=tuple(watcher.procs),
        ports=sources.ports,
        ports_text=sources.ports_text,
        gpus=tuple(watcher.gpus.samples),
        stacks=tuple(sample.stack for sample in watcher.stacks.all()),
        missing=sources.missing(),
        observed_for_s=round(t, 2),
        since_last_progress_s=round(watcher.since_last_progress(t), 2),
        progress_signals=watcher.recent_signals(),
        log_quiet_s=round(watcher.since_last_log(t), 2),
        server_port=getattr(server, "port", None),
        endpoint=sources.endpoint,
        preflight=tuple(watcher.config.preflight),
    )


def meta_dict(watcher: Watcher, t: float) -> dict[str, Any]:
    server = watcher.server
    flags = getattr(server, "flags", None) or {}
    gpu = _first_gpu(watcher.gpus.latest())
    return {
        "format": "hangwatch-bundle/1",
        "engine": watcher.sources.engine_name,
        "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(watcher.started_wall + t)),
        "observed_for_s": round(t, 1),
        "since_last_progress_s": round(watcher.since_last_progress(t), 1),
        # extensions of BUNDLE.md's meta.json, read back by `diagnose`
        "log_quiet_s": round(watcher.since_last_log(t), 1),
        "progress_signals": list(watcher.recent_signals()),
        "missing": [{"source": m.source, "reason": m.reason, "hint": m.hint} for m in watcher.sources.missing()],
        "endpoint": _endpoint_dict(watcher.sources.endpoint),
        "host": getattr(server, "host_name", None) or socket.gethostname(),
        "gpu_model": gpu.name if gpu else None,
        "compute_capability": gpu.compute_capability if gpu else None,
        "tp": _int(flags.get("tp") or flags.get("tp-size") or flags.get("tensor-parallel-size")),
        "nnodes": _int(flags.get("nnodes")) or 1,
        "source": f"hangwatch {__version__} attach",
    }


def bundle_files(watcher: Watcher) -> dict[str, bytes]:
    t = watcher.observed_for()
    server, sources = watcher.server, watcher.sources
    files = {
        "meta.json": _json(meta_dict(watcher, t)),
        "cmdline.txt": ((getattr(server, "cmdline", None) or "") + "\n").encode(),
        "env.txt": "".join(f"{k}={v}\n" for k, v in sorted(_filtered_env(server).items())).encode(),
        "procs.json": _json([_proc_dict(p) for p in watcher.procs]),
        "gpus.json": _json(gpus_json(watcher.gpus.samples)),  # the one gpus.json writer (sources/gpus.py)
        "timeline.json": _json(_timeline_file(watcher, t)),
    }
    log = watcher.log.raw_tail()
    if log:
        files["server.log"] = log[-_LOG_TAIL_BYTES:]
    if sources.ports_text is not None:
        files["ports.txt"] = sources.ports_text.encode()
    files.update(_stack_files(watcher.stacks.all()))
    if watcher.config.preflight:
        files["preflight.json"] = _json({"findings": [f.to_dict() for f in watcher.config.preflight]})
    return files


# ---------------------------------------------------------------- views for WatchView


def stacks_json(latest: Mapping[str, StackSample]) -> dict[str, list[dict[str, Any]]]:
    return {label: [_thread_dict(th) for th in sample.stack.threads] for label, sample in latest.items()}


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


def _timeline_file(watcher: Watcher, t: float) -> dict[str, Any]:
    return {
        "phases": timeline_json(watcher.log.phases),
        "transitions": [tr.to_dict() for tr in watcher.transitions.items()],
        "progress": {"since_last_progress_s": round(watcher.since_last_progress(t), 1),
                     "signals": list(watcher.recent_signals())},
        "sampler_latencies": dict(watcher.sources.latencies),
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


def _filtered_env(server: Any) -> dict[str, str]:
    from hangwatch.engines import env_prefixes
    from hangwatch.redact import filter_env

    return dict(filter_env(getattr(server, "env", None) or {}, env_prefixes()))


def _first_gpu(sample: GpuSample | None):  # -> GpuInfo | None
    return sample.gpus[0] if sample and sample.gpus else None


def _proc_dict(p: ProcessRecord) -> dict[str, Any]:
    return {
        "pid": p.pid, "ppid": p.ppid, "cmdline": p.cmdline, "role": p.role, "rank": p.rank, "state": p.state,
        "cpu_percent": p.cpu_percent, "rss_mib": p.rss_mib, "alive": p.alive, "exit_code": p.exit_code,
        "cpu_time_s": p.cpu_time_s, "num_threads": p.num_threads, "io_read_bytes": p.io_read_bytes,
        "wchan": list(p.wchan),
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
