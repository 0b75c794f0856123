"""Fixtures shared by the unit and integration suites: real process trees and hand-built verdicts.

Helpers live in tests/helpers/ and are imported as `helpers.*` (pyproject.toml puts tests/ on the
path for pytest; no test edits sys.path)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch.model import Verdict
from hangwatch.watch.published import LatestView
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
def view(stalled: Verdict) -> LatestView:
    return make_view(stalled)


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test (and every hangwatch it starts) keeps past starts in its own folder: a start
    learned in one test must not shorten the budgets of the next (docs/live.md, learned budgets)."""
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """CI runs the tests not marked `lab` while the labs install (.ci/run): a test that skips without
    a lab but is not marked would be skipped there and deselected after, so it never ran. Refuse it."""
    for item in items:
        skip_reasons = " ".join(str(mark.kwargs.get("reason", "")) for mark in item.iter_markers("skipif"))
        skips_without_a_lab = "HANGWATCH_LAB_PYTHON" in skip_reasons or "HANGWATCH_VLLM_PYTHON" in skip_reasons
        if skips_without_a_lab and item.get_closest_marker("lab") is None:
            raise pytest.UsageError(f"{item.nodeid} needs a lab: mark it `pytest.mark.lab`")
