"""The package's layout is its architecture: layers import one way, and nothing imports in a cycle.

Every import counts, also one inside a function or under `TYPE_CHECKING`: a cycle hidden in a
function is still a cycle a newcomer has to untangle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import hangwatch

ROOT = Path(hangwatch.__file__).parent
# Lower layers first; a module may import its own layer or any lower one.
LAYERS = [
    {"hangwatch._version", "hangwatch.model", "hangwatch.errors", "hangwatch.redact"},
    {"hangwatch.engines"},
    {"hangwatch.parse"},
    {"hangwatch.sources", "hangwatch.bundle", "hangwatch.classify"},
    {"hangwatch.watch"},
    {"hangwatch.sinks"},
    {"hangwatch.cli", "hangwatch.__main__", "hangwatch"},
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("hangwatch"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if not base.startswith("hangwatch"):
                continue
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if _exists(candidate) else base)
    return found


def _exists(module: str) -> bool:
    rel = Path(*module.split(".")[1:])
    return (ROOT / rel).with_suffix(".py").exists() or (ROOT / rel / "__init__.py").exists()


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    return {name: {d for d in _imports(p) if d in modules and d != name} for name, p in modules.items()}


def _layer(module: str) -> int:
    best = -1
    for index, layer in enumerate(LAYERS):
        for prefix in layer:
            if module == prefix or (prefix != "hangwatch" and module.startswith(prefix + ".")):
                best = index
    return best


def test_every_module_has_a_layer() -> None:
    assert [m for m in _graph() if _layer(m) < 0] == []


def test_imports_run_one_way() -> None:
    upward = [
        f"{m} -> {d}"
        for m, deps in _graph().items()
        for d in deps
        if _layer(d) > _layer(m)
    ]
    assert upward == []


def test_no_import_cycles() -> None:
    graph = _graph()
    edges = graph
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(edges[node]):
            if state.get(dep) == 1:
                cycles.append(path[path.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, path + [dep])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_few_plain_modules_at_the_top() -> None:
    plain = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(plain) <= 6, plain


def test_version_comes_from_package_metadata() -> None:
    from importlib import metadata

    assert hangwatch.__version__ == metadata.version("hangwatch")
