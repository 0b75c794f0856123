"""Atom arguments that are values, regexes or comparisons, compiled once at load time.

A comparison mapping may hold several operators; all must hold (`{gte: 2, lte: 8}`).
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hangwatch.classify.language.regexcheck import UnsafeRegex, check_linear
from hangwatch.errors import RuleError, RuleLocation


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _eq(value: Any, operand: Any) -> bool:
    if value is None:
        return operand is None
    if isinstance(operand, bool):
        return _truthy(value) == operand
    left, right = _number(value), _number(operand)
    # "12.0" in meta.json and 12.0 in YAML are the same compute capability.
    if left is not None and right is not None:
        return left == right
    return str(value) == str(operand)


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.lower() not in ("", "0", "false", "no", "off")
    return bool(value)


def _order(compare: Callable[[float, float], bool]) -> Callable[[Any, Any], bool]:
    def test(value: Any, operand: Any) -> bool:
        number = _number(value)
        return number is not None and compare(number, operand)

    return test


def _present(value: Any, operand: bool) -> bool:
    return (value is not None and value is not False) == operand


def _matches(value: Any, operand: re.Pattern[str]) -> bool:
    return value is not None and value is not False and operand.search(str(value)) is not None


OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": _eq,
    "in": lambda value, operand: any(_eq(value, item) for item in operand),
    "gt": _order(lambda a, b: a > b),
    "gte": _order(lambda a, b: a >= b),
    "lt": _order(lambda a, b: a < b),
    "lte": _order(lambda a, b: a <= b),
    "matches": _matches,
    "present": _present,
}


@dataclass(frozen=True)
class Test:
    """One operator and its operand: `gte 2`, `matches re.compile('x')`."""

    op: str
    operand: Any

    def __call__(self, value: Any) -> bool:
        return OPS[self.op](value, self.operand)

    def __str__(self) -> str:
        operand = self.operand.pattern if isinstance(self.operand, re.Pattern) else self.operand
        return f"{self.op} {operand!r}"


ValueSpec = tuple[Test, ...]


def holds(spec: ValueSpec, value: Any) -> bool:
    return all(test(value) for test in spec)


def wants_absent(spec: ValueSpec) -> bool:
    """True for specs that hold on a missing value (`present: false`, `false`)."""
    return holds(spec, None)


def parse_regex(raw: Any, loc: RuleLocation) -> re.Pattern[str]:
    if not isinstance(raw, str) or not raw:
        raise RuleError(f"expected a regex string, got {clip_repr(raw)}", loc)
    try:
        check_linear(raw)
        return re.compile(raw)
    except (re.error, UnsafeRegex) as exc:
        raise RuleError(f"bad regex {clip_repr(raw)}: {exc}", loc) from exc


def clip_repr(raw: Any, limit: int = 200) -> str:
    """`repr(raw)` cut to `limit`: a value in an error message may be an alias bomb or a 1 MB string."""
    try:
        text = reprlib.repr(raw) if isinstance(raw, (dict, list, tuple)) else repr(raw)
    except RecursionError:
        text = f"<{type(raw).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _operand(op: str, raw: Any, loc: RuleLocation) -> Any:
    if op in ("gt", "gte", "lt", "lte"):
        if _number(raw) is None or isinstance(raw, str):
            raise RuleError(f"'{op}' needs a number, got {clip_repr(raw)}", loc)
        return float(raw)
    if op == "in":
        if not isinstance(raw, list) or not raw:
            raise RuleError(f"'in' needs a non-empty list, got {clip_repr(raw)}", loc)
        return tuple(raw)
    if op == "present" and not isinstance(raw, bool):
        raise RuleError(f"'present' needs true or false, got {clip_repr(raw)}", loc)
    if op == "matches":
        return parse_regex(raw, loc)
    if op == "eq" and isinstance(raw, (dict, list)):
        raise RuleError(f"'eq' needs a single value, got {clip_repr(raw)}", loc)
    return raw


@dataclass(frozen=True)
class Site:
    """Where an atom's argument sits in its file: the value itself and, for a mapping, each key."""

    loc: RuleLocation
    keys: Mapping[Any, RuleLocation] = field(default_factory=dict)  # key -> where the key is
    values: Mapping[Any, RuleLocation] = field(default_factory=dict)  # key/index -> where its value is
    name: str = ""  # the atom as written ("flag.tp"); prefix atoms read their suffix from it

    def key(self, key: Any) -> RuleLocation:
        return self.keys.get(key, self.loc)

    def value(self, key: Any) -> RuleLocation:
        return self.values.get(key, self.loc)


