"""The watch loop stays a path through small parts (issue 22): the loop's module short, no class a room of its own."""

from __future__ import annotations

import ast
from pathlib import Path

WATCH = Path(__file__).parents[3] / "hangwatch" / "watch"
MAX_WATCHER_LINES = 250
MAX_METHODS = 20


def methods_per_class(source: str) -> dict[str, int]:
    """Class name -> functions defined in its body (properties and static methods count)."""
    tree = ast.parse(source)
    return {node.name: sum(isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) for item in node.body)
            for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}


def test_the_counter_counts_methods_properties_and_nested_classes() -> None:
    source = "class A:\n    def a(self): ...\n    @property\n    def b(self): ...\n    class B:\n        async def c(self): ...\n"
    assert methods_per_class(source) == {"A": 2, "B": 1}


def test_watcher_py_is_at_most_250_lines() -> None:
    lines = len((WATCH / "watcher.py").read_text().splitlines())
    assert lines <= MAX_WATCHER_LINES, f"watch/watcher.py has {lines} lines: move a step into its own object"


def test_no_class_under_watch_has_more_than_20_methods() -> None:
    crowded = {f"{path.name}:{name}": count for path in sorted(WATCH.rglob("*.py"))
               for name, count in methods_per_class(path.read_text()).items() if count > MAX_METHODS}
    assert not crowded, f"classes with more than {MAX_METHODS} methods: {crowded}"
