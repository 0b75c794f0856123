"""When the watch loop ticks: on its cadence, or just past a learned budget's end when that comes first."""

from __future__ import annotations

import pytest

from hangwatch.cli.session import next_wait


@pytest.mark.parametrize(("observed", "until_budget_end", "expected"), [
    (10.3, None, 0.7),    # no budget: the rest of the interval
    (10.3, 5.0, 0.7),     # the budget ends after the next tick: keep the cadence
    (10.3, 0.4, 0.45),    # it ends before the next tick: tick just past it
    (10.3, 0.0, 0.05),    # it ends now
    (10.3, -3.0, 0.7),    # it ended ticks ago (already decided, or held): the cadence, no busy loop
    (10.98, None, 0.05),  # never sleep less than 50 ms
])  # fmt: skip
def test_next_wait(observed: float, until_budget_end: float | None, expected: float) -> None:
    assert next_wait(1.0, observed, until_budget_end) == pytest.approx(expected)
