"""One verdict renderer: diagnose, the live view, the final report of attach/run and the Slack text
say the same things in the same colours (sinks/report.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rich.console import Console
from rich.text import Text

from hangwatch.model import State
from hangwatch.sinks.alerts import Alert, slack_message
from hangwatch.sinks.report import STATE_STYLES, print_verdict, verdict_panel, verdict_report
from helpers.serve_fixtures import SECRET, make_verdict


def _ansi(render: Callable[[Console], None]) -> str:
    console = Console(width=200, color_system="truecolor", force_terminal=True)
    with console.capture() as captured:
        render(console)
    return captured.get()


@pytest.mark.parametrize("state", list(State))
def test_diagnose_and_attach_colour_each_state_alike(state: State) -> None:
    verdict = make_verdict(state, "nccl_peer_exited" if state in (State.STALLED, State.CRASHED) else None)
    word = _ansi(lambda c: c.print(Text(state.value.upper(), style=STATE_STYLES[state]))).split("\n")[0]
    assert word in _ansi(lambda c: print_verdict(verdict, c))  # diagnose, and attach/run when they end
    panel = verdict_panel(verdict)  # the live view of attach/run
    assert panel.border_style == STATE_STYLES[state]
    assert str(panel.title).startswith(state.value.upper())


def test_the_live_panel_holds_the_report_sections() -> None:
    verdict = make_verdict()
    console = Console(width=200, record=True)
    console.print(verdict_panel(verdict))
    shown = console.export_text()
    report = verdict_report(verdict)
    for section in ("Phases", "Evidence", "Missing evidence", "Remedy", "TP1 exited with code 1"):
        assert section in shown and section in report
    assert SECRET not in shown and SECRET not in report


def test_slack_speaks_the_same_phrases() -> None:
    verdict = make_verdict(since_s=75.0)
    alert = Alert("firing", "srv", "ep1", verdict.to_dict(), at=100.0, started=25.0)
    text = str(slack_message(alert))
    assert "srv: STALLED" in text and "1m 15s" in text and "TP1" in text
    assert "TP1 exited with code 1" in text and "dmesg (not root)" in text


def test_diagnose_and_the_live_panel_show_the_differential() -> None:
    from hangwatch.model import Candidate, RunnerUp

    candidates = (
        Candidate("nccl_peer_exited", 0.9, "sglang.nccl_peer_exited", ("TP1 exited with code 1 (procs.json)",),
                  (), "`dmesg -T | grep -i oom` for why TP1 exited"),
        Candidate("nccl_init", 0.3, None, ("the evidence for nccl_peer_exited also fits it",),
                  (f"no evidence of its own HF_TOKEN={SECRET}",), "NCCL_DEBUG=INFO and rerun"),
    )
    verdict = make_verdict(candidates=candidates, runners_up=(RunnerUp("nccl_init", "nccl-init-hang", 0.3),))
    report = verdict_report(verdict)
    differential = report[report.index("Differential"):]
    assert "1. nccl_peer_exited  confidence 0.90  rule sglang.nccl_peer_exited" in differential
    assert "+ TP1 exited with code 1 (procs.json)" in differential
    assert "2. nccl_init  confidence 0.30  by mechanism" in differential
    assert "− no evidence of its own" in differential and SECRET not in report
    assert "check: NCCL_DEBUG=INFO and rerun" in differential
    assert "Runners-up" not in report  # the differential says it, with why
    console = Console(width=200, record=True)
    console.print(verdict_panel(verdict))
    assert "check: `dmesg -T | grep -i oom` for why TP1 exited" in console.export_text()
    coloured = _ansi(lambda c: print_verdict(verdict, c))
    assert _ansi(lambda c: c.print(Text("     check: ", style="cyan"), end="")) in coloured


def test_without_candidates_the_runners_up_stay() -> None:
    from hangwatch.model import RunnerUp

    report = verdict_report(make_verdict(runners_up=(RunnerUp("nccl_init", "nccl-init-hang", 0.3),)))
    assert "Runners-up" in report and "Differential" not in report


def test_a_prior_from_where_the_start_stopped_is_named_a_prior() -> None:
    from hangwatch.classify.verdict.differential import PRIOR_MARK
    from hangwatch.model import Candidate

    prior = Candidate("port_in_use", 0.25, None, (f"{PRIOR_MARK} (no phase line, crashed): 10 of 35 such reports",),
                      ("a prior from where the start stopped: no evidence of its own",), "`ss -ltnp`")  # fmt: skip
    report = verdict_report(make_verdict(candidates=(prior,)))
    assert "1. port_in_use  confidence 0.25  a prior" in report
