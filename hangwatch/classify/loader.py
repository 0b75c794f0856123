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

import yaml

from hangwatch.bundle.archive import read_user_file
from hangwatch.classify.atoms import ARGS, ATOMS, PREFIXES, table_key
from hangwatch.classify.causes import CAUSES, SEVERITIES
from hangwatch.classify.conditions import AllNode, AnyNode, AtomNode, Node, NotNode
from hangwatch.classify.rule import DEFAULT_CONFIDENCE, Rule
from hangwatch.classify.template import check_template
from hangwatch.classify.values import Site, clip_repr, parse_bool, parse_choice, parse_duration, parse_names
from hangwatch.engines import engine_names
from hangwatch.errors import RuleError, RuleLocation
from hangwatch.model import State

RULES_DIR = Path(__file__).resolve().parent.parent / "rules"
RULE_KEYS = ("id", "cause", "title", "severity", "engines", "confidence", "state", "for", "immediate",
             "when", "message", "remedy", "references", "check")  # fmt: skip
REQUIRED_KEYS = ("id", "cause", "title", "severity", "when", "remedy")
_RULE_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


# ---------------------------------------------------------------- YAML with positions


class _Map(dict):  # type: ignore[type-arg]
    """A mapping that remembers where each key and each value starts."""

    start: yaml.Mark
    key_marks: dict[Any, yaml.Mark]
    value_marks: dict[Any, yaml.Mark]


class _Seq(list):  # type: ignore[type-arg]
    start: yaml.Mark
    marks: list[yaml.Mark]


class RuleYamlLoader(yaml.SafeLoader):
    path = "?"

    def at(self, mark: yaml.Mark) -> RuleLocation:
        return _at(self.path, mark)


def _at(path: str, mark: yaml.Mark) -> RuleLocation:
    return RuleLocation(path, mark.line + 1, mark.column + 1)


def _construct_map(loader: RuleYamlLoader, node: yaml.MappingNode) -> _Map:
    loader.flatten_mapping(node)
    data = _Map()
    data.start, data.key_marks, data.value_marks = node.start_mark, {}, {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise RuleError("a key must be a plain value", loader.at(key_node.start_mark))
        if key in data:
            raise RuleError(f"duplicate key '{key}'", loader.at(key_node.start_mark))
        data[key] = loader.construct_object(value_node, deep=True)
        data.key_marks[key], data.value_marks[key] = key_node.start_mark, value_node.start_mark
    return data


def _construct_seq(loader: RuleYamlLoader, node: yaml.SequenceNode) -> _Seq:
    data = _Seq(loader.construct_object(child, deep=True) for child in node.value)
    data.start, data.marks = node.start_mark, [child.start_mark for child in node.value]
    return data


RuleYamlLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)
RuleYamlLoader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)


MAX_YAML_NODES = 100_000  # nodes after alias expansion: the shipped rules hold ~20 000 together
MAX_YAML_DEPTH = 64  # a rule's `when` nests a handful of levels


def read_table(path: Path, what: str) -> Any:
    """A data table shipped beside the rules (known-bad releases, phase priors, raise sites), parsed
    with positions; a file that cannot be read is a RuleError naming `what`."""
    try:
        return parse_yaml(path.read_text(encoding="utf-8"), str(path))
    except OSError as exc:
        raise RuleError(f"cannot read the {what}: {exc}", RuleLocation(str(path))) from exc


def parse_yaml(text: str, path: str) -> Any:
    """The YAML document, bounded: aliases may not expand it past MAX_YAML_NODES, nor nest past MAX_YAML_DEPTH."""
    loader = RuleYamlLoader(text)
    loader.path = path
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_size(node, loader)
        return loader.construct_document(node)
    except RecursionError:
        raise RuleError(f"YAML: nested more than {MAX_YAML_DEPTH} levels deep", RuleLocation(path)) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = _at(path, mark) if mark else RuleLocation(path)
        raise RuleError(f"YAML: {exc.problem or exc.context}", where) from exc
    except yaml.YAMLError as exc:
        raise RuleError(f"YAML: {exc}", RuleLocation(path)) from exc
    finally:
        loader.dispose()


def _check_size(root: yaml.Node, loader: RuleYamlLoader) -> None:
    """Walk the node graph as construction would expand it, aliases counted each time they are used."""
    stack, count = [(root, 0)], 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_YAML_NODES:
            raise RuleError(f"YAML: expands to more than {MAX_YAML_NODES} nodes (aliases that multiply?)", loader.at(node.start_mark))
        if depth > MAX_YAML_DEPTH:
            raise RuleError(f"YAML: nested more than {MAX_YAML_DEPTH} levels deep", loader.at(node.start_mark))
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend((part, depth + 1) for pair in node.value for part in pair)


def site_of(raw: Any, loc: RuleLocation, name: str = "") -> Site:
    """The `Site` of a value: where it is and, for a mapping or list, where each part is."""
    path = loc.path
    if isinstance(raw, _Map):
        keys = {k: _at(path, m) for k, m in raw.key_marks.items()}
        return Site(loc, keys, {k: _at(path, m) for k, m in raw.value_marks.items()}, name)
    if isinstance(raw, _Seq):
        return Site(loc, values={i: _at(path, m) for i, m in enumerate(raw.marks)}, name=name)
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


def _fields(raw: _Map, site: Site, errors: list[RuleError]) -> dict[str, Any]:
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
    if not isinstance(raw, _Map):
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
    if not isinstance(data, _Map) or not {"rules", "preflight"} & set(data):
        return [], [RuleError("a rule file is a mapping with a list under 'rules:'", _start(data, RuleLocation(path)))]
    # `preflight:` holds checks run before a launch (classify/preflight.py loads them)
    errors = [RuleError(f"unknown key '{key}' (a rule file holds 'rules:' and 'preflight:')", _at(path, data.key_marks[key]))
              for key in data if key not in ("rules", "preflight")]  # fmt: skip
    items = data.get("rules")
    if items is None:
        return [], errors
    if not isinstance(items, _Seq):
        return [], [*errors, RuleError("'rules' needs a list of rules", _at(path, data.value_marks["rules"]))]
    rules = [compile_rule(item, _at(path, mark), errors) for item, mark in zip(items, items.marks, strict=True)]
    return [rule for rule in rules if rule is not None], errors


def _start(data: Any, where: RuleLocation) -> RuleLocation:
    return _at(where.path, data.start) if isinstance(data, (_Map, _Seq)) else where


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
