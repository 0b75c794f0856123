"""Known-bad release tables (hangwatch/data/known_bad.yaml): which NCCL / FlashInfer releases hang
on which GPU architecture, each entry with its public sources.

    load_tables(path=None) -> {package: (KnownBad, ...)}     validated; RuleError names file:line
    known_bad(entries, version, ccs, toolkit, env, flags) -> [KnownBad]   the entries that apply
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from hangwatch.classify.causes import SEVERITIES
from hangwatch.errors import RuleError, RuleLocation

__all__ = ["PACKAGES", "TABLE_FILE", "KnownBad", "known_bad", "load_tables"]

TABLE_FILE = Path(__file__).resolve().parents[2] / "data" / "known_bad.yaml"
PACKAGES = ("nccl", "flashinfer")
_KEYS = {"id", "versions", "compute_capability", "toolkit", "env", "flags", "severity", "why", "remedy", "sources"}
_REQUIRED = ("id", "versions", "severity", "why", "remedy", "sources")


@dataclass(frozen=True)
class KnownBad:
    id: str
    package: str
    versions: SpecifierSet | None  # None: every release
    compute_capability: tuple[str, ...]
    severity: str
    why: str
    remedy: str
    sources: tuple[str, ...]
    toolkit: SpecifierSet | None = None
    env: tuple[tuple[str, re.Pattern[str]], ...] = ()
    flags: tuple[tuple[str, re.Pattern[str]], ...] = ()


def load_tables(path: Path | None = None) -> dict[str, tuple[KnownBad, ...]]:
    from hangwatch.parse.positioned_yaml import read_table

    path = path or TABLE_FILE
    doc = read_table(path, "known-bad table")
    if not isinstance(doc, dict):
        raise RuleError("a known-bad table is a mapping of package -> entries", RuleLocation(str(path)))
    tables = {}
    for package, entries in doc.items():
        where = _where(path, doc, package)
        if package not in PACKAGES or not isinstance(entries, list):
            raise RuleError(f"'{package}': expected one of {', '.join(PACKAGES)} with a list of entries", where)
        tables[package] = tuple(_entry(package, raw, _item_where(path, entries, i)) for i, raw in enumerate(entries))
    return tables


def _where(path: Path, doc: Any, key: Any) -> RuleLocation:
    mark = getattr(doc, "key_marks", {}).get(key)
    return RuleLocation(str(path), mark.line + 1, mark.column + 1) if mark else RuleLocation(str(path))


def _item_where(path: Path, items: Any, index: int) -> RuleLocation:
    marks = getattr(items, "marks", None)
    return RuleLocation(str(path), marks[index].line + 1, marks[index].column + 1) if marks else RuleLocation(str(path))


def _entry(package: str, raw: Any, where: RuleLocation) -> KnownBad:
    if not isinstance(raw, dict):
        raise RuleError("an entry is a mapping", where)
    unknown = set(raw) - _KEYS
    missing = [key for key in _REQUIRED if key not in raw]
    if unknown or missing:
        raise RuleError(f"entry: unknown keys {sorted(unknown)}, missing {missing}", where)
    if raw["severity"] not in SEVERITIES:
        raise RuleError(f"severity must be one of {', '.join(SEVERITIES)}", where)
    sources = raw["sources"] if isinstance(raw["sources"], list) else [raw["sources"]]
    if not sources or not all(isinstance(s, str) and s.startswith("http") for s in sources):
        raise RuleError("every entry needs its sources (links)", where)
    return KnownBad(
        id=str(raw["id"]), package=package, versions=_spec(raw["versions"], where),
        compute_capability=tuple(str(c) for c in raw.get("compute_capability") or ()),
        severity=raw["severity"], why=" ".join(str(raw["why"]).split()), remedy=str(raw["remedy"]),
        sources=tuple(sources), toolkit=_spec(raw["toolkit"], where) if "toolkit" in raw else None,
        env=_patterns(raw.get("env"), where), flags=_patterns(raw.get("flags"), where),
    )  # fmt: skip


def _spec(text: Any, where: RuleLocation) -> SpecifierSet | None:
    if str(text).strip() == "*":
        return None
    try:
        return SpecifierSet(str(text))
    except InvalidSpecifier as exc:
        raise RuleError(f"bad version specifier {text!r}: {exc}", where) from exc


def _patterns(raw: Any, where: RuleLocation) -> tuple[tuple[str, re.Pattern[str]], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise RuleError("env / flags map a name to a regex", where)
    try:
        return tuple((str(k), re.compile(str(v))) for k, v in raw.items())
    except re.error as exc:
        raise RuleError(f"bad regex: {exc}", where) from exc


def _version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def _any_match(pairs: Iterable[tuple[str, re.Pattern[str]]], values: Mapping[str, Any]) -> bool:
    return any(isinstance(values.get(name), str) and pattern.search(values[name]) for name, pattern in pairs)


def known_bad(
    entries: Iterable[KnownBad], version: str, ccs: Iterable[str], toolkit: str | None,
    env: Mapping[str, str], flags: Mapping[str, Any],
) -> list[KnownBad]:  # fmt: skip
    """The entries that hold for this release, these GPUs, toolkit, environment and flags.

    A condition on something unknown (the toolkit, the GPUs) does not hold: a table never guesses.
    """
    installed, ccs = _version(version), set(ccs)
    hits = []
    for entry in entries:
        if entry.versions is not None and (installed is None or installed not in entry.versions):
            continue
        if entry.compute_capability and not ccs & set(entry.compute_capability):
            continue
        kit = _version(toolkit)
        if entry.toolkit is not None and (kit is None or kit not in entry.toolkit):
            continue
        if (entry.env and not _any_match(entry.env, env)) or (entry.flags and not _any_match(entry.flags, flags)):
            continue
        hits.append(entry)
    return hits
