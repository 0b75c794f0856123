"""The page's data from a bundle: `hangwatch diagnose BUNDLE --html FILE` writes one self-contained file.

The bundle's files give what the live endpoints give (timeline.json, gpus.json, stacks/, stacktree.json,
preflight.json); the verdict is the classifier's on the bundle. Secrets are redacted as in the API.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hangwatch.bundle import evidence_from_files, read_bundle_files, read_recorded
from hangwatch.classify import Rule, classify
from hangwatch.errors import HangwatchError
from hangwatch.model import Evidence, ProcessStack, Verdict
from hangwatch.redact import redacted, redacted_verdict
from hangwatch.sinks.web import page_data, render_page

__all__ = ["bundle_node", "report_html", "write_report"]


def write_report(bundle: Path, out: Path, rules: Sequence[Rule]) -> Verdict:
    """Diagnose `bundle` and write the report to `out`; returns the verdict."""
    files = read_bundle_files(bundle)
    evidence = evidence_from_files(files)
    verdict = classify(evidence, rules)
    html = report_html(bundle_node(files, evidence, verdict, name=str(evidence.meta.get("host") or bundle.name)),
                       title=f"hangwatch report · {bundle.name}")
    try:
        out.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise HangwatchError(f"cannot write {out}: {exc.strerror or exc}") from None
    return verdict


def report_html(node: Mapping[str, Any], *, title: str) -> str:
    html, _ = render_page("report", title=title, data=page_data("report", title, [dict(node)], generated_at=time.time()))
    return html


def bundle_node(files: Mapping[str, bytes], evidence: Evidence, verdict: Verdict, *, name: str) -> dict[str, Any]:
    """A NodeData dict (see hangwatch.sinks.web) from a bundle's files and its verdict."""
    meta, recorded = evidence.meta, read_recorded(files)
    now = _float(meta.get("observed_for_s"))
    captured = recorded.captured_at
    started = captured - now if captured is not None and now is not None else None
    ranks = recorded.phases
    if ranks is None:  # a bundle pasted from a report: phases without times, one open bar each
        ranks = {rank: [{"phase": phase.value, "at": 0.0, "end": None}] for rank, phase in verdict.phases.items()}
        now = now or 1.0
    if now is None:
        now = max([_float(s.get("end")) or _float(s.get("at")) or 0.0 for spans in ranks.values() for s in spans] or [1.0])
    server = str(meta.get("host") or name)
    stacks: dict[str, Any] = {"server": server, "stacks": redacted(latest_stacks(evidence.stacks))}
    if recorded.stack_tree is not None:
        stacks["tree"] = recorded.stack_tree
    return {
        "name": name, "url": None, "error": None,
        "verdict": redacted_verdict(verdict),
        "timeline": {"server": server, "ranks": redacted(ranks), "started_at": started, "now": now},
        "stacks": stacks,
        "gpus": {"server": server, "started_at": started, "samples": list(recorded.gpu_samples)},
        "history": {"enabled": bool(recorded.transitions), "alerts": [], "transitions": [
            {"at": t.get("wall"), "state": t.get("state"), "cause": t.get("cause"), "rule": t.get("rule"),
             "phase": t.get("phase"), "episode_id": t.get("episode_id")} for t in reversed(recorded.transitions)]},
        "preflight": recorded.preflight,
    }


def latest_stacks(stacks: Sequence[ProcessStack]) -> dict[str, list[dict[str, Any]]]:
    """Label -> the threads of its newest sample (as GET /stacks gives them)."""
    latest: dict[str, ProcessStack] = {}
    for stack in stacks:
        if stack.label not in latest or stack.sample >= latest[stack.label].sample:
            latest[stack.label] = stack
    return {label: [{"name": th.name, "thread_id": th.thread_id, "active": th.active, "frames": [
        {"function": f.function, "qualname": f.qualname, "file": f.file, "line": f.line, "origin": f.origin.value,
         "library": f.library} for f in th.frames]} for th in stack.threads] for label, stack in latest.items()}


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
