"""The terminal report of one verdict. Evidence text is printed verbatim (never as rich markup:
log lines are full of `[TP0]`-style brackets)."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from hangwatch.model import State, Verdict
from hangwatch.redact import redact_text, terminal_safe

STATE_STYLES = {
    State.STARTING: "cyan",
    State.PROGRESSING: "yellow",
    State.STALLED: "bold red",
    State.READY: "bold green",
    State.CRASHED: "bold magenta",
}


def _heading(console: Console, title: str) -> None:
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


def _phases(console: Console, verdict: Verdict) -> None:
    if not verdict.phases:
        return
    _heading(console, "Phases")
    width = max(len(rank) for rank in verdict.phases)
    for rank, phase in verdict.phases.items():
        mark = ("  ← culprit", "bold red") if rank in verdict.ranks else ""
        console.print(_line(f"  {rank:<{width}}  ", (phase.value, "cyan"), mark))


def _evidence(console: Console, verdict: Verdict) -> None:
    if not verdict.evidence:
        return
    _heading(console, "Evidence")
    for fact in verdict.evidence:
        console.print(_line("  • ", fact.text, ("  — " + str(fact.source), "dim")))


def _others(console: Console, verdict: Verdict) -> None:
    if verdict.ranks:
        console.print(_line(("Culprit ranks: ", "bold"), ", ".join(verdict.ranks)))
    if verdict.runners_up:
        _heading(console, "Runners-up")
        for other in verdict.runners_up:
            console.print(_line(f"  {other.cause}", (f"  rule {other.rule}, confidence {other.confidence:.2f}", "dim")))


def _missing(console: Console, verdict: Verdict) -> None:
    if not verdict.missing:
        return
    _heading(console, "Missing evidence")
    for missing in verdict.missing:
        console.print(_line("  • ", (missing.source, "bold"), f": {missing.reason}"))
        if missing.hint:
            console.print(_line("      ", (missing.hint, "dim")))


def _remedy(console: Console, verdict: Verdict) -> None:
    if verdict.remedy:
        _heading(console, "Remedy")
        console.print(_text("  " + verdict.remedy))
    for link in verdict.references:
        console.print(_text(f"  {link}", style="dim"))


def print_verdict(verdict: Verdict, console: Console) -> None:
    console.print(_summary(verdict))
    for line in _about(verdict):
        console.print(line)
    for section in (_phases, _evidence, _others, _missing, _remedy):
        section(console, verdict)
