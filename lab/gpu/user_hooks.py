"""User code the GPU lab's collective scenario calls from inside the engine (outside it, as a
patch or plugin would be): a post-load hook that, on rank 1, waits for a file another job never
writes. It never returns, so rank 1 never reaches the all-reduce rank 0 is already waiting in: a
collective skipped on a subset of ranks, in the user's code."""

from __future__ import annotations

import os
import time

READY_FILE = "/tmp/hangwatch-lab-export-done"


def after_weights_loaded(rank: int) -> None:
    if rank != 1:
        return
    while not os.path.exists(READY_FILE):
        time.sleep(1.0)
