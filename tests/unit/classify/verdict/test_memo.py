"""The classifier is pure: a `ScanMemo` (the watcher's, one per server) only saves work, and
without one nothing outlives a call (issue 8)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import hangwatch
from hangwatch.bundle import read_bundle
from hangwatch.classify import ScanMemo, classify, load_rules
from hangwatch.model import Evidence, Verdict
from hangwatch.parse.logs import read_log_lines
from helpers.paths import DEV_CORPUS

RULES = load_rules()
PACKAGE = Path(hangwatch.__file__).parent

CRASH = (b"[2026-12-01 00:00:00 TP0] Init torch distributed begin.\n"
         b"Traceback (most recent call last):\n"
         b'  File "/x/site-packages/sglang/srt/managers/scheduler.py", line 10, in run_scheduler_process\n'
         b"RuntimeError: CUDA error: out of memory\n")  # fmt: skip
STUCK = b"[2026-12-01 00:00:00 TP0] Init torch distributed begin.\n[2026-12-01 00:00:01 TP0] Load weight begin.\n" * 40


def _evidence() -> list[Evidence]:
    found = [Evidence(log=read_log_lines(CRASH), since_last_progress_s=900.0),
             Evidence(log=read_log_lines(STUCK), since_last_progress_s=900.0)]  # fmt: skip
    if DEV_CORPUS.is_dir():
        found += [read_bundle(case) for case in sorted(DEV_CORPUS.iterdir()) if (case / "server.log").is_file()][:6]
    return found


def _same(a: Verdict, b: Verdict) -> bool:
    return dataclasses.asdict(a) == dataclasses.asdict(b)


def test_two_memos_and_none_give_the_same_verdicts() -> None:
    cases = _evidence()
    fresh = [classify(ev, RULES) for ev in cases]
    one, two = ScanMemo(), ScanMemo()
    for ev, expected in zip(cases, fresh, strict=True):
        # `one` has seen this log grow to its end; `two` has seen only the other logs
        half = dataclasses.replace(ev, log=ev.log[: len(ev.log) // 2])
        classify(half, RULES, memo=one)
        assert _same(classify(ev, RULES, memo=one), expected)
        assert _same(classify(ev, RULES, memo=two), expected)
        assert _same(classify(ev, RULES, memo=one), expected), "a memo's second look changed the verdict"


def test_without_a_memo_no_call_leaves_anything_for_the_next() -> None:
    cases = _evidence()
    fresh = [classify(ev, RULES) for ev in cases]
    # any order, each log also after a shorter look at itself: what a fresh process would say
    for ev, expected in reversed(list(zip(cases, fresh, strict=True))):
        classify(dataclasses.replace(ev, log=ev.log[: len(ev.log) // 2]), RULES)
        assert _same(classify(ev, RULES), expected)
    assert _same(classify(cases[0], RULES), fresh[0])


def test_the_watcher_owns_one_memo_and_hands_it_to_every_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    from hangwatch.watch import decide

    seen: list[object] = []
    real = decide.classify
    monkeypatch.setattr(decide, "classify", lambda *a, **k: seen.append(k.get("memo")) or real(*a, **k))
    memo = ScanMemo()
    decider = decide.Decider(RULES, 5.0, memo=memo)
    for t in (1.0, 2.0):
        decider.decide(Evidence(log=read_log_lines(STUCK)), t=t, wall=t, motion=(), wait_since={}, steady={},
                       past=(), where=None, elapsed_s=None)  # fmt: skip
    assert seen == [memo, memo]


def _module_state(path: Path) -> list[str]:
    """Module-level caches: `global` statements, and names bound to an empty container or a lock
    (constant tables written out in full are not state)."""
    tree = ast.parse(path.read_text())
    found = [f"{path.name}:{node.lineno} global" for node in ast.walk(tree) if isinstance(node, ast.Global)]
    stateful = {"OrderedDict", "defaultdict", "deque", "Lock", "RLock", "WeakValueDictionary", "WeakKeyDictionary"}
    for node in tree.body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if isinstance(value, ast.Call):
            func = value.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in stateful or (name in ("dict", "list", "set") and not value.args and not value.keywords):
                found.append(f"{path.name}:{node.lineno} {name}()")
        elif isinstance(value, ast.Dict | ast.List) and not (value.keys if isinstance(value, ast.Dict) else value.elts):
            found.append(f"{path.name}:{node.lineno} an empty {type(value).__name__}")
    return found


def test_parse_and_classify_keep_no_module_level_state() -> None:
    found = [hit for package in ("parse", "classify") for path in sorted((PACKAGE / package).rglob("*.py"))
             for hit in _module_state(path)]  # fmt: skip
    assert found == [], "module-level mutable state in a pure layer: pass it in (classify.memo)"
