"""The live terminal view of `attach` / `run`, and the one-line forms for pipes and `--json`.

    render(watcher) -> rich renderable      each rank's phase and time there, GPUs, port, verdict
    verdict_line(verdict, t) -> str         one line per verdict change when stdout is not a TTY
    verdict_json(verdict, t, server) -> str one JSON object per verdict change (`--json`)

The verdict itself is drawn by sinks/report.py, as `diagnose` draws it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from hangwatch.model import Verdict
from hangwatch.redact import redact_obj, redact_text, terminal_safe
from hangwatch.sinks.report import verdict_panel
from hangwatch.watch.capture import timeline_json

if TYPE_CHECKING:
    from hangwatch.watch.watcher import Watcher

__all__ = ["render", "verdict_line", "verdict_json"]



def render(watcher: Watcher) -> Group:
    t = watcher.observed_for()
    parts: list[Any] = [_header(watcher, t), _ranks_table(watcher, t)]
    gpus = _gpu_table(watcher)
    if gpus is not None:
        parts.append(gpus)
    if watcher.verdict is not None:
        parts.append(verdict_panel(watcher.verdict))  # the same report as diagnose (sinks/report.py)
    return Group(*parts)


def _header(watcher: Watcher, t: float) -> Text:
    text = Text(terminal_safe(f"{watcher.view.server_name}   watched {t:.0f}s   "))
    quiet = watcher.since_last_progress(t)
    signals = ", ".join(watcher.recent_signals()) or "nothing"
    text.append(f"last progress {quiet:.0f}s ago ({signals} moved recently)   ")
    text.append(_port_text(watcher))
    return text


def _port_text(watcher: Watcher) -> str:
    port = getattr(watcher.server, "port", None)
    if port is None:
        return "port ?"
    listening = any(s.port == port for s in watcher.sources.ports)
    return f"port {port} {'listening' if listening else 'closed'}"


def _ranks_table(watcher: Watcher, t: float) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("process", "pid", "state", "phase", "in phase", "cpu%", "rss MiB", "stack top"):
        table.add_column(column)
    where = _current_phases(watcher)
    tops = _stack_tops(watcher)
    for proc in watcher.procs:
        if proc.role == "compiler":
            continue
        label = proc.rank or proc.role
        phase, since = where.get(proc.rank or "main", (None, None)) if proc.role != "other" else (None, None)
        state = (proc.state or "") if proc.alive else f"exited {proc.exit_code if proc.exit_code is not None else '?'}"
        table.add_row(label, str(proc.pid), state, phase or "-", f"{t - since:.0f}s" if since is not None else "-",
                      _num(proc.cpu_percent), _num(proc.rss_mib), tops.get(proc.pid, ""))
    compilers = sum(1 for p in watcher.procs if p.role == "compiler" and p.alive)
    if compilers:
        table.add_row("compilers", str(compilers), "", "", "", "", "", "")
    return table


def _current_phases(watcher: Watcher) -> dict[str, tuple[str, float]]:
    return {rank: (rows[-1]["phase"], rows[-1]["at"]) for rank, rows in timeline_json(watcher.log.phases).items() if rows}


def _stack_tops(watcher: Watcher) -> dict[int, str]:
    """pid -> the innermost frame of its main thread in the latest Python stack."""
    tops = {}
    for sample in watcher.stacks.latest().values():
        main = sample.stack.main
        if sample.stack.pid is not None and main is not None and main.top is not None:
            tops[sample.stack.pid] = main.top.display[:60]
    return tops


def _gpu_table(watcher: Watcher) -> Table | None:
    sample = watcher.gpus.latest()
    if sample is None:
        return None
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("gpu", "name", "memory MiB", "util%"):
        table.add_column(column)
    for gpu in sample.gpus:
        memory = f"{_num(gpu.memory_used_mib)} / {_num(gpu.memory_total_mib)}"
        table.add_row(str(gpu.index), gpu.name or "?", memory, _num(gpu.utilization_pct))
    return table


def verdict_line(verdict: Verdict, t: float) -> str:
    cause = f" {verdict.cause}" if verdict.cause else ""
    ranks = f" ranks={','.join(verdict.ranks)}" if verdict.ranks else ""
    phase = f" phase={verdict.phase.value}" if verdict.phase else ""
    line = f"[{t:7.1f}s] {verdict.state.value}{cause}{phase}{ranks}" + (f" — {verdict.title}" if verdict.title else "")
    return redact_text(terminal_safe(line))


def verdict_json(verdict: Verdict, t: float, server: str, **extra: Any) -> str:
    body = {"t": round(t, 2), "server": server, **verdict.to_dict(), **extra}
    return json.dumps(redact_obj(body), default=str)  # ensure_ascii: no raw control byte reaches the terminal


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"
