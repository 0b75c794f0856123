"""A wait repeated in the log is not progress; a first look is a baseline; a late attach to a stuck
server is `stalled` from its first verdict (docs/live.md). Driven tick by tick behind recorded sources."""

from __future__ import annotations

import os
from pathlib import Path

from hangwatch.classify import RULES_DIR, load_rules
from hangwatch.model import State
from hangwatch.parse.logs import read_log_lines
from hangwatch.watch import WatchConfig, Watcher
from hangwatch.watch.lognews import LogNews
from helpers.recorded_sources import RecordedSources, frame, proc, server, stack

RULES = load_rules([RULES_DIR])
WALL0 = 1_800_000_000.0
HEAD = (
    "(APIServer pid=100) INFO 12-01 22:10:00 [api_server.py:1] vLLM API server version 0.32.0\n"
    "(EngineCore_DP0 pid=101) INFO 12-01 22:10:01 [core.py:100] Initializing a V1 LLM engine (v0.32.0) with config: model='m'\n"
)
WAIT = "(EngineCore_DP0 pid=101) INFO 12-01 22:{m:02d}:{s:02d} [core.py:1247] Waiting for READY message from DP Coordinator...\n"
# the engine core sits in the handshake's wait: the same stack every sample
WAITING = stack("101", 101, frame("Event.wait", "threading.py", 629, ), frame("EngineCoreProc.__init__", "vllm/v1/engine/core.py", 1243))


def _stamp(seconds: int) -> str:
    return WAIT.format(m=10 + seconds // 60, s=seconds % 60)


def _sources(log_file: str | None = None) -> RecordedSources:
    src = RecordedSources(engine="vllm", procs=[proc(100, "launcher"), proc(101, "engine_core")], log_file=log_file)
    src.set_stacks(WAITING)
    return src


def _watcher(src: RecordedSources, clock=lambda: 0.0, **config) -> Watcher:
    return Watcher(server("vllm", {"model": "m"}), RULES, WatchConfig(gpus=False, **config), sources=src, clock=clock,
                   wall=lambda: WALL0)


def test_a_wait_repeated_every_10s_is_no_progress_and_ends_stalled_on_remote_peers() -> None:
    src = _sources()
    src.write(HEAD.encode())
    watcher = _watcher(src)
    verdicts = []
    for t in range(0, 90):
        if t % 10 == 5:
            src.write(_stamp(t).encode())
        _, verdict = watcher.tick(now=float(t))
        watcher.settle()
        verdicts.append(verdict)
    first = next(i for i, v in enumerate(verdicts) if v.state is State.STALLED)
    stalled = verdicts[first]
    assert stalled.cause == "multinode_rendezvous" and stalled.rule == "repeated-wait-on-peers", stalled
    assert any("repeats 'Waiting for READY message from DP Coordinator...'" in f.text and "every 10s" in f.text
               for f in stalled.evidence)
    # the quiet time counts from the first wait line (the last news), not from its latest repeat
    assert 30 <= first <= 45 and stalled.since_s is not None and stalled.since_s >= 30
    assert all(v.state is State.STALLED for v in verdicts[first:])  # the repeats that follow end nothing


def test_a_counter_that_moves_in_a_wait_line_is_progress() -> None:
    src = _sources()
    src.write(HEAD.encode())
    watcher = _watcher(src)
    line = "(APIServer pid=100) INFO 12-01 22:10:{s:02d} [utils.py:1402] Waiting for {n} local, 0 remote core engine proc(s) to connect.\n"
    quiet = []
    for t in range(0, 40):
        if t % 5 == 0:
            src.write(line.format(s=t, n=8 - t // 5).encode())  # one engine connects every 5 s
        observation, _ = watcher.tick(now=float(t))
        quiet.append(observation.progress.since_last_progress_s)
    assert max(quiet[2:]) <= 5.0


def test_log_news_first_read_is_a_baseline_and_dates_the_stall_from_the_log() -> None:
    news = LogNews(quiet_before_s=2.0)  # the file was last written 2 s before the watch began
    tail = read_log_lines((HEAD + "".join(_stamp(s) for s in range(5, 300, 10))).encode())
    assert news.feed(tail, bytes_read=True) == 0 and news.total == 0
    # the last news is the first wait line (22:10:05); the tail ends at its repeat of 22:14:55
    assert news.quiet_before_s == 2.0 + 290.0
    assert news.feed(read_log_lines(_stamp(305).encode()), bytes_read=True) == 0
    assert news.feed((), bytes_read=True) == 1  # only an unterminated line redrawn: a tqdm bar moves


def test_late_attach_to_a_server_waiting_for_five_minutes_is_stalled_from_the_first_verdict(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(HEAD + "".join(_stamp(s) for s in range(5, 300, 10)))
    os.utime(log, (WALL0 - 3.0, WALL0 - 3.0))
    src = _sources(str(log))
    src.write(log.read_bytes())
    now = [0.0]
    watcher = _watcher(src, clock=lambda: now[0], first_look_s=0.01)
    _, verdict = watcher.tick()  # the real clock's path: first look, then the tick compares with it
    assert verdict.state is State.STALLED and verdict.cause == "multinode_rendezvous", verdict
    assert verdict.since_s is not None and verdict.since_s >= 290
    assert [tr.state for tr in watcher.observation.transitions] == ["stalled"]  # never `starting` first


def test_without_a_first_look_the_first_reading_proves_nothing() -> None:
    src = _sources()
    src.write((HEAD + "".join(_stamp(s) for s in range(5, 300, 10))).encode())
    watcher = _watcher(src)
    observation, verdict = watcher.tick(now=0.0)
    assert observation.progress.signals == () and verdict.state is not State.STALLED
