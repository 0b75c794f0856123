"""Where the start stopped, as a prior: the causes that stop a start at that point.

When a start is stalled or crashed and no rule decides, the differential is never empty: the
candidates come from hangwatch/data/phase_priors.yaml, a table keyed by where the start stopped
(the phase the furthest-behind rank is in or about to begin; `none` when the log has no phase
line), the outcome (crashed / stalled), the engine, the topology (nodes, GPUs per model) and the
hardware (PCIe-only GPUs, compute capability). Each row lists the causes that stop a start there,
by mechanism, with how many reports of the dev corpus that row met and how many of them had each
cause. A candidate's confidence is that frequency, smoothed over the row's causes
((hits + 1) / (row + causes)) and capped at PRIOR_MAX: a prior never claims to be right.

Rows are tried in order (the most specific first); the first that holds gives its causes, and
later ones fill the list up to three. `rows_for` is pure; the table is package data, read once.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hangwatch.classify.causes import CAUSES
from hangwatch.classify.language.atoms.system import PCIE_ONLY
from hangwatch.errors import RuleError, RuleLocation
from hangwatch.model import Phase

if TYPE_CHECKING:
    from hangwatch.classify.verdict.context import Context

__all__ = ["PRIOR_MAX", "TABLE_FILE", "PriorRow", "Where", "load_priors", "prior_rows", "rows_for", "where_of"]

TABLE_FILE = Path(__file__).resolve().parents[2] / "data" / "phase_priors.yaml"
PRIOR_MAX = 0.45  # a prior is a frequency, and never one a verdict may act on (CONFIDENT is 0.6)
NO_PHASE = "none"
PHASES = (*(p.value for p in Phase), NO_PHASE)
OUTCOMES = ("crashed", "stalled")
NODES = ("single", "multi")
GPUS = ("one", "many")
_ROW_KEYS = {"id", "when", "causes", "count", "source"}
_WHEN_KEYS = {"phase", "outcome", "engine", "nodes", "gpus", "pcie_only", "compute_capability"}
_CAUSE_KEYS = {"cause", "count"}


@dataclass(frozen=True)
class Where:
    """Where the start stopped, in the table's terms."""

    phase: str  # a Phase value, or "none"
    outcome: str  # crashed / stalled
    engine: str | None
    nodes: str | None  # single / multi; None when nothing says
    gpus: str | None  # one / many (any of tp, pp, dp, ep above 1); None when nothing says
    pcie_only: bool | None  # every named GPU is PCIe-only; None without a GPU name
    compute_capability: tuple[str, ...]

    def describe(self) -> str:
        parts = [f"stopped in {self.phase}" if self.phase != NO_PHASE else "no phase line", self.outcome]
        if self.engine:
            parts.append(self.engine)
        if self.nodes == "multi":
            parts.append("several nodes")
        if self.gpus == "many":
            parts.append("several GPUs")
        if self.pcie_only:
            parts.append("PCIe-only GPUs")
        if self.compute_capability:
            parts.append("sm " + "/".join(self.compute_capability))
        return ", ".join(parts)


@dataclass(frozen=True)
class PriorCause:
    cause: str
    count: int  # reports of the row's kind that had this cause


@dataclass(frozen=True)
class PriorRow:
    id: str
    when: Mapping[str, Any]
    causes: tuple[PriorCause, ...]
    count: int  # reports of the dev corpus that met this row first
    source: str

    def holds(self, where: Where) -> bool:
        when = self.when
        checks = (
            ("phase", where.phase), ("outcome", where.outcome), ("engine", where.engine),
            ("nodes", where.nodes), ("gpus", where.gpus),
        )  # fmt: skip
        for key, value in checks:
            if key in when and value not in when[key]:
                return False
        if "pcie_only" in when and where.pcie_only is not when["pcie_only"]:
            return False
        ccs = when.get("compute_capability")
        return not ccs or any(cc in ccs for cc in where.compute_capability)

    def confidence(self, prior: PriorCause) -> float:
        return round(min(PRIOR_MAX, (prior.count + 1) / (self.count + len(self.causes))), 3)


def where_of(ctx: Context, outcome: str) -> Where:
    if ctx.behind is None:
        phase = NO_PHASE
    else:
        current, ended = ctx.behind[1]
        phases = list(Phase)
        phase = phases[min(current.order + 1, len(phases) - 1)].value if ended else current.value
    return Where(
        phase=phase, outcome=outcome, engine=ctx.engine, nodes=_nodes(ctx), gpus=_gpus(ctx),
        pcie_only=_pcie_only(ctx), compute_capability=tuple(sorted({g.compute_capability for g in ctx.gpus if g.compute_capability})),
    )  # fmt: skip


def _number(ctx: Context, name: str) -> float | None:
    found = ctx.flag(name)
    if found is None:
        return None
    try:
        return float(found[0])
    except (TypeError, ValueError):
        return None


