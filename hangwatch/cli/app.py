"""The `hangwatch` command: a typer app that registers the plain handler functions of
`hangwatch.cli.offline` and `hangwatch.cli.live`."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args, get_origin

import typer
import typer.main

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
    # click's plain help: it wraps to the terminal and reads the same piped (rich boxes cut words at 80 columns)
    rich_markup_mode=None,
)
rules_app = typer.Typer(help="Validate and test rule files.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(rules_app, name="rules")
history_app = typer.Typer(help="Prune the SQLite history file.", no_args_is_help=True,
                          rich_markup_mode=None)
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

# One example per command, shown last in its --help ("\b" keeps click from re-wrapping the lines).
EXAMPLES = {
    "diagnose": "hangwatch diagnose stuck.tar.gz --html stuck.html",
    "eval": "hangwatch eval ../shared/corpus/dev --json",
    "check": "hangwatch rules check my-rules/",
    "test": "hangwatch rules test my-rules/ --tests my-rule-tests/",
    "attach": "hangwatch attach 4242 --serve --exit-on ready,stalled,crashed --timeout 900",
    "run": "hangwatch run -- python -m sglang.launch_server --model-path M --tp 8",
    "collect": "hangwatch collect 4242 -o stuck.tar.gz",
    "causes": "hangwatch causes nccl_init",
    "preflight": "hangwatch preflight -- vllm serve M --tensor-parallel-size 2",
    "fleet": "hangwatch fleet http://node1:9464 http://node2:9464 --token-file T --once",
    "prune": "hangwatch history prune --days 7",
}


# The one line each command gets in `hangwatch --help`: short enough that click never cuts it with "...".
SUMMARIES = {
    "diagnose": "Say why the server in a bundle is stuck.",
    "eval": "Score a corpus of bundles against their expected.json.",
    "check": "Validate rule files.",
    "test": "Run each rule on its fires and quiet bundles.",
    "attach": "Watch a running server start and say why it is stuck.",
    "run": "Start a server and watch it from its first second.",
    "collect": "Write an evidence bundle of a running server.",
    "causes": "Print the causes a verdict can name.",
    "preflight": "Check the host and the command before the launch.",
    "fleet": "Show several nodes' agents as one.",
    "prune": "Drop old history now (a daemon prunes itself).",
}


def _add(group: typer.Typer, name: str, handler: Callable[..., Any], *, options_after_args: bool = True) -> None:
    """Register a command with its one-line summary and its example (`run -- CMD` takes none after CMD)."""
    settings = None if options_after_args else {"allow_interspersed_args": False}
    group.command(name, short_help=SUMMARIES[name], epilog=f"\b\nExample:\n  {EXAMPLES[name]}",
                  context_settings=settings)(handler)


_add(app, "diagnose", offline.diagnose)
_add(app, "eval", offline.evaluate)
_add(rules_app, "check", offline.rules_check)
_add(rules_app, "test", offline.rules_test)
_add(app, "attach", live.attach)
_add(app, "run", live.run, options_after_args=False)
_add(app, "collect", live.collect)
_add(app, "causes", causes.causes)
_add(app, "preflight", preflight.preflight, options_after_args=False)
_add(app, "fleet", fleet.fleet)
_add(history_app, "prune", history.prune)


_NAMED = {"host": "ADDR", "token": "TOKEN", "exit_on": "STATES", "pid": "PID", "port": "PORT",
          "interval": "SECONDS", "timeout": "SECONDS"}


def _plain_metavar(param: Any) -> str | None:
    """A user-facing placeholder for a value (PATH, PORT, SECONDS, TEXT), never a Python type like <list[Path]>."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return None
    if param.metavar and not str(param.metavar).startswith(("<", "{")):
        return str(param.metavar)
    annotation = param.type_descriptor.annotation
    inner = get_args(annotation)[0] if get_origin(annotation) is list else annotation
    name = param.name or "value"
    if name in _NAMED:
        text = _NAMED[name]
    elif inner is Path:
        text = "PATH"
    elif "url" in name or "webhook" in name or name == "prometheus":
        text = "URL"
    elif inner is int:
        text = "N"
    elif inner is float:
        text = "NUMBER"
    else:
        text = "URL" if name == "urls" else "TEXT"
    return text + "..." if param.nargs == -1 else text


def cli_command() -> Any:
    """The click command `main()` runs: typer's, with plain placeholders in every --help."""
    command = typer.main.get_command(app)
    stack = [command]
    while stack:
        current = stack.pop()
        for param in current.params:
            param.metavar = _plain_metavar(param)
            # typer (pinned) labels values with Python types (<int>, <list[str]>) and wraps a required
            # argument in braces; a user reads the placeholder alone (tests/unit/cli/test_help.py keeps it)
            shown = param.metavar if param.param_type_name == "option" else None
            param.display_type_rich = (lambda text: lambda ctx: text)(shown)  # type: ignore[attr-defined]
            if param.metavar is not None:
                param._usage_display_name = (lambda text: lambda: text)(param.metavar)  # type: ignore[attr-defined]
        stack.extend(getattr(current, "commands", {}).values())
    return command


def main() -> None:
    try:
        cli_command()(prog_name="hangwatch")
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
