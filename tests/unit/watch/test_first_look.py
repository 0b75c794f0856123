"""The first look ends at the first motion and waits its whole length only when nothing moves
(watcher.Watcher._first_look, progress.first_look_moved and ProgressTracker.moved_since_last; docs/live.md, First look)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hangwatch.classify import RULES_DIR, load_rules
from hangwatch.watch import WatchConfig, Watcher
from hangwatch.watch.progress import Snapshot, first_look_moved, proc_samples
from helpers.recorded_sources import RecordedSources, proc, server

RULES = load_rules([RULES_DIR])
START = b"[2026-12-01 10:00:00 TP0] Load weight begin. avail mem=60.00 GB\n"


@dataclass
class Loading(RecordedSources):
    """TP0 reads 2 MiB of weights between any two process reads from the `moves_from`-th on."""

    moves_from: int | None = None
    proc_reads: int = 0

    def read_procs(self, rescan: bool = True) -> list:
        self.proc_reads += 1
        if self.moves_from is not None and self.proc_reads >= self.moves_from:
            self.procs = [replace(p, io_read_bytes=(p.io_read_bytes or 0) + (2 << 20)) if p.rank == "TP0" else p
                          for p in self.procs]
        return super().read_procs(rescan)


def _watch(src: Loading, look_s: float) -> Watcher:
    src.write(START)
    return Watcher(server(), RULES, WatchConfig(gpus=False, first_look_s=look_s), sources=src)


def _sources(moves_from: int | None) -> Loading:
    return Loading(procs=[proc(100, "launcher", ppid=1), proc(101, "scheduler", "TP0"), proc(102, "scheduler", "TP1")],
                   moves_from=moves_from)


def test_a_rank_reading_its_weights_ends_the_look_at_the_first_poll() -> None:
    # GIVEN a look of 30 s, and TP0 reading weights from the process read after the baseline's on
    src = _sources(moves_from=2)
    watcher = _watch(src, 30.0)
    # WHEN the first tick is taken
    watcher.tick()
    # THEN the look ended at its first poll: a few process reads (its baseline, while its stack round
    # ran, the poll that saw the reads; the tick's), not the 300 of polls a whole look takes
    assert src.proc_reads < 10, src.proc_reads
    assert "io:TP0" in watcher.progress.recent_signals()
    watcher.close()


def test_nothing_moving_waits_the_whole_look() -> None:
    # GIVEN a look of 0.5 s over a server where nothing moves
    src = _sources(moves_from=None)
    watcher = _watch(src, 0.5)
    watcher.tick()
    # THEN it polled until its end (every 0.1 s), and the first tick compared: nothing moved
    assert src.proc_reads >= 4, src.proc_reads
    assert watcher.progress.recent_signals() == ()
    watcher.close()


def test_first_look_moved_is_any_signal_past_its_threshold() -> None:
    before = proc_samples([proc(101, "scheduler", "TP0")])
    small = proc_samples([replace(proc(101, "scheduler", "TP0"), io_read_bytes=1000)])
    big = proc_samples([replace(proc(101, "scheduler", "TP0"), io_read_bytes=2 << 20)])
    assert not first_look_moved(None, Snapshot(1.0, procs=big))  # no baseline yet
    assert not first_look_moved(Snapshot(0.0, procs=before), Snapshot(0.2, procs=small))  # below 1 MiB
    assert first_look_moved(Snapshot(0.0, procs=before), Snapshot(0.2, procs=big))
    assert first_look_moved(Snapshot(0.0, log_news=3), Snapshot(0.2, log_news=4))  # a news line
    assert not first_look_moved(Snapshot(0.0, log_news=3, log_bytes=10), Snapshot(0.2, log_news=3, log_bytes=99))  # a repeat
