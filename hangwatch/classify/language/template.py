"""Message templates: `{gpu.name}`, `{flag.tp}`, `{ranks}` ... filled from the evidence of a match."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from hangwatch.classify.verdict.context import Context
from hangwatch.errors import RuleError, RuleLocation

PLACEHOLDER = re.compile(r"\{([^{}\s]*)\}")
NAMES = ("gpu.name", "gpu.compute_capability", "phase", "ranks", "line", "frame", "quiet_s")
PREFIXES = ("flag.", "env.", "meta.")
UNKNOWN = "?"


def known(name: str) -> bool:
    return name in NAMES or any(name.startswith(p) and len(name) > len(p) for p in PREFIXES)


def check_template(message: str, loc: RuleLocation) -> None:
    for found in PLACEHOLDER.finditer(message):
        if not known(found.group(1)):
            choices = ", ".join((*NAMES, "flag.NAME", "env.NAME", "meta.FIELD"))
            raise RuleError(f"unknown placeholder '{{{found.group(1)}}}' in message (known: {choices})", loc)


def _from_context(name: str, ctx: Context, ranks: Sequence[str]) -> Any:
    """Values no atom of the match supplied, read from the evidence directly."""
    prefix, _, rest = name.partition(".")
    if name == "ranks":
        return ", ".join(ranks) or None
    if name == "phase":
        return ctx.behind[1][0].value if ctx.behind else None
    if name == "quiet_s":
        return ctx.quiet_s
    if prefix == "gpu":
        return getattr(ctx.gpus[0], rest, None) if ctx.gpus else None
    if prefix == "flag":
        found = ctx.flag(rest)
        return found[0] if found else None
    if prefix == "env":
        return ctx.evidence.env.get(rest)
    return ctx.meta.get(rest) if prefix == "meta" else None


def _show(name: str, value: Any) -> str:
    if value is None:
        return UNKNOWN
    return f"{value:.0f}" if name == "quiet_s" and isinstance(value, (int, float)) else str(value)


def render(message: str, values: Mapping[str, Any], ctx: Context, ranks: Sequence[str]) -> str:
    def fill(found: re.Match[str]) -> str:
        name = found.group(1)
        value = values.get(name)
        return _show(name, value if value is not None else _from_context(name, ctx, ranks))

    return PLACEHOLDER.sub(fill, message)
