"""Mine the engines' own words: every `raise X(...)` / `assert ..., msg` site and every
`logger.<level>(...)` format in the pure-Python sources of SGLang, vLLM and the layers they call at
start-up, across pinned releases, into one compact, deterministic index (package data).

    python tools/engine_words/mine.py fetch          # pip download the pinned artifacts, check sha256
    python tools/engine_words/mine.py build          # mine them into hangwatch/data/engine_words.json.gz
    python tools/engine_words/mine.py build --tree sglang=0.5.23=/path/to/site-packages/sglang --out X

Not part of the installed package: it runs here, on a developer's machine, and its output is data.
The template language it writes is read by hangwatch/parse/engine_words.py (docs/engine-words.md):
literal text with typed holes `{int:name}`, `{float:name}`, `{path:name}`, `{word:name}`, `{any:name}`;
literal braces are doubled.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import io
import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's hangwatch, as the tests import it
from hangwatch.parse.engine_words import FORMAT, anchor_index  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
INPUTS = HERE / "inputs.txt"
CACHE = ROOT / ".cache" / "engine_words"
OUT = ROOT / "hangwatch" / "data" / "engine_words.json.gz"
LEVELS = ("info", "warning", "error", "exception", "critical", "fatal", "warning_once", "info_once", "warn")
MAX_TEMPLATE = 400  # characters of one template: longer messages are matched on their head
SKIP_PARTS = {"tests", "test", "testing", "benchmarks", "examples", "_vendor"}
_PCT = re.compile(r"%(?:\((\w+)\))?[-+ #0]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?([diouxXeEfFgGcrsa%])")
_FMT = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
_WORD = re.compile(r"[A-Za-z]{3,}")
BLOCKS = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.ExceptHandler, ast.Match)


# ---------------------------------------------------------------- pinned inputs


@dataclass(frozen=True)
class Pin:
    package: str  # the distribution name on PyPI
    version: str
    artifact: str  # file name under .cache/engine_words/<package>/, or an absolute path already on disk
    sha256: str
    roots: tuple[str, ...]  # the source subtrees (inside the wheel) that are mined

    @property
    def name(self) -> str:
        """The index names a package by its import name (flashinfer-python -> flashinfer)."""
        return next(r for r in self.roots if not r.startswith("!")).split("/")[0]

    @property
    def path(self) -> Path:
        return Path(self.artifact) if self.artifact.startswith("/") else CACHE / self.package / self.artifact


def read_pins(path: Path = INPUTS) -> list[Pin]:
    pins = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) < 5:
            raise SystemExit(f"{path}:{number}: expected: package version artifact sha256 root...")
        pins.append(Pin(fields[0], fields[1], fields[2], fields[3], tuple(fields[4:])))
    return pins


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(pins: list[Pin]) -> None:
    for pin in pins:
        if not pin.path.exists():
            dest = CACHE / pin.package
            dest.mkdir(parents=True, exist_ok=True)
            cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                   f"{pin.package}=={pin.version}", "-d", str(dest)]  # fmt: skip
            subprocess.run(cmd, check=True, timeout=900)
        got = sha256(pin.path)
        if got != pin.sha256:
            raise SystemExit(f"{pin.path}: sha256 {got}, pinned {pin.sha256}")
        print(f"ok {pin.package} {pin.version}")


# ---------------------------------------------------------------- sources


def wheel_sources(pin: Pin) -> Iterator[tuple[str, bytes]]:
    with zipfile.ZipFile(pin.path) as wheel:
        for name in sorted(wheel.namelist()):
            if name.endswith(".py") and _wanted(name, pin.roots):
                yield name, wheel.read(name)


def tree_sources(package_dir: Path, roots: tuple[str, ...] = ()) -> Iterator[tuple[str, bytes]]:
    """An installed package's sources, under the same roots a pin of that package mines."""
    base = package_dir.parent
    for path in sorted(package_dir.rglob("*.py")):
        name = path.relative_to(base).as_posix()
        if _wanted(name, roots or (package_dir.name,)):
            yield name, path.read_bytes()


