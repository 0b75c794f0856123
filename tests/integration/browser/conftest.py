"""Fixtures for the page tests: a real headless Chromium, and processes killed by group afterwards.

Skipped where Debian's chromium and chromedriver are not installed (.ci/run installs them).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.chrome import Browser, chromium_paths
from helpers.pageprocs import Procs


@pytest.fixture
def browser() -> Iterator[Browser]:
    if chromium_paths() is None:
        pytest.skip("chromium/chromedriver not installed (apt-get install chromium chromium-driver)")
    b = Browser()
    try:
        yield b
    finally:
        b.close()



@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    p = Procs(tmp_path)
    try:
        yield p
    finally:
        p.stop()

