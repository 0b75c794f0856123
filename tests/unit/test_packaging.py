"""Every data file the package reads ships in the wheel: a file under hangwatch/ that no
package-data pattern names would be missing from `pip install hangwatch` (a non-editable
install, the container image) while every editable checkout still finds it."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import hangwatch

if sys.version_info >= (3, 11):
    import tomllib
else:  # the dev extra installs tomli there (pyproject.toml)
    import tomli as tomllib

PACKAGE = Path(hangwatch.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"


def test_every_data_file_is_package_data() -> None:
    patterns = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-data"]["hangwatch"]
    shipped = {p for pattern in patterns for p in PACKAGE.glob(pattern)}  # setuptools globs recursively too
    data = {p for p in PACKAGE.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts}
    assert data and sorted(str(p.relative_to(PACKAGE)) for p in data - shipped) == []


def test_the_package_says_it_is_typed() -> None:
    """PEP 561: a checker uses hangwatch's own annotations only if `py.typed` ships beside them."""
    patterns = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-data"]["hangwatch"]
    assert (PACKAGE / "py.typed").is_file() and "py.typed" in patterns


def test_requires_python_is_the_version_the_code_is_written_for() -> None:
    """The oldest Python pyproject admits is the one ruff and mypy check against, and every module of
    the package, its tests, benches, lab and tools parses as that Python's grammar (3.11 syntax such
    as `except*` would be a SyntaxError there)."""
    config = tomllib.loads(PYPROJECT.read_text())
    match = re.fullmatch(r">=\s*3\.(\d+)", config["project"]["requires-python"])
    assert match, config["project"]["requires-python"]
    minor = int(match.group(1))
    assert config["tool"]["ruff"]["target-version"] == f"py3{minor}"
    assert config["tool"]["mypy"]["python_version"] == f"3.{minor}"
    root = PYPROJECT.parent
    too_new = []
    for folder in ("hangwatch", "tests", "bench", "lab", "tools"):
        for path in sorted((root / folder).rglob("*.py")):
            try:
                ast.parse(path.read_text(encoding="utf-8"), feature_version=(3, minor))
            except SyntaxError as exc:
                too_new.append(f"{path.relative_to(root)}:{exc.lineno}: {exc.msg}")
    assert too_new == []
