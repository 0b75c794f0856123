from collections.abc import Iterator

import pytest

from helpers.serve_support import Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rx = Receiver()
    yield rx
    rx.close()