def _nodes(ctx: Context) -> str | None:
    nodes = _number(ctx, "nnodes")
    return None if nodes is None else ("multi" if nodes > 1 else "single")


def _gpus(ctx: Context) -> str | None:
    sizes = [n for name in ("tp", "pp", "dp", "ep") if (n := _number(ctx, name)) is not None]
    if not sizes:
        return None
    return "many" if any(n > 1 for n in sizes) else "one"


def _pcie_only(ctx: Context) -> bool | None:
    named = [gpu.name for gpu in ctx.gpus if gpu.name]
    return all(PCIE_ONLY.search(name) for name in named) if named else None


def rows_for(where: Where, rows: Sequence[PriorRow]) -> list[PriorRow]:
    """The rows that hold, in table order."""
    return [row for row in rows if row.holds(where)]


# ---------------------------------------------------------------- the table


@functools.cache
def prior_rows() -> tuple[PriorRow, ...]:
    """The shipped table (package data), read and validated once."""
    return load_priors()


def load_priors(path: Path | None = None) -> tuple[PriorRow, ...]:
    from hangwatch.parse.positioned_yaml import read_table

    path = path or TABLE_FILE
    doc = read_table(path, "phase-prior table")
    rows = doc.get("priors") if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not rows:
        raise RuleError("a phase-prior table is a mapping with a non-empty `priors:` list", RuleLocation(str(path)))
    out = [_row(raw, _item_where(path, rows, i)) for i, raw in enumerate(rows)]
    ids = [row.id for row in out]
    if len(set(ids)) != len(ids):
        raise RuleError(f"duplicate row ids: {sorted({i for i in ids if ids.count(i) > 1})}", RuleLocation(str(path)))
    return tuple(out)


def _item_where(path: Path, items: Any, index: int) -> RuleLocation:
    marks = getattr(items, "marks", None)
    return RuleLocation(str(path), marks[index].line + 1, marks[index].column + 1) if marks else RuleLocation(str(path))


def _row(raw: Any, where: RuleLocation) -> PriorRow:
    if not isinstance(raw, dict):
        raise RuleError("a row is a mapping", where)
    unknown, missing = set(raw) - _ROW_KEYS, sorted(_ROW_KEYS - set(raw))
    if unknown or missing:
        raise RuleError(f"row: unknown keys {sorted(unknown)}, missing {missing}", where)
    if not isinstance(raw["source"], str) or not raw["source"].strip():
        raise RuleError("every row says where its counts come from (`source`)", where)
    count = _count(raw["count"], "count", where)
    causes = raw["causes"]
    if not isinstance(causes, list) or not causes:
        raise RuleError("`causes` is a non-empty list of {cause, count}", where)
    parsed = tuple(_cause(c, where) for c in causes)
    if len({c.cause for c in parsed}) != len(parsed):
        raise RuleError("a cause is listed twice", where)
    if sum(c.count for c in parsed) > count:
        raise RuleError(f"the causes' counts add up to more than the row's count {count}", where)
    return PriorRow(str(raw["id"]), _when(raw["when"], where), parsed, count, " ".join(raw["source"].split()))


def _count(value: Any, name: str, where: RuleLocation) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RuleError(f"`{name}` is a count (an integer >= 0)", where)
    return value


def _cause(raw: Any, where: RuleLocation) -> PriorCause:
    if not isinstance(raw, dict) or set(raw) - _CAUSE_KEYS or "cause" not in raw:
        raise RuleError("a cause entry is {cause: ID, count: N}", where)
    if raw["cause"] not in CAUSES or raw["cause"] == "unknown":
        raise RuleError(f"unknown cause {raw['cause']!r}", where)
    return PriorCause(raw["cause"], _count(raw.get("count", 0), "count", where))


def _when(raw: Any, where: RuleLocation) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise RuleError("`when` is a mapping", where)
    if set(raw) - _WHEN_KEYS:
        raise RuleError(f"`when`: unknown keys {sorted(set(raw) - _WHEN_KEYS)}", where)
    out: dict[str, Any] = {}
    for key, allowed in (("phase", PHASES), ("outcome", OUTCOMES), ("engine", None), ("nodes", NODES), ("gpus", GPUS)):
        if key in raw:
            out[key] = _choices(raw[key], allowed, key, where)
    if "pcie_only" in raw:
        if not isinstance(raw["pcie_only"], bool):
            raise RuleError("`pcie_only` is true or false", where)
        out["pcie_only"] = raw["pcie_only"]
    if "compute_capability" in raw:
        out["compute_capability"] = _choices(raw["compute_capability"], None, "compute_capability", where)
    return out


def _choices(raw: Any, allowed: Iterable[str] | None, key: str, where: RuleLocation) -> tuple[str, ...]:
    values = tuple(str(v) for v in (raw if isinstance(raw, list) else [raw]))
    if allowed is not None:
        bad = [v for v in values if v not in tuple(allowed)]
        if bad:
            raise RuleError(f"`{key}`: {bad} not among {', '.join(allowed)}", where)
    return values
