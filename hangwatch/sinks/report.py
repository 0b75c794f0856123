"""The one verdict renderer: `diagnose`, the live view and final report of `attach`/`run`, and
the Slack/alert text all take their words, order and colours from here.

    print_verdict(verdict, console)   the full report (diagnose; attach/run when they end)
    verdict_panel(verdict) -> Panel   the live view's verdict box: same sections, same colours
    verdict_report(verdict) -> str    the same report as plain text (logs, pipes)
    headline / duration_text / ranks_text / fact_line / missing_text: the shared phrases

Evidence text is printed verbatim (never as rich markup: log lines are full of `[TP0]`-style
brackets), with control sequences removed and secrets redacted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from hangwatch.classify.verdict.differential import PRIOR_MARK
from hangwatch.model import Eta, State, Verdict
from hangwatch.redact import redact_text, terminal_safe

# One palette for every terminal output (diagnose, attach, run), and its Slack counterpart.
STATE_STYLES = {
    State.STARTING: "cyan",
    State.PROGRESSING: "yellow",
    State.STALLED: "bold red",
    State.READY: "bold green",
    State.CRASHED: "bold magenta",
    State.UNKNOWN: "dim",
    State.STOPPED: "bold blue",
}
STATE_ICONS = {"stalled": ":large_orange_circle:", "crashed": ":red_circle:", "resolved": ":white_check_mark:",
               "stopped": ":black_square_for_stop:"}
_HEALTHY = {State.STARTING: "starting; nothing unusual yet", State.READY: "the server is ready"}


# ---------------------------------------------------------------- shared phrases


def headline(state: str, cause: str | None, confidence_label: str | None = None) -> str:
    """`STALLED: nccl_init (high confidence)`: the first words of every rendering."""
    text = state.upper()
    if cause:
        text += f": {cause}" + (f" ({confidence_label} confidence)" if confidence_label else "")
    return text


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    whole = int(seconds)
    return f"{whole // 60}m {whole % 60}s" if whole >= 60 else f"{whole}s"


def ranks_text(ranks: Sequence[str], limit: int = 12) -> str:
    if not ranks:
        return "none stands out"
    shown = ", ".join(ranks[:limit])
    return shown + (f" (+{len(ranks) - limit} more)" if len(ranks) > limit else "")


def fact_line(fact: Mapping[str, Any]) -> tuple[str, str]:
    """(text, source) of one evidence item, from `Fact.to_dict()`-shaped data."""
    return str(fact["text"]), str(fact["source"])


def missing_text(missing: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(f"{m['source']} ({m['reason']})" for m in missing)


# ---------------------------------------------------------------- terminal


class _Printer(Protocol):
    def print(self, text: Text, /) -> None: ...



def _heading(console: _Printer, title: str) -> None:
    console.print(_text(title, style="bold underline"))


def _line(*parts: tuple[str, str] | str) -> Text:
    return Text.assemble(*(_safe(p) if isinstance(p, str) else (_safe(p[0]), p[1]) for p in parts))


def _text(text: str, style: str = "") -> Text:
    """Text with control sequences removed: a bundle's strings must not retitle the terminal or set its clipboard."""
    return Text(_safe(text), style=style)


def _safe(text: str) -> str:
    return redact_text(terminal_safe(text))


def _summary(verdict: Verdict) -> Text:
    parts: list[tuple[str, str] | str] = [(verdict.state.value.upper(), STATE_STYLES[verdict.state])]
    if verdict.cause:
        parts += ["  ", (verdict.cause, "bold"), f"  confidence {verdict.confidence:.2f} ({verdict.confidence_label})"]
    if verdict.rule:
        parts.append((f"  rule {verdict.rule}", "dim"))
    return _line(*parts)


def _about(verdict: Verdict) -> list[Text]:
    lines = []
    if verdict.title:
        lines.append(_text(verdict.title, style="bold"))
    if verdict.message:
        lines.append(_text(verdict.message))
    where = [f"phase {verdict.phase.value}" if verdict.phase else None, _since(verdict), _engine(verdict)]
    if any(where):
        lines.append(_text(", ".join(w for w in where if w), style="dim"))
    return lines


def _since(verdict: Verdict) -> str | None:
    return f"no progress for {verdict.since_s:.0f}s" if verdict.since_s is not None else None


def _engine(verdict: Verdict) -> str | None:
    return f"engine {verdict.engine}" if verdict.engine else None


def _phases(console: _Printer, verdict: Verdict) -> None:
    if not verdict.phases:
        return
    _heading(console, "Phases")
    width = max(len(rank) for rank in verdict.phases)
    for rank, phase in verdict.phases.items():
        mark = ("  ← culprit", "bold red") if rank in verdict.ranks else ""
        console.print(_line(f"  {rank:<{width}}  ", (phase.value, "cyan"), mark))


def _evidence(console: _Printer, verdict: Verdict) -> None:
    if not verdict.evidence:
        return
    _heading(console, "Evidence")
    for fact in verdict.evidence:
        console.print(_line("  • ", fact.text, ("  — " + str(fact.source), "dim")))


def _others(console: _Printer, verdict: Verdict) -> None:
    if verdict.ranks:
        console.print(_line(("Culprit ranks: ", "bold"), ", ".join(verdict.ranks)))
    # the differential says more than the runners-up (one line per cause, with why and the check)
    if verdict.runners_up and not verdict.candidates:
        _heading(console, "Runners-up")
        for other in verdict.runners_up:
            console.print(_line(f"  {other.cause}", (f"  rule {other.rule}, confidence {other.confidence:.2f}", "dim")))


