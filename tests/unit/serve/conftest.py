import pytest
from serve_fixtures import make_verdict, make_view

from hangwatch.model import Verdict
from hangwatch.watch.published import StaticView


@pytest.fixture
def stalled() -> Verdict:
    return make_verdict()


@pytest.fixture
def view(stalled: Verdict) -> StaticView:
    return make_view(stalled)
