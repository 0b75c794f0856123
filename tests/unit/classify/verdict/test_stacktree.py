"""All ranks' stacks merged into one tree (docs/live.md shape)."""

from __future__ import annotations

from hangwatch.classify.verdict.stacktree import merge_stacks
from hangwatch.model import Frame, Origin, ProcessStack, Source, ThreadStack

DIST = "torch/distributed/distributed_c10d.py"


def _f(name: str, file: str, line: int = 1, origin: Origin = Origin.ENGINE) -> Frame:
    return Frame(name.rsplit(".", 1)[-1], name, file, line, origin)


def _stack(label: str, pid: int, *frames: Frame) -> ProcessStack:
    return ProcessStack(label, pid, (ThreadStack("MainThread", pid, frames, False),), Source(f"stacks/{label}.json"))


def test_merged_tree_marks_ranks_per_frame_and_the_outlier() -> None:
    root, load, wait = _f("run_scheduler_process", "sglang/srt/managers/scheduler.py", 6362), \
        _f("load_weights", "sglang/loader.py", 10), _f("monitored_barrier", DIST, 5435)
    stacks = [_stack(f"TP{i}", 10 + i, wait, root) for i in range(3)] + [_stack("TP3", 13, load, root)]
    tree = merge_stacks(stacks)
    assert tree["frame"] == "<all>" and tree["ranks"] == ["TP0", "TP1", "TP2", "TP3"] and tree["outliers"] == ["TP3"]
    (top,) = tree["children"]
    assert top["frame"] == "run_scheduler_process (sglang/srt/managers/scheduler.py:6362)"
    assert top["ranks"] == ["TP0", "TP1", "TP2", "TP3"]
    assert {c["frame"]: c["ranks"] for c in top["children"]} == {
        "monitored_barrier (torch/distributed/distributed_c10d.py:5435)": ["TP0", "TP1", "TP2"],
        "load_weights (sglang/loader.py:10)": ["TP3"]}


def test_merged_tree_tie_is_broken_by_the_blocker() -> None:
    wait, load = _f("barrier", DIST), _f("load", "l.py")
    stacks = [_stack("TP0", 10, wait), _stack("TP1", 11, load)]
    assert merge_stacks(stacks)["outliers"] == ["TP1"]
    assert merge_stacks(stacks, prefer_outliers=["TP0"])["outliers"] == ["TP0"]


def test_a_blocker_named_by_pid_or_not_in_the_tree_breaks_ties_without_failing() -> None:
    wait, load = _f("barrier", DIST), _f("load", "l.py")
    stacks = [_stack("1524", 1524, wait), _stack("1525", 1525, load)]
    assert merge_stacks(stacks, prefer_outliers=["pid 1524"])["outliers"] == ["1524"]
    assert merge_stacks(stacks, prefer_outliers=["TP7"])["outliers"] == ["1525"]


def test_a_blocker_without_a_stack_here_does_not_break_the_tie() -> None:
    # the final blocker may be a process whose stack was not sampled ("pid 5122"): a live agent died on it
    wait, load = _f("barrier", DIST), _f("load", "l.py")
    stacks = [_stack("TP0", 10, wait), _stack("TP1", 11, load)]
    assert merge_stacks(stacks, prefer_outliers=["pid 5122"])["outliers"] == ["TP1"]
