"""`hangwatch preflight [--json] -- CMD...`: predict the known hangs of a launch before it starts.

Exit 1 when a finding is critical, else 0; bad input exits 2 (hangwatch.cli.main).
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import Annotated, TextIO

import typer

from hangwatch.classify.preflight.checks import Report
from hangwatch.cli.preflight_run import run_preflight
from hangwatch.redact import TerminalWriter, redact_obj

__all__ = ["preflight", "render_report"]

_MARK = {"critical": "CRITICAL", "warning": "WARNING ", "info": "info    "}


def preflight(
    cmd: Annotated[list[str], typer.Argument(help="The launch command, after --.", metavar="-- CMD...")],
    json_out: Annotated[bool, typer.Option("--json", help="Print {findings, checked, skipped} as JSON.")] = False,
    rules: Annotated[list[Path] | None, typer.Option("--rules", help="Extra rule file or directory with preflight: checks (repeatable).")] = None,
    gpus_from: Annotated[Path | None, typer.Option("--gpus-from", help="GPU and PCI facts from a recording (JSON) instead of this host's NVML and sysfs.")] = None,
) -> None:
    """Check the host and the launch command for the known causes of a hung start, before launching."""
    from hangwatch.classify import RULES_DIR

    report, _ = run_preflight(cmd, os.environ, [RULES_DIR, *(rules or [])], gpus_from)
    if json_out:
        # ASCII-escaped and redacted: paths and the command line are the user's, control bytes included
        print(json.dumps(redact_obj({**report.to_dict(), "learned_changes": _learned(cmd, io.StringIO())}), indent=2))
    else:
        render_report(report)
        _learned(cmd, sys.stdout)
    raise typer.Exit(1 if report.critical else 0)


def _learned(cmd: list[str], out: TextIO) -> list[dict[str, str]]:
    """The safe changes after which this setup started before (docs/remedy.md), from the history."""
    from hangwatch.cli.remedy import default_history_path, print_proposals
    from hangwatch.sinks.store import HistoryStore

    path = default_history_path()
    if not path.exists():
        return []
    try:
        store = HistoryStore(str(path))
    except Exception:  # an unreadable history costs only the proposal
        return []
    try:
        return print_proposals(cmd, store, out)
    finally:
        store.close()


def preflight_before_launch(cmd: list[str], *, strict: bool, rules: list[Path] | None = None) -> Report | None:
    """`hangwatch run`'s preflight: findings on stderr; with `strict`, a critical one stops the launch.

    A preflight that cannot run (a bad recording, an unreadable rule) never stops the launch."""
    import sys

    from hangwatch.classify import RULES_DIR
    from hangwatch.errors import HangwatchError

    try:
        report, _ = run_preflight(cmd, os.environ, [RULES_DIR, *(rules or [])])
    except HangwatchError as exc:
        print(f"hangwatch: preflight skipped: {exc}", file=sys.stderr)
        return None
    render_report(report, sys.stderr, verbose=False, prefix="hangwatch: ")
    if strict and report.critical:
        print("hangwatch: not launching: the preflight found a critical problem (--preflight-strict)", file=sys.stderr)
        raise typer.Exit(1)
    return report


def render_report(report: Report, out: TextIO | None = None, *, verbose: bool = True, prefix: str = "") -> None:
    """The findings as a table for people: severity, cause, title, then evidence and remedy."""
    import sys

    gate = TerminalWriter(out or sys.stdout)  # paths and the command line may hold escapes and secrets
    counts = {s: sum(f.severity == s for f in report.findings) for s in ("critical", "warning", "info")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no findings"
    gate.write(f"{prefix}preflight: {summary} ({len(report.checked)} checks passed or did not apply, {len(report.skipped)} skipped)\n")
    for finding in report.findings:
        gate.write(f"{_MARK[finding.severity]}  {finding.cause:<28} {finding.title}\n")
        for fact in finding.evidence:
            gate.write(f"          - {fact.text}  [{fact.source}]\n")
        if finding.message:
            gate.write(f"          {finding.message}\n")
        gate.write(f"          remedy: {finding.remedy}\n")
    if verbose:
        groups: dict[str, list[str]] = {}
        for skipped in report.skipped:  # grouped by the reasons, not by which facts they cost
            reasons = "; ".join(sorted({part.split(": ", 1)[-1] for part in skipped.why.split("; ")}))
            groups.setdefault(reasons, []).append(skipped.check)
        for why, checks in groups.items():
            gate.write(f"skipped   {', '.join(checks)}\n          because {why}\n")
