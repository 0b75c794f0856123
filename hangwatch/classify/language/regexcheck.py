"""Rule regexes that cannot backtrack for ever: ambiguous repeats are refused when a rule loads.

Python's `re` backtracks; `(a+)+$` takes 2^n steps on `a…a!`, and a rule runs on every log line
of every tick. A repeat that may match more than once is refused when its body can split the
same text in more than one way:
  - it holds another such repeat (`(a+)+`, `(\\w+\\s?)*`, `(.*a){20}`);
  - its body can match nothing (`(a?){30}`), or one of its alternatives can (`(a|a?)+`);
  - two of its alternatives can start with the same character (`(a|aa)+`, `(\\w|\\d)+`, `(a|ab)+`);
  - an optional part can start with what may follow it in the body (`(\\w\\d?)+`: a digit is
    either);
and back-references are refused outright. What remains is at most polynomial; the text each
pattern sees is also bounded (a log line is cut to logs.MAX_TEXT, a failure's haystack to
MAX_HAYSTACK, and a pattern that can match a newline runs line by line, see logscan), so each
match has a fixed worst case whatever this check misses.

The alternatives are read as written: `re`'s parser folds `a|aa` into `a(?:|a)` and `\\w|\\d` into
`[\\w\\d]`, which would hide the overlap, so the check parses with a private copy of the parser
whose alternation is left unfolded.

google-re2 was weighed: it installs, but RE2 has no lookaround, which four shipped rules need,
and its `$`/`\\b` differ from `re` on the scored corpora.

`required_literals` reads the other way: the literal texts one of which every match contains, so
that a log chunk holding none of them is never searched (`re` has no such prefilter for
alternations, and most rule patterns are long case-insensitive alternations).
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import re
import sys
from types import ModuleType
from typing import Any

if sys.version_info >= (3, 11):  # typeshed stubs only the deprecated sre_* names of the parser
    from re import _constants as _c  # type: ignore[attr-defined]

    _PARSER = "re._parser"
else:
    import sre_constants as _c

    _PARSER = "sre_parse"

__all__ = ["UnsafeRegex", "can_match_newline", "check_linear", "fold", "required_literals"]

_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT}
# Python 3.11+: None before (where `re` has neither, no pattern holds them)
_POSSESSIVE_REPEAT = getattr(_c, "POSSESSIVE_REPEAT", None)
_ATOMIC_GROUP = getattr(_c, "ATOMIC_GROUP", None)
_ATOMIC = {_POSSESSIVE_REPEAT, _ATOMIC_GROUP} - {None}
_ZERO_WIDTH = {_c.AT, _c.ASSERT, _c.ASSERT_NOT}

# Characters the first-character sets are computed over: ASCII and Latin-1, plus a few letters and
# digits beyond, so that two classes overlapping only outside ASCII (`\w` and `[^a-z]`) still meet.
_ALPHABET = frozenset(chr(i) for i in range(0x180)) | frozenset("\u0430\u4e00\u0663\u2028\u3000\uff10")
_CATEGORY = {
    name: frozenset(ch for ch in _ALPHABET if re.fullmatch(rx, ch))
    for name, rx in (("DIGIT", r"\d"), ("NOT_DIGIT", r"\D"), ("SPACE", r"\s"), ("NOT_SPACE", r"\S"),
                     ("WORD", r"\w"), ("NOT_WORD", r"\W"), ("LINEBREAK", r"\n"), ("NOT_LINEBREAK", r"[^\n]"))
}  # fmt: skip


class UnsafeRegex(ValueError):
    """The pattern can take exponential time on some input; the message says which part."""


@functools.lru_cache(maxsize=1)
def _unfolded_parser() -> ModuleType:
    """A private copy of `re`'s parser whose `a|b` stays a BRANCH of what was written."""
    spec = importlib.util.find_spec(_PARSER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        source = inspect.getsource(module._parse_sub)
    except (OSError, TypeError):
        return module  # no source shipped: the folded parse still catches most shapes
    start = source.find("    subpattern = SubPattern(state)\n")
    end = source.find("    subpattern.append((BRANCH, (None, items)))")
    if start < 0 or end < start:
        return module
    exec(source[:start] + "    subpattern = SubPattern(state)\n" + source[end:], module.__dict__)  # noqa: S102
    return module


def _parse(pattern: str, flags: int) -> Any:
    try:
        return _unfolded_parser().parse(pattern, flags)
    except (re.error, RecursionError, OverflowError) as exc:
        raise UnsafeRegex(str(exc)) from None


def check_linear(pattern: str, flags: int = 0) -> None:
    """Raise UnsafeRegex for a repeat whose body can split one text several ways, or a back-reference."""
    parsed = _parse(pattern, flags)
    _Walk(_flags_of(parsed)).walk(list(parsed.data), inside_repeat=False)


def can_match_newline(pattern: str, flags: int = 0) -> bool:
    """Whether some match of `pattern` can contain a newline (then it must not run on joined lines)."""
    parsed = _parse(pattern, flags)
    return "\n" in _Walk(_flags_of(parsed)).chars(list(parsed.data))


def _flags_of(parsed: Any) -> int:
    flags = int(parsed.state.flags)
    stack = list(parsed.data)
    while stack:  # a scoped `(?i:...)` anywhere: fold case everywhere (more overlap, never less)
        op, av = stack.pop()
        if op is _c.SUBPATTERN:
            flags |= int(av[1] or 0)
            stack.extend(av[-1])
        elif op in _REPEATS or op in _ATOMIC:
            stack.extend(av if op is _ATOMIC_GROUP else av[-1])
        elif op is _c.BRANCH:
            for branch in av[1]:
                stack.extend(branch)
    return flags


class _Walk:
    def __init__(self, flags: int) -> None:
        self.ignorecase = bool(flags & re.IGNORECASE)
        self.dotall = bool(flags & re.DOTALL)

    # ------------------------------------------------------------ the check

    def walk(self, items: list[tuple[Any, Any]], inside_repeat: bool) -> None:
        for op, av in items:
            if op in _ATOMIC:
                continue  # possessive and atomic groups never backtrack into themselves
            if op in _REPEATS:
                _low, high, sub = av
                many = high is _c.MAXREPEAT or high > 1
                if many and inside_repeat:
                    raise UnsafeRegex("a repeat inside a repeat (like '(a+)+') can backtrack exponentially")
                self.walk(list(sub), inside_repeat or many)  # a nested repeat first: the clearer message
                if many:
                    self._check_body(list(sub))
            elif op is _c.SUBPATTERN:
                self.walk(list(av[-1]), inside_repeat)
            elif op is _c.BRANCH:
                for branch in av[1]:
                    self.walk(list(branch), inside_repeat)
            elif op in (_c.ASSERT, _c.ASSERT_NOT):
                self.walk(list(av[1]), inside_repeat)
            elif op is _c.GROUPREF or op is getattr(_c, "GROUPREF_EXISTS", None):
                raise UnsafeRegex("back-references are not allowed in rules (they defeat every time bound)")

    def _check_body(self, body: list[tuple[Any, Any]]) -> None:
        """The body of a repeat that may run more than once: one way to split any text."""
        if self.nullable(body):
            raise UnsafeRegex("a repeat whose body can match nothing (like '(a?){30}') backtracks exponentially")
        seq = self._flat(body)
        for i, (op, av) in enumerate(seq):
            if op is _c.BRANCH:
                alts = [list(b) for b in av[1]]
                if any(self.nullable(alt) for alt in alts):
                    raise UnsafeRegex("a repeated alternation with a branch that can match nothing (like '(a|a?)+') "
                                      "backtracks exponentially")  # fmt: skip
                firsts = [self.first(alt) for alt in alts]
                for j, a in enumerate(firsts):
                    if any(a & b for b in firsts[j + 1:]):
                        raise UnsafeRegex("a repeated alternation whose branches can start alike (like '(a|aa)+' "
                                          "or '(\\w|\\d)+') backtracks exponentially")  # fmt: skip
            elif self.nullable([(op, av)]) and op not in _ZERO_WIDTH:
                # an optional part, then (round the loop) what follows it: `(\w\d?)+` reads "1" either way
                if self.first([(op, av)]) & self.first(seq[i + 1:] + seq):
                    raise UnsafeRegex("an optional part of a repeat that can start like what follows it "
                                      "(like '(\\w\\d?)+') backtracks exponentially")  # fmt: skip

    def _flat(self, items: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        out: list[tuple[Any, Any]] = []
        for op, av in items:
            if op is _c.SUBPATTERN:
                out.extend(self._flat(list(av[-1])))
            else:
                out.append((op, av))
        return out

    # ------------------------------------------------------------ first characters, emptiness

    def nullable(self, items: list[tuple[Any, Any]]) -> bool:
        for op, av in items:
            if op in _ZERO_WIDTH:
                continue
            if op is _c.SUBPATTERN:
                if not self.nullable(list(av[-1])):
                    return False
            elif op is _c.BRANCH:
                if not any(self.nullable(list(b)) for b in av[1]):
                    return False
            elif op in _REPEATS:
                if av[0] > 0 and not self.nullable(list(av[2])):
                    return False
            elif op in _ATOMIC:
                if not self.nullable(list(av if op is _ATOMIC_GROUP else av[-1])):
                    return False
            else:
                return False
        return True

    def first(self, items: list[tuple[Any, Any]]) -> frozenset[str]:
        """Characters a match of `items` can start with (over _ALPHABET)."""
        out: frozenset[str] = frozenset()
        for op, av in items:
            out |= self._first_one(op, av)
            if not self.nullable([(op, av)]):
                break
        return out

    def _first_one(self, op: Any, av: Any) -> frozenset[str]:
        if op is _c.SUBPATTERN:
            return self.first(list(av[-1]))
        if op is _c.BRANCH:
            return frozenset().union(*(self.first(list(b)) for b in av[1]))
        if op in _REPEATS:
            return self.first(list(av[2]))
        if op is _ATOMIC_GROUP:
            return self.first(list(av))
        if op is _POSSESSIVE_REPEAT:
            return self.first(list(av[2]))
        if op in _ZERO_WIDTH:
            return frozenset()
        return self._char(op, av)

    def chars(self, items: list[tuple[Any, Any]]) -> frozenset[str]:
        """Every character any part of `items` can consume."""
        out: frozenset[str] = frozenset()
        for op, av in items:
            if op is _c.SUBPATTERN:
                out |= self.chars(list(av[-1]))
            elif op is _c.BRANCH:
                for b in av[1]:
                    out |= self.chars(list(b))
            elif op in _REPEATS or op is _POSSESSIVE_REPEAT:
                out |= self.chars(list(av[2]))
            elif op is _ATOMIC_GROUP:
                out |= self.chars(list(av))
            elif op in (_c.ASSERT, _c.ASSERT_NOT):
                out |= self.chars(list(av[1]))
            elif op is not _c.AT:
                out |= self._char(op, av)
        return out

    def _char(self, op: Any, av: Any) -> frozenset[str]:
        if op is _c.LITERAL:
            found = frozenset(chr(av))
        elif op is _c.NOT_LITERAL:
            found = _ALPHABET - self._fold(frozenset(chr(av)))
        elif op is _c.ANY:
            found = _ALPHABET if self.dotall else _ALPHABET - {"\n"}
        elif op is _c.IN:
            found = self._set(av)
        elif op is _c.CATEGORY:
            found = self._category(av)
        else:
            found = _ALPHABET  # an op this walk does not know: assume it matches anything
        return self._fold(found)

    def _set(self, items: list[tuple[Any, Any]]) -> frozenset[str]:
        negate, out = False, frozenset[str]()
        for op, av in items:
            if op is _c.NEGATE:
                negate = True
            elif op is _c.LITERAL:
                out |= {chr(av)}
            elif op in (_c.RANGE, getattr(_c, "RANGE_UNI_IGNORE", None)):
                lo, hi = av
                out |= {ch for ch in _ALPHABET if lo <= ord(ch) <= hi}
            elif op is _c.CATEGORY:
                out |= self._category(av)
            else:
                out |= _ALPHABET
        out = self._fold(out)
        return _ALPHABET - out if negate else out

    def _category(self, av: Any) -> frozenset[str]:
        name = str(av).replace("CATEGORY_", "").replace("UNI_", "").replace("LOC_", "")
        return _CATEGORY.get(name, _ALPHABET)

    def _fold(self, chars: frozenset[str]) -> frozenset[str]:
        if not self.ignorecase:
            return chars
        return chars | {c.lower() for c in chars} | {c.upper() for c in chars if len(c.upper()) == 1}


# ---------------------------------------------------------------- literals a match needs

_MIN_LITERAL = 3  # shorter texts are in nearly every chunk: no use as a filter


@functools.lru_cache(maxsize=4096)
def required_literals(pattern: str, flags: int = 0) -> frozenset[str] | None:
    """Casefolded texts of which every match of `pattern` contains at least one, or None.

    A text holds a match only if `fold(text)` contains one of them, with or without IGNORECASE
    (literals are runs of ASCII characters; `fold` maps every character `re` matches to an ASCII
    one case-insensitively onto that one's casefold).
    """
    try:
        parsed = importlib.import_module(_PARSER).parse(pattern, flags)
    except (re.error, RecursionError, OverflowError):
        return None
    return _needed(list(parsed.data))


_END = object()  # closes the last run of literals


def _needed(items: list[tuple[Any, Any]]) -> frozenset[str] | None:
    """The most selective requirement among `items` in sequence: one of them holds in any match."""
    best: frozenset[str] | None = None
    run: list[str] = []

    def consider(found: frozenset[str] | None) -> None:
        nonlocal best
        if found and (best is None or _selectivity(found) > _selectivity(best)):
            best = found

    for op, av in [*items, (_END, None)]:
        if op is _c.LITERAL and chr(av).isascii():
            run.append(chr(av).casefold())
            continue
        if len(run) >= _MIN_LITERAL:
            consider(frozenset({"".join(run)}))
        run = []
        if op is _c.SUBPATTERN:
            consider(_needed(list(av[-1])))
        elif op is _ATOMIC_GROUP:
            consider(_needed(list(av)))
        elif (op in _REPEATS or op is _POSSESSIVE_REPEAT) and av[0] >= 1:
            consider(_needed(list(av[2])))
        elif op is _c.BRANCH:
            branches = [found for b in av[1] if (found := _needed(list(b)))]
            if len(branches) == len(av[1]):  # every alternative needs a text: one of them is in the match
                consider(frozenset().union(*branches))
    return best


def _selectivity(literals: frozenset[str]) -> tuple[int, int]:
    return min(len(lit) for lit in literals), -len(literals)


# `re` matches these to `i` case-insensitively; casefold() leaves them apart (ſ and K fold to s and k)
_FOLD_EXTRA = {0x130: "i", 0x131: "i"}


def fold(text: str) -> str:
    """`text` as `required_literals` compares it: every ASCII character `re` could match case-insensitively
    is its casefold."""
    return text.translate(_FOLD_EXTRA).casefold()
