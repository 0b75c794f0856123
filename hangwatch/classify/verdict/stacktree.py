"""All ranks' stacks merged into one tree, marking which ranks reached each frame (as LLNL's STAT).

    tree = merge_stacks(latest_stacks)          # pure: ProcessStacks in, plain JSON-able dict out
    {"frame": "<all>", "ranks": ["TP0", "TP1"], "outliers": ["TP1"], "children": [
        {"frame": "run_scheduler_process (sglang/srt/managers/scheduler.py:6362)", "ranks": ["TP0", "TP1"],
         "children": [...]}]}

One path per rank: the main thread's frames from the outermost (root) to the innermost (leaf).
Ranks that ran the same code share a branch until they part; the rank whose leaf differs from
the rest (the one still loading while the others wait in a barrier) is an *outlier*. With eight
ranks in `barrier` and one in `load_weights`, the outlier is the one to look at.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hangwatch.classify.verdict.context import label_order
from hangwatch.model import ProcessStack

__all__ = ["ROOT", "merge_stacks", "rank_paths", "outliers"]

ROOT = "<all>"


def rank_paths(stacks: Iterable[ProcessStack]) -> dict[str, tuple[str, ...]]:
    """Label -> its main thread's frames, root first. Native dumps and empty stacks are skipped;
    with ranked processes among them, only those (a detokenizer is not a peer of TP0)."""
    latest: dict[str, ProcessStack] = {}
    for stack in stacks:
        if stack.native:
            continue
        known = latest.get(stack.label)
        if known is None or stack.sample >= known.sample:
            latest[stack.label] = stack
    paths = {label: _path(stack) for label, stack in latest.items()}
    paths = {label: path for label, path in paths.items() if path}
    ranked = {label: path for label, path in paths.items() if not label.isdigit()}
    return ranked or paths


def _path(stack: ProcessStack) -> tuple[str, ...]:
    main = stack.main
    if main is None:
        return ()
    return tuple(frame.display for frame in reversed(main.frames))


def outliers(paths: Mapping[str, Sequence[str]], prefer: Sequence[str] = ()) -> list[str]:
    """Ranks outside the largest group of identical stacks. A tie (one rank loading, one waiting)
    is broken by `prefer` (the final blocker, when known): it is the outlier; else the group of
    the first rank in label order is taken as the crowd."""
    if len(paths) < 2:
        return []
    groups = Counter(tuple(path) for path in paths.values())
    if len(groups) == 1:
        return []
    top = max(groups.values())
    crowds = [path for path, n in groups.items() if n == top]
    # the watch names a rankless process by its pid ("1524"), the wait-for graph as "pid 1524"
    wanted = {label.removeprefix("pid ") for label in prefer} | set(prefer)
    crowd = _pick_crowd(crowds, paths, wanted & set(paths))
    return sorted((label for label, path in paths.items() if tuple(path) != crowd), key=label_order)


def _pick_crowd(crowds: list[tuple[str, ...]], paths: Mapping[str, Sequence[str]], prefer: set[str]) -> tuple[str, ...]:
    if len(crowds) > 1 and prefer:
        others = [path for path in crowds if not any(tuple(paths[label]) == path for label in prefer)]
        if others:
            crowds = others
    first = {path: min((label for label, p in paths.items() if tuple(p) == path), key=label_order) for path in crowds}
    return min(crowds, key=lambda path: label_order(first[path]))


def merge_stacks(stacks: Iterable[ProcessStack], prefer_outliers: Sequence[str] = ()) -> dict[str, Any]:
    """The merged tree of every rank's latest main-thread stack (see the module doc for the shape)."""
    paths = rank_paths(stacks)
    ranks = sorted(paths, key=label_order)
    root: dict[str, Any] = {"frame": ROOT, "ranks": ranks, "outliers": outliers(paths, prefer_outliers), "children": []}
    for label in ranks:
        node = root
        for frame in paths[label]:
            node = _child(node, frame)
            node["ranks"].append(label)
    return root


def _child(node: dict[str, Any], frame: str) -> dict[str, Any]:
    child: dict[str, Any]
    for child in node["children"]:
        if child["frame"] == frame:
            return child
    child = {"frame": frame, "ranks": [], "children": []}
    node["children"].append(child)
    return child
