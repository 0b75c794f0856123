"""A daemon restarted mid-stall carries on the episode its history left open (cli/live.py glue):
its first verdicts stay `stalled` with that episode, so the alert dispatcher sends nothing."""

from __future__ import annotations

from pathlib import Path

from hangwatch.classify import RULES_DIR, load_rules
from hangwatch.cli.live import _resume_open_episode
from hangwatch.model import State
from hangwatch.sinks.alerts import AlertDispatcher
from hangwatch.sinks.store import HistoryStore
from hangwatch.watch import WatchConfig, Watcher
from helpers.recorded_sources import RecordedSources, proc, server

RULES = load_rules([RULES_DIR])
WALL0 = 1_800_000_000.0
LOG = b"[2026-11-29 23:40:00] Load weight begin. avail mem=21.07 GB\n"


class _Sink:
    name = "test"

    def __init__(self) -> None:
        self.sent: list[object] = []

    def send(self, alert: object) -> None:
        self.sent.append(alert)


def test_a_restarted_daemon_resumes_the_open_episode_and_alerts_nothing(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "history.sqlite")
    src = RecordedSources(procs=[proc(100, "launcher"), proc(101, "scheduler")])
    src.write(LOG)
    watcher = Watcher(server(), RULES, WatchConfig(gpus=False), sources=src, clock=lambda: 0.0, wall=lambda: WALL0)
    # an earlier daemon opened the episode and alerted it (killed -9 since)
    old = store.start_episode(watcher.view.server_name, "stalled", "weight_loading_io", at=WALL0 - 120, episode_id="e-old")
    store.record_alert(old.id, "test", "firing", "sent", at=WALL0 - 119)
    sink = _Sink()
    dispatcher = AlertDispatcher([sink], store)
    try:
        _resume_open_episode(watcher, store)
        for t in range(0, 5):  # nothing moves; the raw verdict alone would say starting
            observation, verdict = watcher.tick(now=float(t))
            dispatcher.on_verdict(verdict, observation.server.name)
            assert verdict.state is State.STALLED and verdict.episode is not None and verdict.episode.id == "e-old"
            assert verdict.since_s is not None and verdict.since_s >= 120
        assert dispatcher.flush(10.0)
        assert sink.sent == [] and store.open_episode(watcher.view.server_name).id == "e-old"
    finally:
        dispatcher.close()
        watcher.close()
        store.close()
