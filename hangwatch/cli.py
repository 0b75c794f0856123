"""The `hangwatch` command: one small handler per subcommand, in hangwatch/commands/."""

from __future__ import annotations

import sys

import typer

from hangwatch.errors import HangwatchError

app = typer.Typer(
    name="hangwatch",
    help="Says why an SGLang or vLLM server is stuck starting up, with the evidence and the remedy.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
rules_app = typer.Typer(help="Validate and test rule files.", no_args_is_help=True)
app.add_typer(rules_app, name="rules")


def _register() -> None:
    # Each module adds its commands to `app` / `rules_app`.
    from hangwatch.commands import offline  # noqa: F401
    from hangwatch.commands import live  # noqa: F401


def main() -> None:
    _register()
    try:
        app()
    except HangwatchError as exc:
        message = f"hangwatch: error: {exc}"
        if exc.help_text:
            message += f"\n{exc.help_text}"
        print(message, file=sys.stderr)
        sys.exit(2)
