"""Atoms over Python/native stacks, quantified over ranks (any / all / none / outlier)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hangwatch.classify.language.atoms.facts import NO, QUANTIFIERS, ranks_text
from hangwatch.classify.language.conditions import AtomFn, AtomResult
from hangwatch.classify.language.values import (
    ArgParser,
    Site,
    check_keys,
    parse_bool,
    parse_choice,
    parse_count,
    parse_names,
    parse_regex,
)
from hangwatch.classify.verdict.context import Context, label_order
from hangwatch.classify.verdict.waiton import blamed_frame
from hangwatch.engines import rank_roles
from hangwatch.errors import RuleError
from hangwatch.model import Fact, Frame, Origin, ProcessStack, Source, ThreadStack
from hangwatch.parse.stacks import stack_signature

ORIGINS = tuple(origin.value for origin in Origin)
_FRAME_KEYS = ("match", "ranks", "thread", "top", "roles", "culprits", "signal")
_ORIGIN_KEYS = ("in", "ranks", "thread", "top", "roles", "culprits", "innermost")


@dataclass(frozen=True)
class FrameArg:
    """Which frames to look for, on which threads and processes, and how many ranks must show them."""

    test: Callable[[Frame], bool]
    describe: str  # for facts: "frame matching 'x'"
    ranks: str = "any"
    thread: str = "any"
    top: int | None = None
    roles: frozenset[str] | None = None
    culprits: bool = False  # name the ranks that show the frame, when not all of them do
    # test only the frame where the thread waits, not who called it (a script's `<module>` at the
    # bottom of every embedded engine's stack; a script's `init_process_group` above the TCPStore
    # wait): classify.waiton decides it, as it does for the wait-for graph
    innermost: bool = False
    # only threads a crash handler or debugger reported this fatal signal for (`SIGBUS|SIGSEGV`)
    signal: re.Pattern[str] | None = None


# ---------------------------------------------------------------- argument parsers


def _frame_options(raw: dict[str, Any], site: Site, test: Callable[[Frame], bool], describe: str) -> FrameArg:
    ranks = parse_choice(raw.get("ranks", "any"), QUANTIFIERS, "rank quantifier", site.value("ranks"))
    thread = parse_choice(raw.get("thread", "any"), ("main", "any"), "thread", site.value("thread"))
    top = parse_count(raw["top"], "top", site.value("top")) if "top" in raw else None
    roles = parse_names(raw["roles"], "roles", site.value("roles")) if "roles" in raw else None
    culprits = raw.get("culprits", False)
    if not isinstance(culprits, bool):
        raise RuleError("'culprits' must be true or false", site.value("culprits"))
    innermost = raw.get("innermost", False)
    if not isinstance(innermost, bool):
        raise RuleError("'innermost' must be true or false", site.value("innermost"))
    signal = parse_regex(raw["signal"], site.value("signal")) if "signal" in raw else None
    return FrameArg(test, describe, ranks, thread, top, roles, culprits, innermost, signal)


def _frame_text(frame: Frame) -> str:
    return f"{frame.qualname} {frame.file or frame.library or ''}"


def parse_frame(raw: Any, site: Site) -> FrameArg:
    """A regex, or `{match: REGEX, ranks: any|all|none|outlier, thread: main|any, top: N, roles: [..]}`."""
    if isinstance(raw, str):
        raw = {"match": raw}
        site = Site(site.loc, name=site.name)
    if not isinstance(raw, dict):
        raise RuleError(f"'{site.name}' needs a regex or {{match: REGEX, ranks: ...}}", site.loc)
    check_keys(raw, site, _FRAME_KEYS, required=("match",))
    pattern = parse_regex(raw["match"], site.value("match"))
    test = _searcher(pattern)
    return _frame_options(raw, site, test, f"a frame matching '{pattern.pattern}'")


def _searcher(pattern: re.Pattern[str]) -> Callable[[Frame], bool]:
    return lambda frame: pattern.search(_frame_text(frame)) is not None


def parse_origin(raw: Any, site: Site) -> FrameArg:
    """`user` or `{in: [user, ...], ranks: ..}`: a frame of that origin in the main thread."""
    if isinstance(raw, str):
        raw = {"in": [raw]}
        site = Site(site.loc, name=site.name)
    if not isinstance(raw, dict):
        raise RuleError(f"'{site.name}' needs an origin or {{in: [origins], ranks: ...}}", site.loc)
    check_keys(raw, site, _ORIGIN_KEYS, required=("in",))
    origins = parse_names(raw["in"], "origin", site.value("in"), ORIGINS)
    test = lambda frame: frame.origin.value in origins  # noqa: E731
    options = {"thread": "main", **raw}
    return _frame_options(options, site, test, f"a frame from {'/'.join(sorted(origins))} code")


# ---------------------------------------------------------------- evaluation


def _population(arg: FrameArg, ctx: Context) -> dict[str, ProcessStack]:
    """Processes the quantifier counts over: `all`/`outlier` compare ranks; `any`/`none` see every dump."""
    if arg.roles is not None:
        return {label: stack for label, stack in ctx.stacks.items() if _has_role(ctx, label, stack, arg.roles)}
    return ctx.rank_stacks if arg.ranks in ("all", "outlier") else ctx.stacks


def _has_role(ctx: Context, label: str, stack: ProcessStack, roles: frozenset[str]) -> bool:
    # A stack named `TP3` with no procs.json is some rank process: scheduler, worker or engine_core.
    role = ctx.role_of(label, stack)
    return role in roles or (role == "rank" and bool(roles & rank_roles()))


def _threads(stack: ProcessStack, thread: str) -> tuple[ThreadStack, ...]:
    if thread == "main":
        return (stack.main,) if stack.main else ()
    main = stack.main
    return tuple(sorted(stack.threads, key=lambda t: t is not main))  # the main thread first


def _first_hit(stack: ProcessStack, arg: FrameArg) -> tuple[ThreadStack, Frame] | None:
    for thread in _threads(stack, arg.thread):
        if arg.signal is not None and not (thread.signal and arg.signal.search(thread.signal)):
            continue
        frames = thread.frames[: arg.top]
        if arg.innermost:
            inner = blamed_frame(thread, arg.top)
            frames = (inner,) if inner is not None else ()
        for frame in frames:
            if arg.test(frame):
                return thread, frame
    return None


def _grouped_facts(hits: dict[str, tuple[ThreadStack, Frame]], stacks: dict[str, ProcessStack]) -> list[Fact]:
    """One fact per distinct frame, naming the ranks that show it."""
    groups: dict[str, list[str]] = {}
    for label, (thread, frame) in hits.items():
        where = frame.display if thread is stacks[label].main else f"{frame.display} [thread {thread.name or thread.thread_id}]"
        if thread.signal:
            where += f", {thread.signal} caught"
        groups.setdefault(where, []).append(label)
    facts = []
    for where, labels in groups.items():
        source = stacks[labels[0]].source
        facts.append(Fact(f"{ranks_text(labels)}: {where}", Source(source.file, source.line, ranks_text(labels))))
    return facts


def stack_frame(arg: FrameArg, ctx: Context) -> AtomResult:
    population = _population(arg, ctx)
    hits = {label: hit for label, stack in population.items() if (hit := _first_hit(stack, arg))}
    held, culprits = QUANTIFIERS[arg.ranks](list(hits), list(population))
    if not held:
        return NO
    if arg.culprits and not culprits and 0 < len(hits) < len(ctx.rank_stacks):
        culprits = tuple(sorted((label for label in hits if label in ctx.rank_stacks), key=label_order))
    if not hits:
        return AtomResult(True, [Fact(f"no rank shows {arg.describe}", Source("stacks/"))])
    first = next(iter(hits.values()))[1]
    return AtomResult(True, _grouped_facts(hits, population), culprits, {"frame": first.display})


def stack_dumped(expected: bool, ctx: Context) -> AtomResult:
    count = len(ctx.stacks)
    if bool(count) != expected:
        return NO
    return AtomResult(True, [Fact(f"{count} processes dumped", Source("stacks/"))] if count else [])


# ---------------------------------------------------------------- signatures


def _outliers(ctx: Context) -> tuple[list[str], list[str]]:
    """(the majority's ranks, the ranks apart from it); both empty when no majority stands out."""
    groups: dict[Any, list[str]] = {}
    for label, stack in ctx.rank_stacks.items():
        groups.setdefault(stack_signature(stack), []).append(label)
    if len(groups) < 2:
        return [], []
    majority = max(groups.values(), key=len)
    others = sorted((x for labels in groups.values() if labels is not majority for x in labels), key=label_order)
    return (majority, others) if len(majority) > len(others) else ([], [])


def _top_fact(label: str, stack: ProcessStack, prefix: str) -> Fact:
    top = stack.main.top if stack.main else None
    where = top.display if top else "(no frames)"
    return Fact(f"{prefix}: {where}", Source(stack.source.file, stack.source.line, label))


def stack_outlier(expected: bool, ctx: Context) -> AtomResult:
    majority, others = _outliers(ctx)
    if not expected:
        return AtomResult(len(ctx.rank_stacks) >= 2 and not others)
    if not others:
        return NO
    stacks = ctx.rank_stacks
    facts = [_top_fact(label, stacks[label], f"{label} stands apart") for label in others[:4]]
    facts.append(_top_fact(majority[0], stacks[majority[0]], f"{ranks_text(majority)} ({len(majority)} ranks)"))
    return AtomResult(True, facts, tuple(others))


ATOMS: dict[str, AtomFn] = {
    "stack.frame": stack_frame,
    "stack.origin": stack_frame,  # the same matching; only the frame test differs
    "stack.outlier": stack_outlier,
    "stack.dumped": stack_dumped,
}

ARGS: dict[str, ArgParser] = {
    "stack.frame": parse_frame,
    "stack.origin": parse_origin,
    "stack.outlier": parse_bool,
    "stack.dumped": parse_bool,
}
