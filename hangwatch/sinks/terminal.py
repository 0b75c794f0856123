"""The live terminal view of `attach` / `run`, and the one-line forms for pipes and `--json`.

    render(observation, verdict) -> rich renderable      each rank's phase and time there, GPUs, port, verdict
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
from hangwatch.redact import redact_obj, terminal_text
from hangwatch.sinks.report import verdict_panel

if TYPE_CHECKING:
    from hangwatch.watch.observation import Observation

__all__ = ["render", "verdict_line", "verdict_json"]



def render(obs: Observation, verdict: Verdict | None) -> Group:
    parts: list[Any] = [_header(obs), _ranks_table(obs, verdict)]
    gpus = _gpu_table(obs)
    if gpus is not None:
        parts.append(gpus)
    if verdict is not None:
        parts.append(verdict_panel(verdict))  # the same report as diagnose (sinks/report.py)
    return Group(*parts)


def _header(obs: Observation) -> Text:
    text = Text(terminal_text(f"{obs.server.name}   watched {obs.t:.0f}s   "))
    signals = ", ".join(obs.progress.signals) or "nothing"
    text.append(terminal_text(f"last progress {obs.progress.since_last_progress_s:.0f}s ago ({signals} moved recently)   "))
    text.append(_port_text(obs))
    return text


def _port_text(obs: Observation) -> str:
    if obs.server.port is None:
        return "port ?"
    return f"port {obs.server.port} {'listening' if obs.port_listening else 'closed'}"


def _ranks_table(obs: Observation, verdict: Verdict | None = None) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("process", "pid", "state", "phase", "in phase", "cpu%", "rss MiB"):
        table.add_column(column)
    table.add_column("stack top", overflow="fold")  # a frame wraps whole at 80 columns, never cut with "…"
    where = {rank: (spans[-1].phase, spans[-1].at) for rank, spans in obs.phases.items() if spans}
    # the verdict's phase per rank, so the table and the verdict name the same one (after "Load weight
    # end." both say the next phase)
    named = {rank: phase.value for rank, phase in verdict.phases.items()} if verdict is not None else {}
    where = {rank: (named.get(rank, phase), since) for rank, (phase, since) in where.items()}
    tops = _stack_tops(obs)
    for proc in obs.procs:
        if proc.role == "compiler":
            continue
        label = proc.rank or proc.role
        phase, since = where.get(proc.rank or "main", (None, None)) if proc.role != "other" else (None, None)
        state = (proc.state or "") if proc.alive else f"exited {proc.exit_code if proc.exit_code is not None else '?'}"
        table.add_row(*_cells(label, str(proc.pid), state, phase or "-", f"{obs.t - since:.0f}s" if since is not None else "-",
                              _num(proc.cpu_percent), _num(proc.rss_mib), tops.get(proc.pid, "")))
    compilers = sum(1 for p in obs.procs if p.role == "compiler" and p.alive)
    if compilers:
        table.add_row("compilers", str(compilers), "", "", "", "", "", "")
    return table


def _stack_tops(obs: Observation) -> dict[int, str]:
    """pid -> the innermost frame of its main thread in the latest Python stack."""
    tops = {}
    for stack in obs.stacks.values():
        main = stack.main
        top = main.readable_top if main is not None else None
        if stack.pid is not None and top is not None:
            tops[stack.pid] = top.display[:60]
    return tops


def _gpu_table(obs: Observation) -> Table | None:
    if not obs.gpus:
        return None
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("gpu", "name", "memory MiB", "util%"):
        table.add_column(column)
    for gpu in obs.gpus[-1].gpus:
        memory = f"{_num(gpu.memory_used_mib)} / {_num(gpu.memory_total_mib)}"
        table.add_row(*_cells(str(gpu.index), gpu.name or "?", memory, _num(gpu.utilization_pct)))
    return table


def verdict_line(verdict: Verdict, t: float) -> str:
    cause = f" {verdict.cause}" if verdict.cause else ""
    ranks = f" ranks={','.join(verdict.ranks)}" if verdict.ranks else ""
    phase = f" phase={verdict.phase.value}" if verdict.phase else ""
    line = f"[{t:7.1f}s] {verdict.state.value}{cause}{phase}{ranks}" + (f" — {verdict.title}" if verdict.title else "")
    return terminal_text(line)


def verdict_json(verdict: Verdict, t: float, server: str, **extra: Any) -> str:
    body = {"t": round(t, 2), "server": server, **verdict.to_dict(), **extra}
    return json.dumps(redact_obj(body), default=str)  # ensure_ascii: no raw control byte reaches the terminal


def _cells(*values: str) -> list[Text]:
    """Table cells from watched-side strings (a rank's frame, a GPU's name): `Text`, so rich reads
    no markup in them (`[link=…]` would become a hyperlink escape), each through `terminal_text`."""
    return [Text(terminal_text(value)) for value in values]


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"
