"""Big logs without reading them line by line (watch/skim.py, issue 25): attaching to a log of
many MiB finds its phases by seeking, and a burst is skimmed (its phase and failure lines kept)
or, past the skim rate, skipped and said in `missing`. Correctness only: the figures are in
bench/bench_big_log.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hangwatch.classify import load_rules
from hangwatch.engines import get_engine
from hangwatch.parse.logs import read_log_lines
from hangwatch.watch import WatchConfig, logsource
from hangwatch.watch import skim as skim_module
from hangwatch.watch.livesources import LiveSources
from hangwatch.watch.rings import LogRing
from hangwatch.watch.skim import phase_needles, skim
from helpers.recorded_sources import server

START = b"""[2026-12-01 22:17:29] server_args=ServerArgs(model_path='/models/tiny', tp_size=2, port=45931)
[2026-12-01 22:17:30 TP1] Init torch distributed begin.
[2026-12-01 22:17:30 TP0] Init torch distributed begin.
[2026-12-01 22:17:30 TP0] Init torch distributed ends. mem usage=0.00 GB
[2026-12-01 22:17:30 TP1] Init torch distributed ends. mem usage=0.00 GB
[2026-12-01 22:17:30 TP0] Load weight begin. avail mem=60.00 GB
[2026-12-01 22:17:30 TP1] Load weight begin. avail mem=60.00 GB
[2026-12-01 22:17:31 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=59.00 GB
[2026-12-01 22:17:31 TP1] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=59.00 GB
[2026-12-01 22:17:31 TP0] Memory pool end. avail mem=40.00 GB
[2026-12-01 22:17:31 TP1] Memory pool end. avail mem=40.00 GB
[2026-12-01 22:17:32] INFO:     Uvicorn running on http://127.0.0.1:45931 (Press CTRL+C to quit)
[2026-12-01 22:17:33] The server is fired up and ready to roll!
"""
TRACEBACK = b"""[2026-12-01 22:20:01 TP1] Scheduler hit an exception: Traceback (most recent call last):
  File "/opt/sglang/srt/managers/scheduler.py", line 2714, in run_scheduler_process
    scheduler.event_loop_overlap()
  File "/opt/sglang/srt/managers/scheduler.py", line 901, in event_loop_overlap
    batch = self.get_next_batch_to_run()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.10 GiB
"""


RULES = load_rules()


@pytest.fixture(autouse=True)
def _small_skim_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bursts of tens of MiB instead of hundreds: the same paths, at a test's cost."""
    monkeypatch.setattr(logsource, "_SKIM_PIECE", 1 << 20)
    monkeypatch.setattr(logsource, "_SKIM_TICK_S", 60.0)  # the test host may be slow: no time limit
    monkeypatch.setattr(logsource, "_SKIM_BEHIND_S", 1.0)
    monkeypatch.setattr(logsource, "_SKIM_RATE", 16 << 20)  # 16 MiB behind is skipped
    monkeypatch.setattr(skim_module, "MIN_SHAPE_BUDGET", 64 << 10)


def _prefill(n: int, start: int = 0) -> bytes:
    return b"".join(b"[2026-12-01 22:18:%02d TP0] Prefill batch. #new-seq: %d, #new-token: %d, #cached-token: 0, "
                    b"token usage: 0.%02d, #running-req: 0, #queue-req: 0\n" % (i % 60, i % 7 + 1, 8 * (i % 13) + 8, i % 100)
                    for i in range(start, start + n))


def _phases(data: bytes) -> list[tuple[str, str | None, str]]:
    events = get_engine("sglang").phase_events(read_log_lines(data))
    return [(e.phase.value, e.rank, e.text) for e in events]


def _sources(log: Path, **config: object) -> LiveSources:
    return LiveSources(server(), WatchConfig(gpus=False, log_path=str(log), **config), rules=RULES)  # type: ignore[arg-type]


def _drain(sources: LiveSources, limit: int = 50) -> tuple[list[bytes], int]:
    out, ticks = [], 0
    while ticks < limit and (data := sources.read_log()):
        out.append(data)
        ticks += 1
    return out, ticks


def test_skim_keeps_the_lines_a_needle_is_in_whatever_their_digits_and_case() -> None:
    data = _prefill(500) + b"[TP3] NCCL WARN Call to connect returned Connection refused\n" + _prefill(500, 500)
    skimmed = skim(data, frozenset({"connection refused", "tp0] prefill batch. #new-seq: 0,"}))
    assert skimmed is not None and skimmed.lines == 1001
    kept = skimmed.data.splitlines()
    assert b"[TP3] NCCL WARN Call to connect returned Connection refused" in kept
    # every prefill line has the needle's shape (its digits made 0), whatever its own digits
    assert len(kept) == 1001


def test_skim_keeps_a_tracebacks_frames_and_says_none_when_lines_never_repeat() -> None:
    data = _prefill(300) + TRACEBACK + _prefill(300, 300)
    skimmed = skim(data, frozenset({"traceback (most recent call last)"}))
    assert skimmed is not None and TRACEBACK in skimmed.data
    unique = b"".join(os.urandom(40).hex().encode() + b"\n" for _ in range(50_000))
    assert skim(unique, frozenset({"error"})) is None


def test_a_feed_larger_than_the_ring_parses_its_newest_lines_and_keeps_every_phase_line() -> None:
    data = START + _prefill(30_000) + b"[2026-12-01 22:19:00 TP0] Load weight begin. avail mem=1.00 GB\n" + _prefill(3_000)
    full = read_log_lines(data)
    ring = LogRing(read_log_lines, max_lines=1_000, overflow_needles=phase_needles())
    lines = ring.feed(data)
    assert [(x.lineno, x.text) for x in lines[-1_000:]] == [(x.lineno, x.text) for x in full[-1_000:]]
    assert list(ring.lines) == lines[-1_000:]
    engine = get_engine("sglang")
    assert engine.phase_events(lines) == engine.phase_events(full)  # same events, same line numbers
    assert ring.next_lineno == len(full) + 1


def test_attaching_to_a_big_log_finds_its_phases_by_seeking(tmp_path: Path) -> None:
    """The start at the head, 40 MiB of serving, and the tail: the phases are those of the whole
    file, though only its head, the stretch before the tail and the tail are read."""
    log = tmp_path / "server.log"
    with log.open("wb") as fh:
        fh.write(START)
        block = _prefill(7_000)
        for _ in range(40):
            fh.write(block)
        fh.write(_prefill(2_000))
    size = log.stat().st_size
    sources = _sources(log, initial_log_bytes=1 << 20)
    first = sources.read_log()
    assert len(first) < (1 << 20) + 64 * 1024  # the tail, and the phase lines found before it
    assert sources.log_bytes_seen < size // 10
    want = _phases(START)
    assert _phases(first) == want


def test_run_on_an_existing_log_does_not_look_back_for_phases(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(START + _prefill(50_000))
    sources = _sources(log, initial_log_bytes=0)  # `hangwatch run` appending to an old log
    assert sources.read_log() == b""


def test_a_burst_is_caught_up_in_a_few_ticks_with_its_failures_and_phase_lines(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(START)
    sources = _sources(log)
    assert sources.read_log() == START
    phase = b"[2026-12-01 22:19:00 TP0] Capture cuda graph begin. This can take up to several minutes.\n"
    block = _prefill(10_000)
    with log.open("ab") as fh:  # about 14 MiB: more than a tick skims here
        for n in range(10):
            fh.write(block)
            if n == 4:
                fh.write(TRACEBACK)
            if n == 7:
                fh.write(phase)
        fh.write(b"[2026-12-01 22:19:30] The last line of the burst\n")
    assert log.stat().st_size > 8 * logsource._SKIM_PIECE
    out, ticks = _drain(sources)
    read = b"".join(out)
    assert ticks <= 3, ticks
    assert TRACEBACK in read and phase in read and read.endswith(b"The last line of the burst\n")
    assert read.count(b"\n") < 50_000  # skimmed: not every prefill line came through
    assert "log_burst" not in {m.source for m in sources.missing()}


def test_a_burst_beyond_the_skim_rate_is_skipped_and_said_in_missing(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(START)
    sources = _sources(log)
    sources.read_log()
    with log.open("ab") as fh:
        fh.write(_prefill(1_000) + TRACEBACK.replace(b"TP1", b"TP0"))  # in what will be skipped
        fh.truncate(len(START) + (32 << 20))  # a stretch of NULs, then the newest lines
        fh.seek(0, os.SEEK_END)
        fh.write(b"\n" + TRACEBACK)
    out, ticks = _drain(sources)
    read = b"".join(out)
    assert ticks <= 3 and TRACEBACK in read
    assert TRACEBACK.replace(b"TP1", b"TP0") in read  # a skipped traceback is still found
    missing = {m.source: m.reason for m in sources.missing()}
    assert "log_burst" in missing and "MiB skipped unread" in missing["log_burst"], missing


def test_lines_that_never_repeat_are_skipped_and_said(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(START)
    sources = _sources(log)
    sources.read_log()
    with log.open("ab") as fh:
        fh.write(b"".join(os.urandom(24).hex().encode() + b"\n" for _ in range(100_000)))
        fh.write(TRACEBACK)
    out, ticks = _drain(sources)
    assert ticks <= 3 and b"".join(out).endswith(TRACEBACK)
    assert "log_burst" in {m.source for m in sources.missing()}
