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
    {"hangwatch._version", "hangwatch.model", "hangwatch.errors", "hangwatch.redact", "hangwatch.userfile"},
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
    assert len(plain) <= 7, plain


def test_version_comes_from_package_metadata() -> None:
    from importlib import metadata

    assert hangwatch.__version__ == metadata.version("hangwatch")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_names(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update(t.id for t in targets if isinstance(t, ast.Name))
            found.update(t.attr for t in targets if isinstance(t, ast.Attribute))
    return found


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def borrowed_private_names(sources: dict[str, str]) -> list[str]:
    """`module: name` for each private name a module takes from another: imported by name, or read
    as an attribute (`nvml._call(...)`) of something other than `self`/`cls` when only another
    module defines it. A private module (`_version`) is open to its own package."""
    trees = {name: ast.parse(text) for name, text in sources.items()}
    defined = {name: _defined_names(tree) for name, tree in trees.items()}
    found = []
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hangwatch"):
                found += [f"{module}: {a.name} from {node.module}" for a in node.names if _private(a.name)]
                parts = (node.module or "").split(".")
                found += [f"{module}: module {node.module}" for i, part in enumerate(parts)
                          if _private(part) and not _inside(module, ".".join(parts[:i]))]
            elif (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                  and node.value.id not in ("self", "cls") and node.attr not in defined[module]
                  and any(node.attr in names for other, names in defined.items() if other != module)):
                found.append(f"{module}: {node.value.id}.{node.attr}")
    return found


def test_the_private_name_finder_finds_borrowing() -> None:
    sources = {"hangwatch.a": "def _helper(): pass\nclass Nvml:\n    def _call(self): pass\n",
               "hangwatch.b": "from hangwatch.a import _helper\nnvml.call()\nnvml._call()\nos._exit(0)\n",
               "hangwatch.x._y": "V = 1\n", "hangwatch.x.z": "from hangwatch.x._y import V\n",
               "hangwatch.w": "from hangwatch.x._y import V\n"}
    assert borrowed_private_names(sources) == [
        "hangwatch.b: _helper from hangwatch.a", "hangwatch.b: nvml._call", "hangwatch.w: module hangwatch.x._y"]


def test_no_module_borrows_another_modules_private_names() -> None:
    sources = {_module_name(p): p.read_text() for p in ROOT.rglob("*.py")}
    assert borrowed_private_names(sources) == []



def test_the_classifier_reads_no_files_of_its_own() -> None:
    """classify/ is pure: it never imports the bundle reader or the live sources; whoever runs it
    (the CLI, the watcher, the rule-test runner's caller) reads the evidence and passes it in."""
    graph = _graph()
    reaching = sorted(f"{m} -> {d}" for m, deps in graph.items() if m.startswith("hangwatch.classify")
                      for d in deps if d.startswith(("hangwatch.bundle", "hangwatch.sources")))
    assert reaching == []
