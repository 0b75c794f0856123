"""Every --help reads whole at 80 columns and piped: no cut words, no Python type labels, one example."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from hangwatch.cli.app import cli_command


def _commands() -> list[tuple[list[str], bool]]:
    """Every command and group as the words that name it, and whether it is a group."""
    found: list[tuple[list[str], bool]] = []
    stack: list[tuple[list[str], object]] = [([], cli_command())]
    while stack:
        path, command = stack.pop()
        subcommands = getattr(command, "commands", {})
        found.append((path, bool(subcommands)))
        stack.extend(([*path, name], sub) for name, sub in subcommands.items())
    return sorted(found)


def _help(words: list[str]) -> str:
    env = {**os.environ, "COLUMNS": "80", "TERM": "dumb"}
    done = subprocess.run([sys.executable, "-m", "hangwatch", *words, "--help"], capture_output=True, text=True,
                          timeout=60, check=False, env=env)  # piped: stdout is no terminal
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(("words", "is_group"), _commands(), ids=lambda value: " ".join(value) if isinstance(value, list) else "")
def test_help_fits_80_columns_piped_with_plain_placeholders(words: list[str], is_group: bool) -> None:
    text = _help(words)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text and not re.search(r"\w\.\.\.(\s|$)", re.sub(r"\b[A-Z]+\.\.\.", "", text))
    assert not re.search(r"<(bool|int|str|float|path|list\[)", text), text  # no Python type labels
    assert "{" not in text.split("\n", 1)[0]  # the usage line names arguments plainly
    assert "╭" not in text and "│" not in text  # no boxes to cut
    if not is_group:
        assert re.search(r"Example:\n +hangwatch " + " ".join(words) + " ", text), text


def test_a_required_argument_and_a_valued_option_read_as_a_user_types_them() -> None:
    text = _help(["attach"])
    assert text.startswith("Usage: hangwatch attach [OPTIONS] PID\n")
    assert "--port PORT" in text and "--log PATH" in text and "--interval SECONDS" in text
    assert "--json " in text and "--json <" not in text
