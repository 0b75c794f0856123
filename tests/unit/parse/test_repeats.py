"""Repeated log lines: a wait said again is not news; a new kind of line or a moved counter is."""

from __future__ import annotations

from hangwatch.parse.logs import read_log_lines
from hangwatch.parse.repeats import LineNews, counters, is_wait, line_seconds, repeated_waits, template, wait_family

DP_WAIT = "(EngineCore_DP0 pid=123) INFO 12-01 22:10:{s:02d} [core.py:1247] Waiting for READY message from DP Coordinator...\n"
CONNECT = "(APIServer pid=100) INFO 12-01 22:10:06 [utils.py:1402] Waiting for {n} local, 1 remote core engine proc(s) to connect.\n"


def _lines(*texts: str):
    return read_log_lines("".join(texts).encode())


def test_one_kind_of_line_modulo_times_addresses_and_ids() -> None:
    a = "[2026-11-29 23:43:26] Retrying connect to 10.0.0.2:29500 in 5s (attempt 3/10), id 0x7f3a12"
    b = "[2026-11-29 23:43:31] Retrying connect to 10.0.0.2:29500 in 5s (attempt 4/10), id 0x7f3a99"
    assert template(a) == template(b)
    assert counters(a) == counters(b) == ()  # the attempt number is the loop's own, not news


def test_a_counter_that_moves_is_news_and_a_wait_repeated_is_not() -> None:
    news = LineNews()
    assert news.observe(_lines(CONNECT.format(n=2))) == 1
    assert news.observe(_lines(CONNECT.format(n=2))) == 0  # the same wait again
    assert news.observe(_lines(CONNECT.format(n=1))) == 1  # one engine connected: progress
    bar = "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.2s/it]\n"
    assert news.observe(_lines(bar)) == 1
    assert news.observe(_lines(bar.replace("50%", "100%").replace("1/2", "2/2"))) == 1


def test_two_writers_repeating_one_wait_are_two_repeats_not_news() -> None:
    news = LineNews()
    one = "[2026-11-29 23:43:26 TP0] Waiting for the store\n"
    two = "[2026-11-29 23:43:26 TP1] Waiting for the store\n"
    assert news.observe(_lines(one, two)) == 2
    assert news.observe(_lines(one, two, one, two)) == 0


def test_the_dp_coordinator_wait_is_a_repeated_wait_on_remote_peers_with_its_period() -> None:
    log = _lines(*(DP_WAIT.format(s=s) for s in (5, 15, 25, 35, 45)))
    [wait] = repeated_waits(log)
    assert wait.count == 5 and wait.every_s == 10.0 and wait.span_s == 40.0
    assert wait.family is not None and wait.family.cause == "multinode_rendezvous"
    assert "every 10s for 40s" in wait.describe() and "DP Coordinator" in wait.describe()


def test_a_wait_followed_by_news_is_over() -> None:
    log = _lines(*(DP_WAIT.format(s=s) for s in (5, 15, 25)), "(EngineCore_DP0 pid=123) INFO 12-01 22:10:30 [core.py:99] Engine ready\n")
    assert repeated_waits(log) == []
    assert len(repeated_waits(log, trailing_only=False)) == 1


def test_wait_families_come_from_what_is_waited_on() -> None:
    assert wait_family("Waiting for lock /root/.cache/flashinfer/x.lock")
    assert wait_family("Waiting for lock /root/.cache/flashinfer/x.lock").cause == "jit_lock_deadlock"  # type: ignore[union-attr]
    assert wait_family("still downloading model.safetensors, waiting for the hub").cause == "weight_loading_io"  # type: ignore[union-attr]
    assert wait_family("Waiting for 1 local, 1 remote core engine proc(s) to connect.").cause == "multinode_rendezvous"  # type: ignore[union-attr]
    assert wait_family("waiting for nothing in particular") is None
    assert is_wait("keep-alive") and not is_wait("Load weight begin. avail mem=21.07 GB")


def test_timestamps_of_both_engines_read_as_seconds() -> None:
    sglang, vllm = _lines("[2026-11-29 23:43:26] x\n", "INFO 11-29 23:43:36 [a.py:1] y\n")
    s, v = line_seconds(sglang), line_seconds(vllm)
    assert s is not None and v is not None
    assert line_seconds(_lines("no stamp\n")[0]) is None
