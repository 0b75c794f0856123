"""Every data file the package reads ships in the wheel: a file under hangwatch/ that no
package-data pattern names would be missing from `pip install hangwatch` (a non-editable
install, the container image) while every editable checkout still finds it."""

from __future__ import annotations

from pathlib import Path

import tomllib

import hangwatch

PACKAGE = Path(hangwatch.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"


def test_every_data_file_is_package_data() -> None:
    patterns = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-data"]["hangwatch"]
    shipped = {p for pattern in patterns for p in PACKAGE.glob(pattern)}  # setuptools globs recursively too
    data = {p for p in PACKAGE.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts}
    assert data and sorted(str(p.relative_to(PACKAGE)) for p in data - shipped) == []
