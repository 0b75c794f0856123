import pytest
from serve_support import Receiver, make_verdict, make_view

from hangwatch.model import Verdict
from hangwatch.watch.published import StaticView


@pytest.fixture
def stalled() -> Verdict:
    return make_verdict()


@pytest.fixture
def view(stalled: Verdict) -> StaticView:
    return make_view(stalled)


@pytest.fixture
def receiver():
    rx = Receiver()
    yield rx
    rx.close()
