"""A user's own script that starts two ranks whose torch rendezvous can never meet:
`python user_rendezvous.py PORT` (torch needed: the lab venv has it).

Each rank titles itself as SGLang's scheduler (`sglang::scheduler_TP<r>`), logs SGLang's
dist-init line and calls `torch.distributed.init_process_group` over gloo on the CPU — rank 0
hosts the TCPStore on PORT, rank 1 looks for it on PORT+1 (a rendezvous port mismatch). Both
block in torch's TCPStore (rank 0 waiting for its worker, rank 1 retrying its connect) called
from this file: the user's code called the rendezvous, the ranks wait on each other.
"""

import datetime
import multiprocessing as mp
import os
import sys
import time

from _common import die_with_parent, log


def rank_main(rank, port):
    die_with_parent()
    from setproctitle import setproctitle

    setproctitle(f"sglang::scheduler_TP{rank}")
    import torch.distributed as dist

    log(f"TP{rank}", "Init torch distributed begin.")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port + rank}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=600))
    log(f"TP{rank}", "Init torch distributed ends.")  # never reached


def main():
    port = int(sys.argv[1])
    ctx = mp.get_context("spawn")
    ranks = [ctx.Process(target=rank_main, args=(r, port), daemon=True) for r in range(2)]
    for proc in ranks:
        proc.start()
    print(" ".join(str(p.pid) for p in ranks), flush=True)
    deadline = time.monotonic() + float(os.environ.get("HOLD_S", "300"))
    while time.monotonic() < deadline and all(p.is_alive() for p in ranks):
        time.sleep(0.2)
    for proc in ranks:
        proc.kill()


if __name__ == "__main__":
    main()
