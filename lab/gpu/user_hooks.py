"""User code the GPU lab's scenarios call from inside the engine (outside it, as a patch or
plugin would be).

collective: a post-load hook that, on rank 1, waits for a file another job never writes. It never
returns, so rank 1 never reaches the all-reduce rank 0 is already waiting in: a collective skipped
on a subset of ranks, in the user's code.

rendezvous-mismatch: the user's own process-group setup, which gives every rank its own port (a
per-node MASTER_PORT gone wrong): rank 0 serves the TCPStore on PORT, rank 1 looks for it on
PORT+1. The user's code called the rendezvous; the ranks wait on each other in torch, not in it.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

READY_FILE = "/tmp/hangwatch-lab-export-done"


def after_weights_loaded(rank: int) -> None:
    if rank != 1:
        return
    while not os.path.exists(READY_FILE):
        time.sleep(1.0)


def join_process_group(backend: str, rank: int, world: int, port: int) -> None:
    import torch.distributed as dist

    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port + rank}", rank=rank, world_size=world,
                            timeout=timedelta(hours=1))
