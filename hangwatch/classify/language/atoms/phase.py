"""Atoms over the startup phases the engine recognised in the log, per rank."""

from __future__ import annotations

from typing import Any

from hangwatch.classify.language.atoms.facts import NO, clip
from hangwatch.classify.language.conditions import AtomFn, AtomResult
from hangwatch.classify.language.values import ArgParser, Site, check_keys, parse_bool, parse_choice
from hangwatch.classify.verdict.context import (
    Context,
    Position,
    label_order,
    position_key,
)
from hangwatch.engines import MAIN
from hangwatch.errors import RuleError
from hangwatch.model import Fact, Phase, Source

PHASES = tuple(phase.value for phase in Phase)


def parse_phase(raw: Any, site: Site) -> Phase:
    return Phase(parse_choice(raw, PHASES, "phase", site.loc))


def parse_phases(raw: Any, site: Site) -> frozenset[Phase]:
    """`kv_cache` or `{in: [kv_cache, cuda_graph]}`."""
    if isinstance(raw, str):
        return frozenset([parse_phase(raw, site)])
    if not isinstance(raw, dict):
        raise RuleError(f"'{site.name}' needs a phase or {{in: [phases]}}", site.loc)
    check_keys(raw, site, ("in",), required=("in",))
    items = raw["in"]
    if not isinstance(items, list) or not items:
        raise RuleError("'in' needs a non-empty list of phases", site.value("in"))
    where = site.value("in")
    return frozenset(Phase(parse_choice(item, PHASES, "phase", where)) for item in items)


def _position_text(rank: str, position: Position) -> str:
    phase, ended = position
    return f"{rank} {'finished' if ended else 'in'} {phase.value}"


def _position_fact(ctx: Context, rank: str, position: Position) -> Fact:
    event = ctx.event_for(rank, position)
    if event is None:
        return Fact(_position_text(rank, position), Source("server.log", detail=rank))
    text = f"{_position_text(rank, position)}: {clip(event.text)}"
    return Fact(text, Source("server.log", event.lineno, None if rank == MAIN else rank))


def phase_reached(phase: Phase, ctx: Context) -> AtomResult:
    events = [event for event in ctx.evidence.phases if event.phase.order >= phase.order]
    if not events:
        return NO
    first = events[0]
    fact = Fact(clip(first.text), Source("server.log", first.lineno, first.rank))
    return AtomResult(True, [fact], values={"phase": first.phase.value})


def _behind_is(phases: frozenset[Phase], ended: bool, ctx: Context) -> AtomResult:
    if ctx.behind is None:
        return NO
    rank, position = ctx.behind
    if position[0] not in phases or position[1] != ended:
        return NO
    return AtomResult(True, [_position_fact(ctx, rank, position)], values={"phase": position[0].value})


def phase_at(phases: frozenset[Phase], ctx: Context) -> AtomResult:
    return _behind_is(phases, False, ctx)


def phase_after(phases: frozenset[Phase], ctx: Context) -> AtomResult:
    return _behind_is(phases, True, ctx)


def phase_split(expected: bool, ctx: Context) -> AtomResult:
    ranks = {rank: ctx.positions[rank] for rank in sorted(ctx.positions, key=label_order) if rank != MAIN}
    if len(ranks) < 2:
        return NO
    ahead = max(position_key(pos) for pos in ranks.values())
    behind = tuple(rank for rank, pos in ranks.items() if position_key(pos) < ahead)
    if bool(behind) != expected:
        return NO
    if not behind:
        return AtomResult(True)
    leader = next(rank for rank, pos in ranks.items() if position_key(pos) == ahead)
    facts = [_position_fact(ctx, rank, ranks[rank]) for rank in (*behind[:4], leader)]
    return AtomResult(True, facts, culprits=behind)


ATOMS: dict[str, AtomFn] = {
    "phase.reached": phase_reached,
    "phase.at": phase_at,
    "phase.after": phase_after,
    "phase.split": phase_split,
}

ARGS: dict[str, ArgParser] = {
    "phase.reached": parse_phase,
    "phase.at": parse_phases,
    "phase.after": parse_phases,
    "phase.split": parse_bool,
}