def _wanted(name: str, roots: tuple[str, ...]) -> bool:
    """Under one of the roots and under none of the `!prefix` exclusions; never a test module."""
    parts = name.split("/")
    if SKIP_PARTS & set(parts[:-1]) or parts[-1].startswith("test_"):
        return False
    if any(name.startswith(root[1:]) for root in roots if root.startswith("!")):
        return False
    return any(name == root or name.startswith(root.rstrip("/") + "/") for root in roots if not root.startswith("!"))


# ---------------------------------------------------------------- templates


def _esc(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _name_of(node: ast.AST) -> str:
    """A short name for a hole: the variable or attribute the message interpolates."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            return node.attr
        if isinstance(node, ast.Call):
            if node.args:
                node = node.args[0]
                continue
            return _name_of(node.func)
        if isinstance(node, (ast.BinOp,)):
            node = node.left
            continue
        if isinstance(node, ast.Subscript):
            node = node.value
            continue
        return "value"


_NUMERIC = re.compile(r"(?i)gib|gb\b|_gb|mib|bytes|mem|memory|size|ratio|fraction|util|_s$|seconds|timeout|num|count|len|tokens|blocks")
_INTEGER = re.compile(r"(?i)port|rank|world|tp_|_tp|pp_|_pp|dp_|_dp|idx|index|_id$|^id$|device|gpu")
_PATHLIKE = re.compile(r"(?i)path|dir|file|folder")


def _hole(name: str, spec: str = "", conv: str = "") -> str:
    name = re.sub(r"\W", "", name)[:40] or "value"
    kind = "any"
    if spec[-1:] in ("d", "n") or conv in ("d", "i", "u"):
        kind = "int"
    elif spec[-1:] in ("f", "e", "g", "%") or conv in ("f", "e", "g", "F", "E", "G"):
        kind = "float"
    elif conv in ("x", "X", "o"):
        kind = "word"
    elif _INTEGER.search(name):
        kind = "int"
    elif _NUMERIC.search(name):
        kind = "float"
    elif _PATHLIKE.search(name):
        kind = "path"
    return "{%s:%s}" % (kind, name)


class Templater:
    """Turns a message expression into a template; `env` resolves a local name assigned once before."""

    def __init__(self, env: dict[str, ast.AST]):
        self.env = env

    def of(self, node: ast.AST, depth: int = 0) -> str:
        if depth > 3:
            return _hole(_name_of(node))
        if isinstance(node, ast.Constant):
            return _esc(node.value) if isinstance(node.value, str) else _hole("value")
        if isinstance(node, ast.JoinedStr):
            out = []
            for value in node.values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    out.append(_esc(value.value))
                elif (isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name)
                      and value.value.id in self.env and value.format_spec is None and value.conversion == -1):
                    out.append(self.of(value.value, depth + 1))  # f"{msg} more": msg's own text, then more
                elif isinstance(value, ast.FormattedValue):
                    spec = ""
                    if isinstance(value.format_spec, ast.JoinedStr):
                        spec = "".join(v.value for v in value.format_spec.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
                    out.append(_hole(_name_of(value.value), spec))
            return "".join(out)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.of(node.left, depth + 1) + self.of(node.right, depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and _literal(node.left) is not None:
            args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            return percent(str(_literal(node.left)), list(args))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
                and _literal(node.func.value) is not None):  # fmt: skip
            return braces(str(_literal(node.func.value)), list(node.args), {k.arg: k.value for k in node.keywords if k.arg})
        if isinstance(node, ast.Name) and node.id in self.env and self.env[node.id] is not node:
            return self.of(self.env[node.id], depth + 1)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str" and node.args:
            return _hole(_name_of(node.args[0]))
        return _hole(_name_of(node))


def _literal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left), _literal(node.right)
        return left + right if left is not None and right is not None else None
    return None


def percent(fmt: str, args: list[ast.AST]) -> str:
    out, pos, index = [], 0, 0
    for m in _PCT.finditer(fmt):
        out.append(_esc(fmt[pos:m.start()]))
        pos = m.end()
        if m.group(4) == "%":
            out.append("%")
            continue
        arg = args[index] if index < len(args) else None
        index += 1
        out.append(_hole(m.group(1) or (_name_of(arg) if arg is not None else "value"), "", m.group(4)))
    out.append(_esc(fmt[pos:]))
    return "".join(out)


def braces(fmt: str, args: list[ast.AST], kwargs: dict[str, ast.AST]) -> str:
    out, pos, index = [], 0, 0
    for m in _FMT.finditer(fmt):
        out.append(_esc(fmt[pos:m.start()]))
        pos = m.end()
        if m.group(0) in ("{{", "}}"):
            out.append(m.group(0))
            continue
        field, _, spec = (m.group(1) or "").partition(":")
        field = field.split("!")[0]
        if not field:
            arg = args[index] if index < len(args) else None
            index += 1
        elif field.isdigit():
            arg = args[int(field)] if int(field) < len(args) else None
        else:
            arg = kwargs.get(field.split(".")[0].split("[")[0])
        out.append(_hole(_name_of(arg) if arg is not None else field or "value", spec))
    out.append(_esc(fmt[pos:]))
    return "".join(out)


def _clip(template: str) -> str:
    """At most MAX_TEMPLATE characters, never cutting a hole or an escaped brace in half."""
    if len(template) <= MAX_TEMPLATE:
        return template
    cut = template[:MAX_TEMPLATE]
    opened = cut.rfind("{")
    if opened > cut.rfind("}"):
        cut = cut[:opened]
    while cut.endswith("{") or (cut.endswith("}") and not re.search(r"\{\w+:\w+\}$|\}\}$", cut)):
        cut = cut[:-1]
    return cut


def useful(template: str) -> bool:
    literal = re.sub(r"\{\w+:\w+\}", " ", template)
    return len(_WORD.findall(literal)) >= 2


# ---------------------------------------------------------------- the walk


@dataclass(frozen=True)
class Site:
    module: str  # "vllm/v1/worker/utils.py"
    function: str  # "Class.method", "function" or "<module>"
    line: int
    kind: str  # "raise" | "log"
    label: str  # the exception class, or the log level
    template: str


def _exc_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_logger(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return "log" in node.id.lower()
    if isinstance(node, ast.Attribute):
        return "log" in node.attr.lower()
    return False


_SEEN: dict[tuple[str, str], list[Site]] = {}


def sites_of(module: str, source: bytes) -> list[Site]:
    """The sites of one module; a file unchanged between releases is parsed once."""
    key = (module, hashlib.sha1(source).hexdigest())
    if key not in _SEEN:
        _SEEN[key] = _sites_of(module, source)
    return _SEEN[key]


def _sites_of(module: str, source: bytes) -> list[Site]:
    try:
        tree = ast.parse(source, filename=module)
    except (SyntaxError, ValueError):
        return []
    out: list[Site] = []

    def walk(node: ast.AST, scope: str, env: dict[str, ast.AST]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                walk(child, f"{scope}.{child.name}" if scope and not scope.startswith("<") else child.name, {})
                continue
            if isinstance(child, ast.ClassDef):
                walk(child, child.name, {})
                continue
            if isinstance(child, ast.Assign) and len(child.targets) == 1 and isinstance(child.targets[0], ast.Name):
                env[child.targets[0].id] = child.value
            elif isinstance(child, ast.AugAssign) and isinstance(child.target, ast.Name) and isinstance(child.op, ast.Add):
                name = child.target.id  # msg += "...": the text so far, then the rest
                env[name] = ast.BinOp(env.get(name, ast.Name(id=name)), ast.Add(), child.value)
            emit(child, scope or "<module>", env)
            if not isinstance(child, BLOCKS):
                walk(child, scope, env)
                continue
            # a block's assignments stay in it; after it, a name the block changed may hold either
            # text: `msg += "..."` keeps what every path has and a hole after it, anything else is a hole
            inner = dict(env)
            walk(child, scope, inner)
            for name, value in env.items():
                changed = inner.get(name)
                if changed is None or changed is value:
                    continue
                grew = isinstance(changed, ast.BinOp) and isinstance(changed.op, ast.Add) and changed.left is value
                env[name] = ast.BinOp(value, ast.Add(), ast.Name(id="more")) if grew else ast.Name(id=name)

    def emit(node: ast.AST, scope: str, env: dict[str, ast.AST]) -> None:
        templater = Templater(dict(env))
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            name = _exc_name(node.exc)
            msg = node.exc.args[0] if node.exc.args else next((k.value for k in node.exc.keywords if k.arg in ("msg", "message")), None)
            if name and msg is not None:
                add(scope, node.lineno, "raise", name, templater.of(msg))
        elif isinstance(node, ast.Assert) and node.msg is not None:
            add(scope, node.lineno, "raise", "AssertionError", templater.of(node.msg))
        elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute)
              and node.value.func.attr in LEVELS and _is_logger(node.value.func.value) and node.value.args):  # fmt: skip
            call = node.value
            first, rest = call.args[0], list(call.args[1:])
            lit = _literal(first)
            template = percent(lit, rest) if lit is not None and rest else templater.of(first)
            level = {"warning_once": "warning", "info_once": "info", "warn": "warning", "fatal": "critical"}.get(
                call.func.attr, call.func.attr  # type: ignore[union-attr]
            )
            add(scope, node.lineno, "log", level, template)

    def add(scope: str, line: int, kind: str, label: str, template: str) -> None:
        template = _clip(" ".join(template.split()) if "\n" in template else template)
        if useful(template):
            out.append(Site(module, scope, line, kind, label, template))

    walk(tree, "", {})
    return out


# ---------------------------------------------------------------- the index


def build(sources: list[tuple[str, str, Iterator[tuple[str, bytes]]]]) -> bytes:
    """sources: (package, version, (module path, bytes)...) -> the gzip'd JSON index, deterministic."""
    versions: dict[str, list[str]] = {}
    for package, version, _ in sources:
        versions.setdefault(package, [])
        if version not in versions[package]:
            versions[package].append(version)
    for package in versions:
        versions[package].sort(key=Version)
    merged: dict[tuple[str, str, str, str, str, str], list[int]] = {}  # key -> [mask, line, newest index]
    for package, version, files in sources:
        bit = versions[package].index(version)
        print(f"mining {package} {version}", file=sys.stderr, flush=True)
        for module, data in files:
            for site in sites_of(module, data):
                key = (package, site.module, site.function, site.kind, site.label, site.template)
                slot = merged.setdefault(key, [0, site.line, -1])
                slot[0] |= 1 << bit
                if bit > slot[2] or (bit == slot[2] and site.line < slot[1]):
                    slot[1], slot[2] = site.line, bit
    rows = [[*key[:3], merged[key][1], *key[3:], merged[key][0]] for key in sorted(merged)]
    # the anchor index precompiled: loading it is a dict, building it at every process's first failure took 1-2 s
    doc = {"format": FORMAT, "generator": "tools/engine_words/mine.py", "versions": versions, "sites": rows,
           "anchors": anchor_index(rows)}
    return encode(doc)


def encode(doc: dict[str, object]) -> bytes:
    """The index's bytes: compact JSON, sorted keys, gzip without a name or time (deterministic)."""
    raw = json.dumps(doc, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(raw)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("fetch", "build"))
    parser.add_argument("--inputs", type=Path, default=INPUTS)
    parser.add_argument("--tree", action="append", default=[], help="package=version=DIR: mine a source tree instead of the pins")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.command == "fetch":
        fetch(read_pins(args.inputs))
        return 0
    sources: list[tuple[str, str, Iterator[tuple[str, bytes]]]] = []
    if args.tree:
        for spec in args.tree:
            package, version, directory = spec.split("=", 2)
            roots = next((pin.roots for pin in read_pins(args.inputs) if pin.name == package), ())
            sources.append((package, version, tree_sources(Path(directory), roots)))
    else:
        for pin in read_pins(args.inputs):
            if sha256(pin.path) != pin.sha256:
                raise SystemExit(f"{pin.path}: sha256 differs from {args.inputs}; run `fetch`")
            sources.append((pin.name, pin.version, wheel_sources(pin)))
    data = build(sources)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    doc = json.loads(gzip.decompress(data))
    print(f"{args.out}: {len(doc['sites'])} sites, {len(data)} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
