"""`attach` and `run` share their options, declared once (cli/live.py: WatchOptions)."""

from __future__ import annotations

from dataclasses import fields

import typer.main

from hangwatch.cli.app import app
from hangwatch.cli.live import WatchOptions


def _options(name: str) -> dict[str, tuple[tuple[str, ...], object, str | None]]:
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    return {p.name: (tuple(p.opts), p.default, getattr(p, "help", None)) for p in command.params}


def test_attach_and_run_offer_the_same_shared_options() -> None:
    attach, run = _options("attach"), _options("run")
    shared = {f.name for f in fields(WatchOptions)}
    assert len(shared) == 20  # 15, the three secret files (--token-file, ...), --learn/--no-learn, --launch-label
    assert {name: attach[name] for name in shared} == {name: run[name] for name in shared}
    assert attach["port"][0] == ("--port",) and attach["port"][1] == 9464
    # each command keeps its own: attach reads a log, run keeps one, runs the preflight and relaunches (--remedy)
    assert set(attach) - shared == {"pid", "log"}
    assert set(run) - shared == {"cmd", "log", "no_preflight", "preflight_strict", "remedy", "max_relaunches"}
