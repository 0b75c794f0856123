"""Rule regexes that cannot backtrack for ever: nested quantifiers are refused when a rule loads.

Python's `re` backtracks; `(a+)+$` takes 2^n steps on `a…a!`, and a rule runs on every log line
of every tick. A pattern is refused when a repeat that may match more than once holds another
such repeat (`(a+)+`, `(\\w+\\s?)*`), or a repeated alternation whose branches can start alike
(`(a|ab)+`), or a back-reference. What remains is at most polynomial, and the classifier also
bounds the text each pattern sees (logs.MAX_TEXT), so each match has a fixed worst case.

google-re2 was weighed: it installs, but RE2 has no lookaround, which four shipped rules need,
and its `$`/`\\b` differ from `re` on the scored corpora.
"""

from __future__ import annotations

import re
import sys
from typing import Any

if sys.version_info >= (3, 11):  # typeshed stubs only the deprecated sre_* names of the parser
    from re import _constants as _c  # type: ignore[attr-defined]
    from re import _parser as _p  # type: ignore[attr-defined]
else:
    import sre_constants as _c
    import sre_parse as _p

__all__ = ["UnsafeRegex", "check_linear"]

_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT}
_ATOMIC = {getattr(_c, "POSSESSIVE_REPEAT", None), getattr(_c, "ATOMIC_GROUP", None)} - {None}


class UnsafeRegex(ValueError):
    """The pattern can take exponential time on some input; the message says which part."""


def check_linear(pattern: str, flags: int = 0) -> None:
    """Raise UnsafeRegex for nested unbounded quantifiers, overlapping repeated alternations, back-references."""
    try:
        parsed = _p.parse(pattern, flags)
    except (re.error, RecursionError, OverflowError) as exc:
        raise UnsafeRegex(str(exc)) from None
    _walk(list(parsed.data), inside_repeat=False)


def _walk(items: list[tuple[Any, Any]], inside_repeat: bool) -> bool:
    """True when `items` can match a variable, unbounded amount (a repeat somewhere)."""
    found = False
    for op, av in items:
        if op in _ATOMIC:
            continue  # possessive and atomic groups never backtrack into themselves
        if op in _REPEATS:
            _low, high, sub = av
            many = high is _c.MAXREPEAT or high > 1
            if many and inside_repeat:
                raise UnsafeRegex("a repeat inside a repeat (like '(a+)+') can backtrack exponentially")
            if many:
                _check_branches(list(sub))
            _walk(list(sub), inside_repeat or many)
            found = found or many
        elif op is _c.SUBPATTERN:
            found = _walk(list(av[-1]), inside_repeat) or found
        elif op is _c.BRANCH:
            for branch in av[1]:
                found = _walk(list(branch), inside_repeat) or found
        elif op in (_c.ASSERT, _c.ASSERT_NOT):
            _walk(list(av[1]), inside_repeat)
        elif op is _c.GROUPREF or op is getattr(_c, "GROUPREF_EXISTS", None):
            raise UnsafeRegex("back-references are not allowed in rules (they defeat every time bound)")
    return found


def _check_branches(items: list[tuple[Any, Any]]) -> None:
    """`(a|ab)+`: two branches of a repeated alternation that start with the same literal."""
    for op, av in items:
        if op is _c.SUBPATTERN:
            _check_branches(list(av[-1]))
        elif op is _c.BRANCH:
            firsts = [_first_literal(list(b)) for b in av[1]]
            known = [f for f in firsts if f is not None]
            if len(known) != len(set(known)):
                raise UnsafeRegex("a repeated alternation whose branches start alike (like '(a|ab)+') backtracks exponentially")


def _first_literal(items: list[tuple[Any, Any]]) -> int | None:
    for op, av in items:
        if op is _c.LITERAL:
            return int(av)
        if op is _c.SUBPATTERN:
            return _first_literal(list(av[-1]))
        return None
    return None
