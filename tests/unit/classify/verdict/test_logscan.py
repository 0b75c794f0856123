"""The chunked, memoised log search gives exactly what a per-line search gives."""

from __future__ import annotations

import re

import pytest

from hangwatch.classify.language.loader import load_rules
from hangwatch.classify.language.regexcheck import can_match_newline, fold, required_literals
from hangwatch.classify.verdict import logscan
from hangwatch.classify.verdict.context import Context
from hangwatch.classify.verdict.memo import ScanMemo
from hangwatch.model import Evidence, LogLine
from hangwatch.parse.logs import read_log_lines
from helpers.classify_builders import logs
from helpers.paths import DEV_CORPUS, TESTS


def _per_line(pattern: re.Pattern[str], lines: tuple[LogLine, ...]) -> list[LogLine]:
    return [line for line in lines if pattern.search(line.text)]


LINES = logs(*[f"line {i} {'Load weight begin.' if i % 97 == 0 else 'noise'}" for i in range(1000)])


def test_same_hits_as_a_per_line_search() -> None:
    for regex in (r"Load weight", r"^line 3\d\b", r"noise$", r"\Aline 5\b", r"begin\.\Z", r"(?i)LOAD", r"noise\s+line"):
        pattern = re.compile(regex)
        assert Context(Evidence(log=LINES)).log_hits(pattern) == _per_line(pattern, LINES), regex


def test_a_match_across_lines_is_not_a_hit() -> None:
    lines = logs("ends with Load", "weight at the start")
    assert Context(Evidence(log=lines)).log_hits(re.compile(r"Load\sweight")) == []


def test_memo_is_per_line_objects_not_line_numbers() -> None:
    pattern = re.compile("marker")
    first = logs("marker here", "nothing")
    second = logs("nothing", "marker there")  # same line numbers, other lines
    memo = ScanMemo()
    assert Context(Evidence(log=first), memo).log_hits(pattern) == [first[0]]
    assert Context(Evidence(log=second), memo).log_hits(pattern) == [second[1]]


def test_chunks_follow_line_numbers_so_a_sliding_window_reuses_them() -> None:
    window = LINES[300:900]
    shifted = LINES[301:901]
    memo = logscan.ChunkMemo()
    before, after = logscan.chunks(window, memo), logscan.chunks(shifted, memo)
    assert [c.lines[0].lineno for c in before] == [301, 512, 768]
    assert after[1] is before[1]
    assert logscan.chunks(shifted)[1] is not after[1], "chunks without a memo came from one"


def test_a_pattern_that_can_match_a_newline_searches_one_line_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # `[^!]*!` over 256 joined lines of 1 KiB runs from every start to the chunk's end: 64 KiB took
    # 11 s. On its own line each search sees at most logs.MAX_TEXT characters.
    lines = logs(*["x" * 1000 for _ in range(300)], "tail!")
    seen: list[int] = []
    real = logscan._multiline
    monkeypatch.setattr(logscan, "_multiline", lambda p: seen.append(1) or real(p))
    for regex in (r"[^!]*!", r"\s+tail", r"x\Wtail", r"(?s)x.tail"):
        pattern = re.compile(regex)
        assert Context(Evidence(log=lines)).log_hits(pattern) == _per_line(pattern, lines), regex
    assert seen == [], "a pattern that can cross lines ran over a joined chunk"
    assert Context(Evidence(log=lines)).log_hits(re.compile(r"x+tail")) == []
    assert seen, "a single-line pattern still takes the joined search"


def test_a_tick_searches_only_the_lines_that_arrived(monkeypatch: pytest.MonkeyPatch) -> None:
    # the live loop hands the newest 5 000 lines: each tick the newest chunk grows at its end and
    # the oldest loses lines at its front (probe L8: 5 000 long lines cut ticks to 0.15/s)
    body = ", ".join(f"field_{i}={i * 7}" for i in range(150))
    log = logs(*[f"server_args=ServerArgs({body}) {'Load weight begin.' if i % 97 == 0 else ''}" for i in range(3000)])
    pattern = re.compile(r"Load weight")
    memo = ScanMemo()
    Context(Evidence(log=log[:1000]), memo).log_hits(pattern)
    scanned: list[int] = []
    real = logscan._scan
    monkeypatch.setattr(logscan, "_scan", lambda chunk, p: scanned.append(len(chunk.own)) or real(chunk, p))
    for end in range(1100, 3001, 100):
        scanned.clear()
        window = log[end - 1000 : end]
        assert Context(Evidence(log=window), memo).log_hits(pattern) == _per_line(pattern, window)
        assert sum(scanned) <= 100, f"searched {sum(scanned)} lines for 100 new ones"
    scanned.clear()
    window = log[2000:3000]
    assert Context(Evidence(log=window)).log_hits(pattern) == _per_line(pattern, window)
    assert sum(scanned) == 1000, "a search without a memo reused an earlier call's"


