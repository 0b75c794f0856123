from __future__ import annotations

from typing import Iterator

import pytest
from liveprocs import Spawner


@pytest.fixture
def spawner() -> Iterator[Spawner]:
    spawner = Spawner()
    yield spawner
    spawner.stop()
