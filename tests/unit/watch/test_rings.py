"""Bounded buffers of the watch loop (hangwatch/watch/rings.py) and its timeline view."""

from __future__ import annotations

from hangwatch.model import Phase, PhaseEvent, ProcessStack, Source, State, Verdict
from hangwatch.parse.logs import read_log_lines
from hangwatch.watch.capture import timeline_json
from hangwatch.watch.rings import LogRing, StackRing, TimedPhase, VerdictChanges


def _log(**kwargs: int) -> LogRing:
    return LogRing(read_log_lines, **kwargs)


def test_lines_are_numbered_across_feeds() -> None:
    log = _log()
    log.feed(b"a\nb\n")
    lines = log.feed(b"c\n")
    assert [(line.lineno, line.text) for line in lines] == [(3, "c")]


def test_an_unterminated_line_waits_for_its_end() -> None:
    log = _log()
    assert log.feed(b"Loading 1/8\rLoading 2/8") == []
    assert [line.text for line in log.partial()] == ["Loading 2/8"]
    assert [line.text for line in log.feed(b"\rLoading 8/8\n")] == ["Loading 8/8"]


def test_lines_are_bounded() -> None:
    log = _log(max_lines=100)
    for n in range(1000):
        log.feed(f"line {n}\n".encode())
    assert len(log.lines) == 100 and log.lines[-1].text == "line 999" and log.next_lineno == 1001


def test_raw_tail_keeps_the_last_bytes() -> None:
    log = _log(raw_tail_bytes=1000)
    for _ in range(100):
        log.feed(b"x" * 99 + b"\n")
    tail = log.raw_tail()
    assert len(tail) == 1000 and tail.endswith(b"x\n")


def test_stack_history_keeps_three_samples_per_label() -> None:
    history = StackRing(per_label=3)
    for n in range(5):
        stored = history.add(ProcessStack("TP0", 1, (), Source("stacks/TP0.json")), b"[]", float(n))
    assert stored.sample == 4 and stored.t == 4.0
    assert [s.stack.sample for s in history.all()] == [2, 3, 4]


def test_transitions_record_changes_only() -> None:
    transitions = VerdictChanges()
    starting, stalled = Verdict(State.STARTING, None, 0.5), Verdict(State.STALLED, "nccl_init", 0.8)
    assert transitions.offer(0.0, 0.0, starting)
    assert not transitions.offer(1.0, 1.0, starting)
    assert transitions.offer(2.0, 2.0, stalled)
    assert [t.verdict.state for t in transitions.items()] == [State.STARTING, State.STALLED]


def test_timeline_closes_a_phase_at_its_end_or_the_next_begin() -> None:
    def ev(phase: Phase, t: float, end: bool = False) -> TimedPhase:
        return TimedPhase(t, PhaseEvent(phase, "TP0", int(t), "x", end=end))

    rows = timeline_json([ev(Phase.DIST_INIT, 1), ev(Phase.DIST_INIT, 2, end=True), ev(Phase.WEIGHT_LOAD, 3), ev(Phase.KV_CACHE, 7)])
    assert [(r["phase"], r["at"], r["end"]) for r in rows["TP0"]] == [
        ("dist_init", 1, 2), ("weight_load", 3, 7), ("kv_cache", 7, None)]
