"""Learned budgets and the ETA (pure), and past starts kept across restarts in SQLite."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hangwatch.model import Phase
from hangwatch.sinks.store import HistoryStore
from hangwatch.watch.budgets import PastStart, Position, SetupKey, budgets, eta, phase_durations, position

KEY = SetupKey("sglang", "0.5.23", "/models/llama", 2, "NVIDIA H200")


def test_budget_is_twice_the_longest_plus_a_margin() -> None:
    past = [PastStart(100, {"cuda_graph": 9.0}), PastStart(90, {"cuda_graph": 7.0, "weight_load": 0.0})]
    assert budgets(past) == {Phase.CUDA_GRAPH: 23.0, Phase.WEIGHT_LOAD: 5.0}


def test_eta_counts_what_is_left_of_this_phase_and_the_phases_ahead() -> None:
    past = [PastStart(60, {"weight_load": 20.0, "kv_cache": 10.0, "cuda_graph": 30.0})] * 3
    got = eta(past, Position(Phase.WEIGHT_LOAD, 5.0), elapsed_s=30.0)
    assert got is not None and got.ready_in_s == 15.0 + 10.0 + 30.0 and got.from_starts == 3 and got.budget_s == 45.0
    assert eta([], Position(Phase.WEIGHT_LOAD, 5.0), 30.0) is None


def test_position_is_the_rank_furthest_behind_and_after_an_end_line_the_next_phase() -> None:
    rows = {"TP0": [("weight_load", 1.0, 3.0)], "TP1": [("dist_init", 0.5, None)]}
    assert position(rows, 10.0) == Position(Phase.DIST_INIT, 9.5)
    assert position({"TP0": [("weight_load", 1.0, 3.0)]}, 10.0) == Position(Phase.KV_CACHE, 7.0)


def test_phase_durations_skip_phases_already_under_way_when_attached() -> None:
    rows = {"TP0": [("dist_init", 0.0, None), ("weight_load", 4.0, 9.0), ("kv_cache", 9.5, None)]}
    assert phase_durations(rows, seen_from=0.0, ready_t=20.0) == {"weight_load": 5.0, "kv_cache": 10.5}


def test_past_starts_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite"
    store = HistoryStore(path)
    store.record_start(KEY, PastStart(42.0, {"cuda_graph": 9.0}), at=1.0)
    store.record_start(SetupKey("sglang", "0.5.23", "/models/llama", 8, "NVIDIA H200"), PastStart(1.0, {}), at=2.0)
    store.close()
    again = HistoryStore(path)
    assert again.past_starts(KEY) == [PastStart(42.0, {"cuda_graph": 9.0})]


def test_a_setup_differs_by_topology_and_a_file_from_before_topologies_opens(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.executescript("CREATE TABLE starts (id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, engine TEXT NOT NULL,"
                      " version TEXT NOT NULL, model TEXT NOT NULL, tp INTEGER NOT NULL, gpu_model TEXT NOT NULL,"
                      " ready_s REAL NOT NULL, phases TEXT NOT NULL);"
                      "INSERT INTO starts (at, engine, version, model, tp, gpu_model, ready_s, phases)"
                      " VALUES (1, 'sglang', '0.5.23', '/models/llama', 2, 'NVIDIA H200', 9, '{}');")
    old.close()
    store = HistoryStore(path)
    keyed = SetupKey("sglang", "0.5.23", "/models/llama", 2, "NVIDIA H200", "tp2 pp1 dp1 nnodes1")
    assert store.past_starts(keyed) == []  # the old row's model was the flag's text: no setup's key
    store.record_start(keyed, PastStart(30.0, {}), at=2.0)
    assert store.past_starts(keyed) == [PastStart(30.0, {})]
    assert store.past_starts(SetupKey("sglang", "0.5.23", "/models/llama", 2, "NVIDIA H200", "tp2 pp2 dp1 nnodes1")) == []


def test_episodes_of_servers_that_are_gone_are_closed(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite")
    store.start_episode("sglang pid 11 on 127.0.0.1:30000", "stalled", "x", episode_id="gone", at=1.0)
    store.start_episode("sglang pid 12 on 127.0.0.1:30001", "stalled", "x", episode_id="here", at=1.0)
    closed = store.close_gone(lambda episode: episode.id == "gone", at=5.0)
    assert [e.id for e in closed] == ["gone"]
    assert {e.id: e.ended for e in store.episodes()} == {"gone": 5.0, "here": None}
    assert store.open_episode("sglang pid 11 on 127.0.0.1:30000") is None


def test_a_refined_cause_is_recorded_once(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite")
    episode = store.start_episode("srv", "stalled", "unknown", at=1.0, episode_id="live-1")
    assert episode.id == "live-1"
    assert store.refine_episode("live-1", "nccl_init", 0.7, at=2.0)
    assert not store.refine_episode("live-1", "nccl_init", 0.7, at=3.0)
    assert [(r.cause, r.confidence) for r in store.refinements()] == [("nccl_init", 0.7)]
    assert store.episodes()[0].cause == "nccl_init"


def test_no_eta_once_late_or_stalled_only_how_late() -> None:
    from hangwatch.model import Phase
    from hangwatch.watch.budgets import Position

    past = [PastStart(45.0, {"weight_load": 10.0, "kv_cache": 5.0})] * 6
    on_time = eta(past, Position(Phase.WEIGHT_LOAD, 4.0), 20.0)
    assert on_time is not None and on_time.ready_in_s is not None and on_time.overdue_s is None
    late = eta(past, Position(Phase.WEIGHT_LOAD, 4.0), 125.0)
    assert late is not None and late.ready_in_s is None and late.overdue_s == 80.0 and late.usual_s == 45.0
    past_budget = eta(past, Position(Phase.WEIGHT_LOAD, 30.0), None)  # budget 2 x 10 + 5 = 25 s
    assert past_budget is not None and past_budget.ready_in_s is None and past_budget.overdue_s == 20.0
    stalled = eta(past, Position(Phase.WEIGHT_LOAD, 4.0), 20.0, stalled=True)
    assert stalled is not None and stalled.ready_in_s is None and stalled.overdue_s is None


def test_eta_text_says_overdue_not_a_promise() -> None:
    from hangwatch.model import Eta
    from hangwatch.sinks.report import eta_text

    assert eta_text(Eta(None, 6, 25.0, overdue_s=80.0, usual_s=45.0)) == "overdue by 1m 20s; usually ready in 45s, from 6 starts"
    assert eta_text(Eta(None, 6, 25.0, usual_s=45.0)) == "none while stalled; usually ready in 45s, from 6 starts"
    assert eta_text(Eta(30.0, 6, 25.0, usual_s=45.0)) == "ready in ~30s, from 6 starts"