# ---------------------------------------------------------------- the literal prefilter


def _patterns(obj: object, seen: set[int] | None = None) -> set[re.Pattern[str]]:
    """Every compiled regex a loaded rule holds."""
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, (str, bytes, int, float, bool, type(None))):
        return set()
    seen.add(id(obj))
    if isinstance(obj, re.Pattern):
        return {obj} if isinstance(obj.pattern, str) else set()
    if isinstance(obj, dict):
        children: list[object] = [*obj.keys(), *obj.values()]
    elif isinstance(obj, (list, tuple, set, frozenset)):
        children = list(obj)
    else:
        children = list(getattr(obj, "__dict__", {}).values()) + [getattr(obj, s) for s in getattr(obj, "__slots__", ()) if hasattr(obj, s)]
    return set().union(*(_patterns(child, seen) for child in children)) if children else set()


def _logs() -> list[tuple[LogLine, ...]]:
    roots = [TESTS, *([DEV_CORPUS] if DEV_CORPUS.is_dir() else [])]
    return [read_log_lines(path.read_bytes()) for root in roots for path in sorted(root.rglob("server.log"))]


def test_a_chunk_the_prefilter_skips_holds_no_match_of_any_shipped_rule() -> None:
    patterns = _patterns(load_rules())
    assert len(patterns) > 50
    skipped = 0
    for lines in _logs():
        for chunk in logscan.chunks(lines):
            for pattern in patterns:
                if not chunk.may_hold(pattern):
                    skipped += 1
                    assert _per_line(pattern, chunk.own) == [], (pattern.pattern, chunk.own[0].text)
    assert skipped > 1000  # it does skip: most chunks hold none of most rules' texts


def test_a_possessive_repeat_or_an_atomic_group_is_read_for_newlines() -> None:
    # the scoped-flags walk took a possessive repeat's (min, max, body) for its body and failed
    assert (can_match_newline(r"(?:a\nb)++"), can_match_newline(r"(?:abc)++"), can_match_newline(r"(?>a\sb)")) == (True, False, True)


@pytest.mark.parametrize(("regex", "needed"), [
    (r"(?i)address already in use|EADDRINUSE|\[Errno 98\]", {"address already in use", "eaddrinuse", "[errno 98]"}),
    (r"(?i)^(?!.*to silence)(?:.*custom_all_reduce\.cuh|.*cudaIpcOpenMemHandle)", {"custom_all_reduce.cuh", "cudaipcopenmemhandle"}),
    (r"(?:foo)?bar\d", {"bar"}),
    (r"(abc)+x", {"abc"}),
    (r"(abc)*x", None),        # an optional part is no requirement
    (r"a|bcd", None),          # one alternative has no literal of 3 characters
    (r"\d+ ranks?", {" rank"}),
    (r"(?:abcd)++x", {"abcd"}),   # a possessive repeat of at least one
    (r"(?>wxyz|wxy)z", {"wxy"}),  # an atomic group
])  # fmt: skip
def test_required_literals(regex: str, needed: set[str] | None) -> None:
    assert required_literals(regex) == (frozenset(needed) if needed is not None else None)


def test_fold_keeps_every_case_insensitive_match_of_an_ascii_character() -> None:
    # re matches İ and ı to i, ſ to s and K (Kelvin) to k: folded, they must read as that letter
    candidates = re.compile(r"[\x00-\x7f]", re.IGNORECASE)
    for code in range(0x80, 0x110000):
        other = chr(code)
        if candidates.fullmatch(other):
            for ascii_char in map(chr, range(0x80)):
                if re.fullmatch(re.escape(ascii_char), other, re.IGNORECASE):
                    assert fold(other) == ascii_char.casefold(), (hex(code), ascii_char)
    text = "Address ALREADY in use: \u0130\u0131 \u017ftop \u212aill"
    assert all(lit in fold(text) for lit in ("address already in use", "ii", "stop", "kill"))
