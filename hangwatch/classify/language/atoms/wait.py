"""The `log.waits` atom: a wait the log keeps repeating (parse/repeats.py, docs/rules.md).

    log.waits: {family: multinode_rendezvous, gte: 3}   # a repeated wait on remote peers
    log.waits: {matches: 'DP Coordinator', gte: 3}      # a repeated wait whose line matches

It holds on a wait line that came back at least N times (default 3) with the same counters and
is still going on (no news after its last repeat). Its fact says what, how often and for how
long: "the log repeats 'Waiting for READY message from DP Coordinator...' 13 times every 10s for
2m". `{line}` is its value (the latest repeat). From a live log or a bundle's server.log alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from hangwatch.classify.language.atoms.facts import NO
from hangwatch.classify.language.conditions import AtomFn, AtomResult
from hangwatch.classify.language.values import ArgParser, Site, check_keys, parse_count, parse_regex
from hangwatch.classify.verdict.context import Context
from hangwatch.errors import RuleError
from hangwatch.model import Fact, Source
from hangwatch.parse.repeats import wait_families

__all__ = ["ARGS", "ATOMS", "WaitsArg"]

DEFAULT_COUNT = 3


@dataclass(frozen=True)
class WaitsArg:
    family: str | None = None  # the cause a family of data/waits.yaml names
    pattern: re.Pattern[str] | None = None
    count: int = DEFAULT_COUNT


def _waits_arg(raw: Any, site: Site) -> WaitsArg:
    if not isinstance(raw, dict):
        raise RuleError(f"'{site.name}' needs {{family: CAUSE}} or {{matches: REGEX}}, optionally gte: N", site.loc)
    check_keys(raw, site, ("family", "matches", "gte"))
    family = raw.get("family")
    if family is not None and family not in {f.cause for f in wait_families()}:
        raise RuleError(f"'{site.name}': no wait family names the cause {family!r} (data/waits.yaml)", site.key("family"))
    pattern = parse_regex(raw["matches"], site.value("matches")) if "matches" in raw else None
    count = parse_count(raw.get("gte", DEFAULT_COUNT), "gte", site.value("gte")) if "gte" in raw else DEFAULT_COUNT
    return WaitsArg(family, pattern, count)


def log_waits(arg: WaitsArg, ctx: Context) -> AtomResult:
    for wait in ctx.repeated_waits:
        if wait.count < arg.count:
            continue
        if arg.family is not None and (wait.family is None or wait.family.cause != arg.family):
            continue
        if arg.pattern is not None and not arg.pattern.search(wait.line.text):
            continue
        fact = Fact(wait.describe(), Source("server.log", wait.line.lineno, wait.line.rank))
        return AtomResult(True, [fact], values={"line": wait.line.text})
    return NO


ATOMS: dict[str, AtomFn] = {"log.waits": log_waits}
ARGS: dict[str, ArgParser] = {"log.waits": _waits_arg}
