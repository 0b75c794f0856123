"""Fixtures shared by the unit and integration suites: real process trees and hand-built verdicts.

Helpers live in tests/helpers/ and are imported as `helpers.*` (pyproject.toml puts tests/ on the
path for pytest; no test edits sys.path)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hangwatch.model import Verdict
from hangwatch.watch.published import StaticView
from helpers.liveprocs import Spawner
from helpers.serve_fixtures import make_verdict, make_view


@pytest.fixture
def spawner() -> Iterator[Spawner]:
    """Starts real processes for a test and kills their whole process groups after it."""
    spawner = Spawner()
    yield spawner
    spawner.stop()


@pytest.fixture
def stalled() -> Verdict:
    return make_verdict()


@pytest.fixture
def view(stalled: Verdict) -> StaticView:
    return make_view(stalled)