def _differential(console: _Printer, verdict: Verdict) -> None:
    """The candidates, most likely first: confidence, evidence for and against, and the one check
    that tells each from the next (`diagnose --json` `candidates`)."""
    if not verdict.candidates:
        return
    _heading(console, "Differential")
    for n, candidate in enumerate(verdict.candidates, 1):
        prior = bool(candidate.evidence_for) and candidate.evidence_for[0].startswith(PRIOR_MARK)
        source = f"rule {candidate.rule}" if candidate.rule else ("a prior" if prior else "by mechanism")
        console.print(_line(f"  {n}. ", (candidate.cause, "bold"), f"  confidence {candidate.confidence:.2f}",
                            (f"  {source}", "dim")))
        for item in candidate.evidence_for:
            console.print(_line(("     + ", "green"), item))
        for item in candidate.evidence_against:
            console.print(_line(("     − ", "red"), item))
        if candidate.check:
            console.print(_line(("     check: ", "cyan"), candidate.check))


def _live(console: _Printer, verdict: Verdict) -> None:
    """What only the live loop knows: the final blocker, a refined cause, the ETA (docs/live.md)."""
    b = verdict.blocker
    if b is not None:
        _heading(console, "Final blocker")
        who = b.rank or f"pid {b.pid}"
        pid = f" (pid {b.pid})" if b.rank and b.pid else ""
        held = f", for {duration_text(b.for_s)}" if b.for_s else ""
        console.print(_line("  ", (who, "bold red"), f"{pid}, state {b.state or '?'}: waits on {b.waits_on}{held}"))
        if b.frame:
            console.print(_line("    in ", (b.frame, "cyan")))
        if len(b.chain) > 1:
            console.print(_line("    ", ("wait-for chain: " + " -> ".join(b.chain), "dim")))
    if verdict.episode is not None and verdict.episode.refined:
        refined = ", ".join(f"{r.cause} ({r.confidence:.2f})" for r in verdict.episode.refined)
        console.print(_line(("Cause refined: ", "bold"), refined))
    if verdict.eta is not None:
        console.print(_line(("ETA: ", "bold"), eta_text(verdict.eta)))


def eta_text(eta: Eta) -> str:
    """"ready in ~1m40s, from 6 starts" (past starts of the same setup); once late, no promise:
    "overdue by 1m20s; usually ready in 45s, from 6 starts"."""
    starts = f"from {eta.from_starts} start{'s' if eta.from_starts != 1 else ''}"
    usual = f"usually ready in {duration_text(eta.usual_s)}, {starts}" if eta.usual_s is not None else starts
    if eta.overdue_s is not None:
        return f"overdue by {duration_text(eta.overdue_s)}; {usual}"
    if eta.ready_in_s is None:
        return f"none while stalled; {usual}" if eta.usual_s is not None else f"unknown ({starts})"
    return f"ready in ~{duration_text(eta.ready_in_s)}, {starts}"


def _missing(console: _Printer, verdict: Verdict) -> None:
    if not verdict.missing:
        return
    _heading(console, "Missing evidence")
    for missing in verdict.missing:
        console.print(_line("  • ", (missing.source, "bold"), f": {missing.reason}"))
        if missing.hint:
            console.print(_line("      ", (missing.hint, "dim")))


def _remedy(console: _Printer, verdict: Verdict) -> None:
    if verdict.remedy:
        _heading(console, "Remedy")
        console.print(_text("  " + verdict.remedy))
    for link in verdict.references:
        console.print(_text(f"  {link}", style="dim"))


def print_verdict(verdict: Verdict, console: Console) -> None:
    console.print(_summary(verdict))
    for line in _about(verdict):
        console.print(line)
    for section in (_phases, _evidence, _others, _differential, _live, _missing, _remedy):
        section(console, verdict)


def verdict_report(verdict: Verdict, width: int = 100) -> str:
    """`print_verdict` as plain text: for a pipe, a log file or a test."""
    console = Console(width=width, color_system=None, force_terminal=False, highlight=False, soft_wrap=True)
    with console.capture() as captured:
        print_verdict(verdict, console)
    return captured.get().rstrip("\n")


def verdict_panel(verdict: Verdict) -> Panel:
    """The live view's verdict box: the report's sections in the report's colours."""
    lines: list[RenderableType] = [*(_about(verdict) or [_text(_HEALTHY.get(verdict.state, verdict.state.value))])]
    for section in (_phases, _evidence, _others, _differential, _live, _missing, _remedy):
        collected = _Collect()
        section(collected, verdict)
        lines += collected.lines
    title = headline(verdict.state.value, verdict.cause, verdict.confidence_label if verdict.cause else None)
    return Panel(Group(*lines), title=_safe(title), border_style=STATE_STYLES[verdict.state])


_HANG = re.compile(r" *(?:• |[+−] |\d+\. |check: |in )?")


class _Collect:
    """Keeps what a section prints, so the panel is built from the very same sections. An indented
    line wraps under its own text (a hanging indent), not back at the panel's edge."""

    def __init__(self) -> None:
        self.lines: list[RenderableType] = []

    def print(self, text: Text) -> None:
        found = _HANG.match(text.plain)
        hang = found.end() if found else 0
        if not 0 < hang < 30:
            self.lines.append(text)
            return
        grid = Table.grid(padding=0)
        grid.add_column(no_wrap=True, width=hang)
        grid.add_column(overflow="fold")
        grid.add_row(text[:hang], text[hang:])
        self.lines.append(grid)
