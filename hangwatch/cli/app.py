"""The `hangwatch` command: a typer app that registers the plain handler functions of
`hangwatch.cli.offline` and `hangwatch.cli.live`."""

from __future__ import annotations

import os
import sys

import typer

from hangwatch._version import __version__
from hangwatch.cli import causes, fleet, history, live, offline, preflight
from hangwatch.errors import HangwatchError
from hangwatch.redact import redact_text, terminal_safe

app = typer.Typer(
    name="hangwatch",
    help="Says why an SGLang or vLLM server is stuck starting up, with the evidence and the remedy.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
rules_app = typer.Typer(help="Validate and test rule files.", no_args_is_help=True)
app.add_typer(rules_app, name="rules")
history_app = typer.Typer(help="The SQLite history of transitions, episodes, alerts and past starts.", no_args_is_help=True)
app.add_typer(history_app, name="history")


def _print_version(value: bool) -> None:
    if value:
        print(f"hangwatch {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Says why an SGLang or vLLM server is stuck starting up, with the evidence and the remedy."""

app.command()(offline.diagnose)
app.command("eval")(offline.evaluate)
rules_app.command("check")(offline.rules_check)
rules_app.command("test")(offline.rules_test)
app.command()(live.attach)
app.command(context_settings={"allow_interspersed_args": False})(live.run)
app.command()(live.collect)
app.command()(causes.causes)
app.command(context_settings={"allow_interspersed_args": False})(preflight.preflight)
app.command()(fleet.fleet)
history_app.command("prune")(history.prune)


def main() -> None:
    try:
        app()
    except HangwatchError as exc:
        message = f"hangwatch: error: {exc}"
        if exc.help_text:
            message += f"\n{exc.help_text}"
        _error(message)
        sys.exit(2)
    except (RecursionError, MemoryError, OverflowError, UnicodeError) as exc:
        # malformed input that got past the checks: one line, like every other error (HANGWATCH_DEBUG=1: traceback)
        if os.environ.get("HANGWATCH_DEBUG"):
            raise
        _error(f"hangwatch: error: the input is malformed ({type(exc).__name__}: {str(exc)[:200]})")
        sys.exit(2)


def _error(message: str) -> None:
    """Errors quote input (file names, JSON); they pass the same boundary as every output."""
    text = redact_text(terminal_safe(message))
    print(text.encode(sys.stderr.encoding or "utf-8", "replace").decode(sys.stderr.encoding or "utf-8"), file=sys.stderr)
