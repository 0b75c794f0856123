"""Fixtures shared by the unit and integration suites: real process trees and hand-built verdicts.

Helpers live in tests/helpers/ and are imported as `helpers.*` (pyproject.toml puts tests/ on the
path for pytest; no test edits sys.path)."""

from __future__ import annotations

import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _pytest.nodeid import coerce_node_id

from hangwatch.model import Verdict
from hangwatch.watch.published import LatestView
from helpers.labrun import HeldScenarios, held_groups
from helpers.liveprocs import Spawner
from helpers.serve_fixtures import make_verdict, make_view


def pytest_configure(config: pytest.Config) -> None:
    """Started in the background of a script (`pytest ... &`), the session inherits SIGINT ignored,
    and so would every process the tests start: a Ctrl-C test would then test the shell, not
    hangwatch. A handler here is reset to the default in each child at exec."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temp dir with a short path, for a server that puts unix sockets in its TMPDIR: vLLM's ZMQ IPC
    paths (a uuid under it) must fit 107 bytes, and under pytest-xdist tmp_path is 10 longer
    (`popen-gwN/`): the vLLM TP=2 start failed on it."""
    path = Path(tempfile.mkdtemp(prefix="hw-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def _held_lab_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeldScenarios]:
    held = HeldScenarios(tmp_path_factory.mktemp("held-lab"))
    try:
        yield held
    finally:
        held.close()


@pytest.fixture
def held_lab(request: pytest.FixtureRequest, _held_lab_runs: HeldScenarios) -> Iterator[HeldScenarios]:
    """Lab scenarios that hang for good, started once for every test that watches them (the test is
    marked `xdist_group("lab-held-SCENARIO")`); each is stopped after the last test that asks for it."""
    yield _held_lab_runs
    items = request.session.items
    _held_lab_runs.release(held_groups(items[items.index(request.node) + 1:]))


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test (and every hangwatch it starts) keeps past starts in its own folder: a start
    learned in one test must not shorten the budgets of the next (docs/live.md, learned budgets)."""
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


@pytest.hookimpl(tryfirst=True)  # before `-m` selects: it reads the `integration` mark given here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """CI runs the tests marked neither `lab` nor `integration` while the labs install (.ci/run), then
    the others: a test that skips without a lab but is not marked would be skipped there and
    deselected after, so it never ran. Refuse it. Every test under tests/integration is marked
    `integration`. The `lab` tests go first: each takes minutes, so that under xdist the short
    tests fill the workers around them instead of a lab test starting last; among them the vLLM starts
    (60-150 s each, the longest) before SGLang's, so the last ones to run are short (the longest first
    ends the run sooner: CI's lab part ran 3 minutes at 12-36 % idle with the vLLM tests last)."""
    integration = Path(__file__).parent / "integration"
    for item in items:
        skip_reasons = " ".join(str(mark.kwargs.get("reason", "")) for mark in item.iter_markers("skipif"))
        skips_without_a_lab = "HANGWATCH_LAB_PYTHON" in skip_reasons or "HANGWATCH_VLLM_PYTHON" in skip_reasons
        if skips_without_a_lab and item.get_closest_marker("lab") is None:
            raise pytest.UsageError(f"{item.nodeid} needs a lab: mark it `pytest.mark.lab`")
        if item.path.is_relative_to(integration):
            item.add_marker(pytest.mark.integration)
    items.sort(key=_run_order)
    if getattr(config.option, "loadgroup", False):  # an xdist worker under --dist loadgroup
        _group_node_ids(items)


def _run_order(item: pytest.Item) -> tuple[bool, bool]:
    lab = item.get_closest_marker("lab") is not None
    return not lab, not (lab and "vllm" in item.nodeid.lower())


def _group_node_ids(items: list[pytest.Item]) -> None:
    """Suffix each test marked `xdist_group(NAME)` with `@NAME`, the scope `--dist loadgroup` sends to
    one worker. pytest-xdist 3.8's worker is meant to do it, but it sets `_nodeid`, which pytest 9.2
    no longer reads (a node's id is `_id`, a NodeId): the tests of one group ran on different workers,
    each starting its own held lab run. The check: `pytest -n 3 --dist loadgroup -v` shows `@GROUP`."""
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")})
        if names and "@" not in item.nodeid.rsplit("]", 1)[-1]:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(names)}")
