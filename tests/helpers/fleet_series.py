"""A fleet's worth of agents' series, written as OpenMetrics and backfilled into a real Prometheus's
TSDB with `promtool tsdb create-blocks-from openmetrics` (for the scale bench and the page test).

The series are the ones a real agent exports (hangwatch/sinks/metrics.py names them) for `nodes`
nodes in launches of `per_launch` nodes, all ready but one: the node `stuck` of the first launch is
stalled in distributed init, and the others of its launch wait on it in weight loading. Samples run
every `step_s` seconds up to `now`, so instant queries at now see them.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

PROMTOOL = shutil.which("promtool")

STUCK_CAUSE = "multinode_rendezvous"


def instance(i: int) -> str:
    """Loopback addresses (127.0.0.0/8): the fleet asks the node apart's agent for details, and a
    test or bench may only ever reach this machine (nothing listens there: refused at once)."""
    return f"127.1.{i // 250}.{i % 250 + 1}:9464"


def launch_name(i: int, per_launch: int) -> str:
    head = (i // per_launch) * per_launch
    return f"sglang:127.1.{head // 250}.{head % 250 + 1}:5000/{per_launch}"


def openmetrics(nodes: int, *, per_launch: int = 8, stuck: int = 3, now: float, span_s: float = 300, step_s: float = 15,
                dead_url: str | None = None) -> str:
    """The text: one family at a time, each series' samples in time order, `# EOF` last.
    `dead_url`: the `url` the stuck node's agent exports (a test points it at a real or a closed port)."""
    times = [now - span_s + k * step_s for k in range(int(span_s // step_s) + 1)]
    families: dict[str, list[str]] = {n: [] for n in ("up", "hangwatch_agent_info", "hangwatch_verdict_info",
                                                      "hangwatch_phase_index", "hangwatch_seconds_since_progress")}
    for i in range(nodes):
        inst = instance(i)
        key = f'job="hangwatch",instance="{inst}",host="gpu{i:04d}",server="sglang pid 1 on 0.0.0.0:30000"'
        in_first = i < per_launch
        is_stuck = i == stuck
        state, phase, cause, index = (("stalled", "dist_init", STUCK_CAUSE, 1) if is_stuck else
                                      ("stalled", "weight_load", "waiting_on_peer", 2) if in_first else
                                      ("ready", "ready", "", 8))
        url = (dead_url if is_stuck and dead_url else f"http://{inst}")
        rank = i % per_launch
        series = {
            "up": (f"{{{key}}}", lambda t: 1),
            "hangwatch_agent_info": (f'{{{key},url="{url}",launch="{launch_name(i, per_launch)}",node_rank="{rank}",'
                                     f'nnodes="{per_launch}"}}', lambda t: 1),
            "hangwatch_verdict_info": (f'{{{key},state="{state}",phase="{phase}",cause="{cause}"}}', lambda t: 1),
            "hangwatch_phase_index": (f"{{{key}}}", lambda t, index=index: index),
            "hangwatch_seconds_since_progress": (f"{{{key}}}", lambda t, bad=in_first: (t - times[0] + 30) if bad else 0.5),
        }
        for name, (labels, value) in series.items():
            families[name].extend(f"{name}{labels} {value(t)} {t:.3f}" for t in times)
    out = []
    for name, lines in families.items():
        out.append(f"# TYPE {name} gauge")
        out.extend(lines)
    out.append("# EOF")
    return "\n".join(out) + "\n"


def backfill(text: str, tmp: Path) -> Path:
    """A TSDB directory holding `text`'s samples, made by the real promtool; returns its path."""
    if PROMTOOL is None:
        raise RuntimeError("promtool not installed (apt-get install prometheus)")
    source, data = tmp / "fleet.om", tmp / "prom-data"
    source.write_text(text)
    result = subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
                            capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"promtool create-blocks-from failed: {result.stdout[-1000:]}{result.stderr[-1000:]}")
    return data
