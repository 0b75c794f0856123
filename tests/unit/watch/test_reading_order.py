"""One reading reads the processes before the log: a rank writes its last words (a traceback) before
it exits, so a reading that shows the exit holds them. Read the other way round, a watcher delayed
between its two reads (a loaded host) saw a real SGLang scheduler's exit without its "Not enough
memory" traceback, and `--exit-on crashed` ended on a verdict without the raise site (a CI run)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hangwatch.watch import WatchConfig
from hangwatch.watch.livesources import LiveSources
from helpers.liveprocs import Spawner, wait_json, wait_until
from helpers.recorded_sources import server

LAST_WORDS = b"RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
# the rank waits on a FIFO, then writes its last words to the log and exits (unreaped: a zombie)
RANK = f"""
import sys
open(sys.argv[1]).read(1)
with open(sys.argv[2], "ab") as log:
    log.write({LAST_WORDS!r} + b"\\n")
sys.exit(1)
"""
LAUNCHER = f"""
import json, os, subprocess, sys, time
rank = subprocess.Popen([sys.executable, "-c", {RANK!r}, sys.argv[1], sys.argv[2]])
open(os.environ["HW_READY"], "w").write(json.dumps(rank.pid))
time.sleep(60)
"""


class _RankExitsRightAfterTheLogRead(LiveSources):
    """SIMULATION of the watcher descheduled inside one reading: the rank writes its last words and
    exits right after the log was read, before anything else of that reading."""

    def __init__(self, *args: Any, between: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._between: Callable[[], None] | None = between

    def read_log(self) -> bytes:
        data = super().read_log()
        if self._between is not None:
            self._between()
            self._between = None
        return data


def test_a_reading_that_shows_a_rank_exited_holds_its_last_words(spawner: Spawner, tmp_path: Path) -> None:
    log, fifo = tmp_path / "server.log", tmp_path / "go"
    log.write_bytes(b"[TP0] Load weight end. type=LlamaForCausalLM\n")
    os.mkfifo(fifo)
    launcher = spawner.start([sys.executable, "-c", LAUNCHER, str(fifo), str(log)],
                             env={**os.environ, "HW_READY": str(tmp_path / "ready")})
    rank = wait_json(tmp_path / "ready", launcher, 10.0)

    def rank_writes_and_exits() -> None:
        with open(fifo, "w") as go:
            go.write("x")
        wait_until(lambda: _zombie(rank))

    watched = server()
    watched.launcher_pid = launcher.pid
    sources = _RankExitsRightAfterTheLogRead(watched, WatchConfig(gpus=False, log_path=str(log)), between=rank_writes_and_exits)
    seen = b""
    for _ in range(2):
        reading = sources.read(frozenset({"log", "procs"}))
        seen += reading.log
        records = {record.pid: record for record in reading.procs or ()}
        if rank in records and not records[rank].alive:
            assert LAST_WORDS in seen  # read log-first, this reading had the exit and not the words
            return
        time.sleep(0.05)
    raise AssertionError("the rank's exit was never seen")


def _zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
