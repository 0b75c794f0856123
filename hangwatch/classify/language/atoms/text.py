"""Atoms over text evidence: the log, kernel messages, the command line, flags, environment, meta.

Each atom is `(compiled argument, Context) -> AtomResult`; its argument parser sits in `ARGS`.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any

from hangwatch.classify.language.atoms.facts import NO, clip, log_fact
from hangwatch.classify.language.conditions import AtomFn, AtomResult
from hangwatch.classify.language.values import (
    ArgParser,
    Site,
    ValueSpec,
    check_keys,
    holds,
    parse_bool,
    parse_choice,
    parse_comparison,
    parse_count,
    parse_regex,
    parse_value,
    wants_absent,
)
from hangwatch.classify.verdict.context import Context
from hangwatch.engines import engine_names
from hangwatch.errors import RuleError
from hangwatch.model import Fact, LogLine, Source
from hangwatch.parse.logs import MAX_TEXT


@dataclass(frozen=True)
class TailArg:
    pattern: re.Pattern[str]
    lines: int = 5


@dataclass(frozen=True)
class CountArg:
    pattern: re.Pattern[str]
    count: ValueSpec


@dataclass(frozen=True)
class NamedArg:
    """`flag.NAME`, `env.NAME`, `meta.FIELD`: the name after the prefix and the value test."""

    name: str
    spec: ValueSpec


# ---------------------------------------------------------------- argument parsers


def _regex(raw: Any, site: Site) -> re.Pattern[str]:
    return parse_regex(raw, site.loc)


def _tail_arg(raw: Any, site: Site) -> TailArg:
    if isinstance(raw, str):
        return TailArg(parse_regex(raw, site.loc))
    if not isinstance(raw, dict):
        raise RuleError(f"'{site.name}' needs a regex or {{matches: REGEX, lines: N}}", site.loc)
    check_keys(raw, site, ("matches", "lines"), required=("matches",))
    lines = parse_count(raw.get("lines", 5), "lines", site.value("lines"))
    return TailArg(parse_regex(raw["matches"], site.value("matches")), lines)


def _count_arg(raw: Any, site: Site) -> CountArg:
    if not isinstance(raw, dict) or "matches" not in raw:
        raise RuleError(f"'{site.name}' needs {{matches: REGEX, gte: N}}", site.loc)
    pattern = parse_regex(raw["matches"], site.value("matches"))
    return CountArg(pattern, parse_comparison(raw, site, ignore=("matches",)))


def _named_arg(scalar: str) -> Any:
    def parse(raw: Any, site: Site) -> NamedArg:
        name = site.name.split(".", 1)[1]
        if not name:
            raise RuleError(f"'{site.name}' needs a name after the dot", site.loc)
        return NamedArg(name, parse_value(raw, site, scalar=scalar))

    return parse


def _spec(raw: Any, site: Site) -> ValueSpec:
    return parse_value(raw, site)


def _engine_arg(raw: Any, site: Site) -> ValueSpec:
    if isinstance(raw, str):
        parse_choice(raw, engine_names(), "engine", site.loc)
    return parse_value(raw, site)


# ---------------------------------------------------------------- log


def _hits(pattern: re.Pattern[str], lines: tuple[LogLine, ...] | list[LogLine]) -> list[LogLine]:
    return [line for line in lines if pattern.search(line.text)]


def _found(hits: list[LogLine], pattern: re.Pattern[str] | None = None, ctx: Context | None = None) -> AtomResult:
    """The latest matching line is quoted: in a hang, what happened last matters most; but
    where a matching line is part of the failure that started it all, that one (first failure wins)."""
    if not hits:
        return NO
    culprits = _named_ranks(pattern, hits) if pattern is not None and pattern.groupindex else ()
    quoted = hits[-1]
    if ctx is not None and ctx.failure_roles:
        quoted = next((line for line in hits if ctx.failure_roles.get(line.lineno) == "root"), quoted)
    return AtomResult(True, [log_fact(quoted, len(hits) - 1)], culprits, values={"line": quoted.text})


def _named_ranks(pattern: re.Pattern[str], hits: list[LogLine]) -> tuple[str, ...]:
    """Ranks a line names through the groups `(?P<tp>N)` (-> "TPN") or `(?P<rank>TP3)`:
    "Rank 1 scheduler died" names the culprit better than which process died first."""
    found: list[str] = []
    for line in hits:
        match = pattern.search(line.text)
        if match is None:
            continue
        groups = match.groupdict()
        rank = f"TP{groups['tp']}" if groups.get("tp") else groups.get("rank")
        if rank and rank not in found:
            found.append(rank)
    return tuple(found)


def log_matches(pattern: re.Pattern[str], ctx: Context) -> AtomResult:
    return _found(ctx.log_hits(pattern), pattern, ctx)


def log_absent(pattern: re.Pattern[str], ctx: Context) -> AtomResult:
    # With no log at all, an absent line proves nothing.
    if not ctx.evidence.log or ctx.log_hits(pattern):
        return NO
    return AtomResult(True, [Fact(f"no log line matches '{pattern.pattern}'", Source("server.log"))])


# Polarity: a line saying a step finished, was disabled, fell back or connected is no evidence
# that the start hangs in that step, unless the rule's pattern asked for exactly those words.
_DONE = re.compile(
    r"(?i)\b(?:completed?|finished|done|succeeded|successful(?:ly)?|disabled|disabling|fell back|falling back|"
    r"skipp(?:ed|ing)|connected|took \d|took [\d.]+ ?s|in [\d.]+ ?s(?:econds)?\b)"
)


def done_outside_match(pattern: re.Pattern[str], text: str) -> bool:
    """The line reports a finished/disabled/connected step, in words outside what the pattern matched."""
    match = pattern.search(text)
    if match is None:
        return False
    return any(not (match.start() <= done.start() < match.end()) for done in _DONE.finditer(text))


def log_tail(arg: TailArg, ctx: Context) -> AtomResult:
    lines = [line for line in ctx.evidence.log if line.text.strip()][-arg.lines :]
    hits = [line for line in _hits(arg.pattern, lines) if not done_outside_match(arg.pattern, line.text)]
    return _found(hits, None, ctx)


def log_count(arg: CountArg, ctx: Context) -> AtomResult:
    hits = ctx.log_hits(arg.pattern)
    if not ctx.evidence.log or not holds(arg.count, len(hits)):
        return NO
    if not hits:
        return AtomResult(True, [Fact(f"no log line matches '{arg.pattern.pattern}'", Source("server.log"))])
    return _found(hits)


# Each rule regex sees a bounded text (docs/serving.md, Bounds): a dmesg line like a log line, a
# command line up to 32 KiB (an argv holds real flags far past 1 KiB; a 2 MB one is hostile).
MAX_CMDLINE = 32 * 1024


def dmesg_matches(pattern: re.Pattern[str], ctx: Context) -> AtomResult:
    hits = [(n, text) for n, text in enumerate(ctx.evidence.dmesg, 1) if pattern.search(text[:MAX_TEXT])]
    if not hits:
        return NO
    n, text = hits[-1]
    return AtomResult(True, [Fact(clip(text), Source("dmesg.txt", n))], values={"line": text})


def cmdline_matches(pattern: re.Pattern[str], ctx: Context) -> AtomResult:
    cmdline = ctx.evidence.cmdline or ""
    if not pattern.search(cmdline[:MAX_CMDLINE]):
        return NO
    return AtomResult(True, [Fact(clip(cmdline), Source("cmdline.txt"))])


# ---------------------------------------------------------------- flags, environment, meta


def _flag_text(name: str, value: Any) -> str:
    return f"--{name}" if value is True else f"--{name} {value}"


def flag_value(arg: NamedArg, ctx: Context) -> AtomResult:
    found = ctx.flag(arg.name)
    if found is None:
        # "not given" is evidence only when the command line is known.
        if not (ctx.cmdline_known and wants_absent(arg.spec)):
            return NO
        return AtomResult(True, [Fact(f"no --{arg.name} on the command line", Source("cmdline.txt"))])
    value, source = found
    if not holds(arg.spec, value):
        return NO
    return AtomResult(True, [Fact(_flag_text(arg.name, value), source)], values={f"flag.{arg.name}": value})


def env_value(arg: NamedArg, ctx: Context) -> AtomResult:
    env = ctx.evidence.env
    names = [name for name in env if fnmatch.fnmatchcase(name, arg.name)]
    if not names:
        if not (env and wants_absent(arg.spec)):
            return NO
        return AtomResult(True, [Fact(f"{arg.name} is not set", Source("env.txt"))])
    held = [name for name in names if holds(arg.spec, env[name])]
    if not held:
        return NO
    facts = [Fact(f"{name}={env[name]}", Source("env.txt")) for name in held]
    return AtomResult(True, facts, values={f"env.{arg.name}": env[held[0]]})


def meta_value(arg: NamedArg, ctx: Context) -> AtomResult:
    value = ctx.meta.get(arg.name)
    if not holds(arg.spec, value):
        return NO
    text = f"{arg.name} = {value}" if value is not None else f"{arg.name} not given"
    return AtomResult(True, [Fact(text, Source("meta.json"))], values={f"meta.{arg.name}": value})


def engine_is(spec: ValueSpec, ctx: Context) -> AtomResult:
    if ctx.engine is None or not holds(spec, ctx.engine):
        return NO
    source = Source("meta.json") if ctx.meta.get("engine") else Source("server.log", detail="guessed")
    return AtomResult(True, [Fact(f"engine {ctx.engine}", source)])


def quiet_for(spec: ValueSpec, ctx: Context) -> AtomResult:
    if ctx.quiet_s is None:
        # A pasted bundle is a report of a hang: treat it as quiet long enough.
        return AtomResult(True)
    if not holds(spec, ctx.quiet_s):
        return NO
    fact = Fact(f"no progress for {ctx.quiet_s:.0f}s", Source("meta.json", detail="since_last_progress_s"))
    return AtomResult(True, [fact], values={"quiet_s": ctx.quiet_s})


def only_meta(expected: bool, ctx: Context) -> AtomResult:
    return AtomResult(ctx.only_meta == expected)


ATOMS: dict[str, AtomFn] = {
    "log.matches": log_matches,
    "log.absent": log_absent,
    "log.tail": log_tail,
    "log.count": log_count,
    "dmesg.matches": dmesg_matches,
    "cmdline.matches": cmdline_matches,
    "flag.*": flag_value,
    "env.*": env_value,
    "meta.*": meta_value,
    "engine": engine_is,
    "quiet_s": quiet_for,
    "evidence.only_meta": only_meta,
}

ARGS: dict[str, ArgParser] = {
    "log.matches": _regex,
    "log.absent": _regex,
    "log.tail": _tail_arg,
    "log.count": _count_arg,
    "dmesg.matches": _regex,
    "cmdline.matches": _regex,
    "flag.*": _named_arg("eq"),
    "env.*": _named_arg("matches"),
    "meta.*": _named_arg("eq"),
    "engine": _engine_arg,
    "quiet_s": _spec,
    "evidence.only_meta": parse_bool,
}
