"""lab/expected.py: the right verdict of every lab scenario, in the words hangwatch uses."""

from __future__ import annotations

from hangwatch.classify.causes import CATALOGUE
from hangwatch.model import State
from lab.expected import EXPECTED, is_right
from lab.scenarios import SCENARIOS


def test_every_lab_scenario_has_its_right_verdict() -> None:
    assert set(EXPECTED) == set(SCENARIOS)


def test_the_right_verdicts_are_states_and_causes_hangwatch_has() -> None:
    causes = {cause.id for cause in CATALOGUE}
    states = {state.value for state in State}
    for name, want in EXPECTED.items():
        assert set(want.states) <= states, name
        assert want.cause is None or want.cause in causes, name
        # a start that recovers is right only once ready; a hang never is
        assert want.recovers == (want.states == ("ready",)), name


def test_a_verdict_is_right_only_in_an_accepted_state_with_the_cause() -> None:
    assert is_right("weights-fifo", {"state": "stalled", "cause": "weight_loading_io"})
    assert not is_right("weights-fifo", {"state": "stalled", "cause": "unknown"})
    assert not is_right("weights-fifo", {"state": "starting", "cause": "weight_loading_io"})
    assert is_right("healthy", {"state": "ready", "cause": None})
