"""YAML rule files → compiled `Rule`s, validated with `file:line:column: reason` errors.

The YAML loader records where every key and value starts (pySigma leaves `line` empty; we take
it from each node's `start_mark`) and refuses duplicate keys. A rule with any error is never
silently dropped: `load_rules` raises the first error, or returns every error in collect mode.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal, overload

from hangwatch.classify.causes import CAUSES, SEVERITIES
from hangwatch.classify.language.atoms import ARGS, ATOMS, PREFIXES, table_key
from hangwatch.classify.language.conditions import AllNode, AnyNode, AtomNode, Node, NotNode
from hangwatch.classify.language.rule import DEFAULT_CONFIDENCE, Rule
from hangwatch.classify.language.template import check_template
from hangwatch.classify.language.values import Site, clip_repr, parse_bool, parse_choice, parse_duration, parse_names
from hangwatch.engines import engine_names
from hangwatch.errors import RuleError, RuleLocation
from hangwatch.model import State
from hangwatch.parse.positioned_yaml import PositionedList, PositionedMap, location, parse_yaml
from hangwatch.userfile import read_user_file

RULES_DIR = Path(__file__).resolve().parents[2] / "rules"
RULE_KEYS = ("id", "cause", "title", "severity", "engines", "confidence", "state", "for", "immediate",
             "when", "message", "remedy", "references", "check")  # fmt: skip
REQUIRED_KEYS = ("id", "cause", "title", "severity", "when", "remedy")
_RULE_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def site_of(raw: Any, loc: RuleLocation, name: str = "") -> Site:
    """The `Site` of a value: where it is and, for a mapping or list, where each part is."""
    path = loc.path
    if isinstance(raw, PositionedMap):
        keys = {k: location(path, m) for k, m in raw.key_marks.items()}
        return Site(loc, keys, {k: location(path, m) for k, m in raw.value_marks.items()}, name)
    if isinstance(raw, PositionedList):
        return Site(loc, values={i: location(path, m) for i, m in enumerate(raw.marks)}, name=name)
    return Site(loc, name=name)


# ---------------------------------------------------------------- conditions


def _suggest(name: str) -> str:
    close = difflib.get_close_matches(name, [*ATOMS, "all", "any", "not"], n=1)
    return f" (did you mean '{close[0]}'?)" if close and not close[0].endswith("*") else ""


def compile_condition(raw: Any, site: Site, errors: list[RuleError]) -> Node | None:
    """One condition mapping → a node; errors are appended and None returned."""
    if not isinstance(raw, dict) or len(raw) != 1:
        errors.append(RuleError("a condition is a mapping with one key: all, any, not, or an evidence atom", site.loc))
        return None
    key, value = next(iter(raw.items()))
    inner = site_of(value, site.value(key), str(key))
    if key in ("all", "any"):
        return _compile_list(str(key), value, inner, site.key(key), errors)
    if key == "not":
        child = compile_condition(value, inner, errors)
        return NotNode(child, site.key(key)) if child else None
    return _compile_atom(str(key), value, inner, site.key(key), errors)


def _compile_list(key: str, value: Any, site: Site, at: RuleLocation, errors: list[RuleError]) -> Node | None:
    if not isinstance(value, list) or not value:
        errors.append(RuleError(f"'{key}' needs a non-empty list of conditions", site.loc))
        return None
    children = [compile_condition(item, site_of(item, site.value(i)), errors) for i, item in enumerate(value)]
    nodes = tuple(child for child in children if child is not None)
    if len(nodes) != len(children):
        return None
    return (AllNode if key == "all" else AnyNode)(nodes, at)


def _compile_atom(name: str, value: Any, site: Site, at: RuleLocation, errors: list[RuleError]) -> Node | None:
    key = table_key(name)
    if key is None:
        hint = " (or flag.NAME, env.NAME, meta.FIELD)" if "." in name and not name.startswith(PREFIXES) else ""
        errors.append(RuleError(f"unknown evidence '{name}'{_suggest(name) or hint}", at))
        return None
    try:
        return AtomNode(name, ARGS[key](value, site), ATOMS[key], at)
    except RuleError as exc:
        errors.append(exc)
        return None


# ---------------------------------------------------------------- rule fields


def _text(raw: Any, site: Site) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise RuleError(f"'{site.name}' needs non-empty text", site.loc)
    return raw.strip()


def _rule_id(raw: Any, site: Site) -> str:
    if not isinstance(raw, str) or not _RULE_ID.match(raw):
        raise RuleError(f"bad rule id {clip_repr(raw)} (lowercase letters, digits and '-')", site.loc)
    return raw


def _confidence(raw: Any, site: Site) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 <= raw <= 1:
        raise RuleError(f"confidence must be a number from 0 to 1, got {clip_repr(raw)}", site.loc)
    return float(raw)


def _message(raw: Any, site: Site) -> str:
    text = _text(raw, site)
    check_template(text, site.loc)
    return text


def _references(raw: Any, site: Site) -> tuple[str, ...]:
    items = raw if isinstance(raw, list) else [raw]
    if not items or not all(isinstance(item, str) and item for item in items):
        raise RuleError(f"'references' needs a link or a list of links, got {clip_repr(raw)}", site.loc)
    return tuple(items)


FIELDS: dict[str, Callable[[Any, Site], Any]] = {
    "id": _rule_id,
    "cause": lambda raw, site: parse_choice(raw, CAUSES, "cause", site.loc),
    "title": _text,
    "severity": lambda raw, site: parse_choice(raw, SEVERITIES, "severity", site.loc),
    "engines": lambda raw, site: tuple(sorted(parse_names(raw, "engines", site.loc, engine_names()))),
    "confidence": _confidence,
    "state": lambda raw, site: State(parse_choice(raw, ("progressing", "stalled"), "state", site.loc)),
    "for": lambda raw, site: parse_duration(raw, site.loc),
    "immediate": parse_bool,
    "message": _message,
    "remedy": _text,
    "references": _references,
    "check": _text,
}


def _fields(raw: PositionedMap, site: Site, errors: list[RuleError]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in RULE_KEYS:
            close = difflib.get_close_matches(str(key), RULE_KEYS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            errors.append(RuleError(f"unknown key '{key}'{hint}", site.key(key)))
        elif key == "when":
            values[key] = compile_condition(value, site_of(value, site.value(key), key), errors)
        else:
            try:
                values[key] = FIELDS[key](value, site_of(value, site.value(key), key))
            except RuleError as exc:
                errors.append(exc)
    return values


def compile_rule(raw: Any, loc: RuleLocation, errors: list[RuleError]) -> Rule | None:
    """One rule mapping → a `Rule`; every problem found is appended to `errors`."""
    if not isinstance(raw, PositionedMap):
        errors.append(RuleError("a rule is a mapping with id, cause, title, severity, when, remedy", loc))
        return None
    before = len(errors)
    site = site_of(raw, loc)
    values = _fields(raw, site, errors)
    errors.extend(RuleError(f"rule needs '{key}'", loc) for key in REQUIRED_KEYS if key not in raw)
    if len(errors) > before:
        return None
    return Rule(
        id=values["id"], cause=values["cause"], title=values["title"], severity=values["severity"],
        when=values["when"], remedy=values["remedy"], message=values.get("message"),
        engines=values.get("engines", ()), confidence=values.get("confidence", DEFAULT_CONFIDENCE),
        state=values.get("state"), hold_s=values.get("for", 0.0), immediate=values.get("immediate", False),
        references=values.get("references", ()), location=loc, check=values.get("check"),
    )  # fmt: skip


# ---------------------------------------------------------------- files


def compile_document(data: Any, path: str) -> tuple[list[Rule], list[RuleError]]:
    """A parsed rule file → its rules and every error in it."""
    if data is None:
        return [], []
    if not isinstance(data, PositionedMap) or not {"rules", "preflight"} & set(data):
        return [], [RuleError("a rule file is a mapping with a list under 'rules:'", _start(data, RuleLocation(path)))]
    # `preflight:` holds checks run before a launch (classify/preflight/checks.py loads them)
    errors = [RuleError(f"unknown key '{key}' (a rule file holds 'rules:' and 'preflight:')", location(path, data.key_marks[key]))
              for key in data if key not in ("rules", "preflight")]  # fmt: skip
    items = data.get("rules")
    if items is None:
        return [], errors
    if not isinstance(items, PositionedList):
        return [], [*errors, RuleError("'rules' needs a list of rules", location(path, data.value_marks["rules"]))]
    rules = [compile_rule(item, location(path, mark), errors) for item, mark in zip(items, items.marks, strict=True)]
    return [rule for rule in rules if rule is not None], errors


def _start(data: Any, where: RuleLocation) -> RuleLocation:
    return location(where.path, data.start) if isinstance(data, (PositionedMap, PositionedList)) else where


_MAX_RULE_FILE = 4 << 20  # the shipped rules are ~300 KiB together


def load_file(path: Path) -> tuple[list[Rule], list[RuleError]]:
    """Every rule of one file, and every error in it."""
    try:
        data = parse_yaml(read_user_file(path, _MAX_RULE_FILE).decode("utf-8"), str(path))
    except (OSError, UnicodeDecodeError) as exc:
        return [], [RuleError(f"cannot read the file: {getattr(exc, 'strerror', None) or exc}", RuleLocation(str(path)))]
    except RuleError as exc:
        return [], [exc]
    return compile_document(data, str(path))


def load_text(text: str, path: str = "<text>") -> list[Rule]:
    """Rules from YAML text (inline rules in tests and tools); raises the first error."""
    rules, errors = compile_document(parse_yaml(text, path), path)
    rules = _without_duplicates(rules, errors)
    if errors:
        raise errors[0]
    return rules


def rule_files(paths: Iterable[Path | str]) -> tuple[list[Path], list[RuleError]]:
    files, errors = [], []
    for path in map(Path, paths):
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()))
        elif path.is_file():
            files.append(path)
        else:
            errors.append(RuleError("no such rule file or directory", RuleLocation(str(path))))
    return files, errors


def _without_duplicates(rules: list[Rule], errors: list[RuleError]) -> list[Rule]:
    first: dict[str, Rule] = {}
    for rule in rules:
        if rule.id in first:
            reason = f"duplicate rule id '{rule.id}' (first defined at {first[rule.id].location})"
            errors.append(RuleError(reason, rule.location))
        else:
            first[rule.id] = rule
    return list(first.values())


Paths = Iterable[Path | str]
Loaded = tuple[list[Rule], list[RuleError]]


@overload
def load_rules(paths: Paths | None = None, collect_errors: Literal[False] = False) -> list[Rule]: ...
@overload
def load_rules(paths: Paths | None, collect_errors: Literal[True]) -> Loaded: ...
@overload
def load_rules(*, collect_errors: Literal[True]) -> Loaded: ...


def load_rules(paths: Iterable[Path | str] | None = None, collect_errors: bool = False) -> Any:
    """Load rule files and directories (default: the shipped `hangwatch/rules/`, recursively).

    Raises the first `RuleError`; with `collect_errors=True` returns `(rules, errors)` instead,
    the rules being those without errors.
    """
    files, errors = rule_files([RULES_DIR] if paths is None else paths)
    rules: list[Rule] = []
    for path in files:
        found, problems = load_file(path)
        rules.extend(found)
        errors.extend(problems)
    rules = _without_duplicates(rules, errors)
    if collect_errors:
        return rules, errors
    if errors:
        raise errors[0]
    return rules