# compiles an atom's YAML argument once, at load time
ArgParser = Callable[[Any, Site], Any]


def check_keys(raw: Mapping[str, Any], site: Site, allowed: Iterable[str], required: Iterable[str] = ()) -> None:
    allowed = tuple(allowed)
    for key in raw:
        if key not in allowed:
            raise RuleError(f"unknown key '{key}' in '{site.name}' (expected {', '.join(allowed)})", site.key(key))
    for key in required:
        if key not in raw:
            raise RuleError(f"'{site.name}' needs '{key}'", site.loc)


def parse_choice(raw: Any, choices: Iterable[str], what: str, loc: RuleLocation) -> str:
    choices = tuple(choices)
    if raw not in choices:
        raise RuleError(f"bad {what} {clip_repr(raw)} (expected one of {', '.join(choices)})", loc)
    return str(raw)


def parse_count(raw: Any, what: str, loc: RuleLocation) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise RuleError(f"'{what}' needs a positive whole number, got {clip_repr(raw)}", loc)
    return raw


def parse_bool(raw: Any, site: Site) -> bool:
    if not isinstance(raw, bool):
        raise RuleError(f"'{site.name}' needs true or false, got {clip_repr(raw)}", site.loc)
    return raw


def parse_names(raw: Any, what: str, loc: RuleLocation, choices: Iterable[str] | None = None) -> frozenset[str]:
    """A name or a list of names (`roles: [scheduler, worker]`), each checked against `choices`."""
    items = raw if isinstance(raw, list) else [raw]
    if not items or not all(isinstance(item, str) for item in items):
        raise RuleError(f"'{what}' needs a name or a list of names, got {clip_repr(raw)}", loc)
    if choices is not None:
        for item in items:
            parse_choice(item, choices, what, loc)
    return frozenset(items)


def parse_comparison(raw: Mapping[str, Any], site: Site, ignore: Iterable[str] = ()) -> ValueSpec:
    """A mapping of operators; keys in `ignore` belong to the atom (`gpus`, `lines`) and are skipped."""
    tests = []
    for op, operand in raw.items():
        if op in ignore:
            continue
        if op not in OPS:
            raise RuleError(f"unknown comparison '{op}' (expected one of {', '.join(OPS)})", site.key(op))
        tests.append(Test(op, _operand(op, operand, site.value(op))))
    if not tests:
        raise RuleError(f"'{site.name}' needs a comparison ({', '.join(OPS)})", site.loc)
    return tuple(tests)


def parse_value(raw: Any, site: Site, scalar: str = "eq") -> ValueSpec:
    """A scalar (compared with `scalar`: "eq" or "matches"; `true`/`false` test presence) or a comparison."""
    if isinstance(raw, Mapping):
        return parse_comparison(raw, site)
    if isinstance(raw, list) or raw is None:
        raise RuleError(f"'{site.name}' needs a value or a comparison mapping, got {clip_repr(raw)}", site.loc)
    if isinstance(raw, bool):
        return (Test("present", raw),)
    if scalar == "matches" and isinstance(raw, str):
        return (Test("matches", parse_regex(raw, site.loc)),)
    return (Test("eq", raw),)


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(raw: Any, loc: RuleLocation) -> float:
    """`10s`, `2m`, `1h`, `500ms` (or 0) → seconds."""
    if raw == 0 and not isinstance(raw, bool):
        return 0.0
    found = _DURATION.match(raw) if isinstance(raw, str) else None
    if not found:
        raise RuleError(f"bad duration {clip_repr(raw)} (expected a number and a unit: '10s', '2m', '1h')", loc)
    return float(found.group(1)) * _UNIT_S[found.group(2)]
