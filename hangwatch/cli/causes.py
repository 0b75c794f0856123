"""`hangwatch causes`: the cause catalogue, with the states and rules of each cause."""

from __future__ import annotations

import json
from typing import Annotated

import typer

__all__ = ["causes"]


def causes(
    markdown: Annotated[bool, typer.Option("--markdown", help="Markdown, as docs/causes.md.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="One JSON list.")] = False,
) -> None:
    """Print the causes a verdict can name: what each is, its evidence, its remedy, its rules."""
    from hangwatch.classify import load_rules
    from hangwatch.classify.catalogue import catalogue
    from hangwatch.classify.preflight.checks import load_checks
    from hangwatch.sinks.catalogue import catalogue_dicts, catalogue_markdown, catalogue_text

    entries = catalogue(load_rules(), load_checks())
    if json_out:
        print(json.dumps(catalogue_dicts(entries), indent=2))
    elif markdown:
        print(catalogue_markdown(entries), end="")
    else:
        print(catalogue_text(entries), end="")
