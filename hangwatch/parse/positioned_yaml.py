"""YAML that remembers where each key and value starts: rule files and the data tables beside them.

pySigma leaves `line` empty; we take it from each node's `start_mark`, so every error reads
`file:line:column: reason`. Duplicate keys are refused; aliases may not expand a document past
MAX_YAML_NODES nor nest it past MAX_YAML_DEPTH.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from hangwatch.errors import RuleError, RuleLocation

__all__ = ["MAX_YAML_DEPTH", "MAX_YAML_NODES", "PositionedList", "PositionedMap", "RuleYamlLoader", "location",
           "parse_yaml", "read_table"]


class PositionedMap(dict):  # type: ignore[type-arg]
    """A mapping that remembers where each key and each value starts."""

    start: yaml.Mark
    key_marks: dict[Any, yaml.Mark]
    value_marks: dict[Any, yaml.Mark]


class PositionedList(list):  # type: ignore[type-arg]
    start: yaml.Mark
    marks: list[yaml.Mark]


class RuleYamlLoader(yaml.SafeLoader):
    path = "?"

    def at(self, mark: yaml.Mark) -> RuleLocation:
        return location(self.path, mark)


def location(path: str, mark: yaml.Mark) -> RuleLocation:
    return RuleLocation(path, mark.line + 1, mark.column + 1)


def _construct_map(loader: RuleYamlLoader, node: yaml.MappingNode) -> PositionedMap:
    loader.flatten_mapping(node)
    data = PositionedMap()
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


def _construct_seq(loader: RuleYamlLoader, node: yaml.SequenceNode) -> PositionedList:
    data = PositionedList(loader.construct_object(child, deep=True) for child in node.value)
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
        where = location(path, mark) if mark else RuleLocation(path)
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
