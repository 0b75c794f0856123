"""Atoms over the failures a log reports (hangwatch.parse.failures): the first failure and the rest.

`error.root` reads the failure that started it all, `error.any` any failure. The argument is a
regex over the failure (its summary, chained causes, the locations its message names and its
frames as `module:function`), or a mapping whose every key must hold on the same failure:
`matches` (that regex), `where` (a regex over locations and frames only), `frame` (a regex over
the innermost frame, `module:function`, where it raised), `errno` (a family:
EADDRINUSE, ENOSPC, ...), `cuda` (a regex over the CUDA error text), `signal` (SIGBUS, ...),
`kind` (exception, terminate, nccl, cuda, signal, errno, exit, timeout, consequence), `type`
(a regex over the exception type). Matching is case-insensitive: what a failure says, not how
one release capitalised it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from hangwatch.classify.language.atoms.facts import NO, clip
from hangwatch.classify.language.conditions import AtomFn, AtomResult
from hangwatch.classify.language.values import ArgParser, Site, check_keys
from hangwatch.classify.verdict.context import Context
from hangwatch.errors import RuleError
from hangwatch.model import Fact, Source
from hangwatch.parse.failures import Failure

KINDS = ("exception", "terminate", "nccl", "cuda", "signal", "errno", "exit", "timeout", "consequence")
_KEYS = ("matches", "where", "frame", "errno", "cuda", "signal", "kind", "type")


@dataclass(frozen=True)
class FailureArg:
    matches: re.Pattern[str] | None = None
    where: re.Pattern[str] | None = None
    frame: re.Pattern[str] | None = None
    errno: frozenset[str] = frozenset()
    cuda: re.Pattern[str] | None = None
    signal: frozenset[str] = frozenset()
    kind: frozenset[str] = frozenset()
    type: re.Pattern[str] | None = None

    def holds(self, failure: Failure) -> bool:
        tests = (
            self.matches is None or bool(self.matches.search(failure.haystack)),
            self.where is None or bool(self.where.search(failure.where)),
            self.frame is None or (bool(failure.frames) and bool(self.frame.search(_innermost(failure)))),
            not self.errno or failure.errno in self.errno,
            self.cuda is None or (failure.cuda is not None and bool(self.cuda.search(failure.cuda))),
            not self.signal or failure.signal in self.signal,
            not self.kind or failure.kind in self.kind,
            self.type is None or (failure.exc_type is not None and bool(self.type.search(failure.exc_type))),
        )
        return all(tests)


def _innermost(failure: Failure) -> str:
    top = failure.frames[0]
    return f"{top.module or top.file}:{top.function}"


def _ci(raw: Any, site: Site, key: str) -> re.Pattern[str]:
    if not isinstance(raw, str) or not raw:
        raise RuleError(f"'{key}' needs a regex string, got {raw!r}", site.value(key) if key in _KEYS else site.loc)
    try:
        return re.compile(raw, re.I)
    except re.error as exc:
        raise RuleError(f"bad regex {raw!r}: {exc}", site.loc) from exc


def _names(raw: Any, site: Site, key: str, allowed: tuple[str, ...] | None = None) -> frozenset[str]:
    values = raw if isinstance(raw, list) else [raw]
    if not values or not all(isinstance(v, str) and v for v in values):
        raise RuleError(f"'{key}' needs a name or a list of names, got {raw!r}", site.value(key))
    if allowed is not None and (bad := [v for v in values if v not in allowed]):
        raise RuleError(f"'{key}': unknown {bad[0]!r} (one of {', '.join(allowed)})", site.value(key))
    return frozenset(v if allowed else v.upper() for v in values)


def _failure_arg(raw: Any, site: Site) -> FailureArg:
    if isinstance(raw, str):
        return FailureArg(matches=_ci(raw, site, site.name))
    if not isinstance(raw, dict) or not raw:
        raise RuleError(f"'{site.name}' needs a regex or a mapping of {', '.join(_KEYS)}", site.loc)
    check_keys(raw, site, _KEYS)
    return FailureArg(
        matches=_ci(raw["matches"], site, "matches") if "matches" in raw else None,
        where=_ci(raw["where"], site, "where") if "where" in raw else None,
        frame=_ci(raw["frame"], site, "frame") if "frame" in raw else None,
        errno=_names(raw["errno"], site, "errno") if "errno" in raw else frozenset(),
        cuda=_ci(raw["cuda"], site, "cuda") if "cuda" in raw else None,
        signal=_names(raw["signal"], site, "signal") if "signal" in raw else frozenset(),
        kind=_names(raw["kind"], site, "kind", KINDS) if "kind" in raw else frozenset(),
        type=_ci(raw["type"], site, "type") if "type" in raw else None,
    )


def failure_fact(failure: Failure) -> Fact:
    where = f" [at {failure.where.split(' ')[0]}]" if failure.where and failure.kind == "exception" else ""
    return Fact(clip(failure.text) + where, Source("server.log", failure.lineno, failure.rank), failure.role)


def _result(found: list[Failure]) -> AtomResult:
    if not found:
        return NO
    first = found[0]
    return AtomResult(True, [failure_fact(first)], values={"line": first.text})


def error_root(arg: FailureArg, ctx: Context) -> AtomResult:
    root = ctx.root_failure
    return _result([root] if root is not None and arg.holds(root) else [])


def error_any(arg: FailureArg, ctx: Context) -> AtomResult:
    return _result([f for f in ctx.failures if arg.holds(f)])


ATOMS: dict[str, AtomFn] = {"error.root": error_root, "error.any": error_any}
ARGS: dict[str, ArgParser] = {"error.root": _failure_arg, "error.any": _failure_arg}
