"""One rank of the test server: `python rank.py RANK STORE_PORT READY_FD MODE` (started by
sglang/launch_server.py). It takes SGLang's title `sglang::scheduler_TP<rank>` at once.

Rank 0 hosts a rendezvous socket and blocks in accept() until every peer connected; the others
connect to it. Then the rank logs its phases, tells the launcher it is ready through its socket
pair, and blocks reading it (waiting for requests that never come).
"""

import os
import signal
import socket
import sys
import time

from _common import TP, die_with_parent, log
from setproctitle import setproctitle


def meet_peers(rank, store_port, world):
    if rank == 0:
        server = socket.create_server(("127.0.0.1", store_port))
        peers = [server.accept()[0] for _ in range(world - 1)]  # blocks until every peer came
        return server, peers
    deadline = time.monotonic() + 30
    while True:
        try:
            return socket.create_connection(("127.0.0.1", store_port)), []
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def busy_compute(seconds):
    """Real CPU work whose Python stack moves (different functions and lines)."""
    end = time.monotonic() + seconds
    total = 0
    while time.monotonic() < end:
        total += sum(i * i for i in range(20000))
        total += len(sorted(str(total)))
    return total


def main(rank, store_port, ready_fd, mode):
    die_with_parent()
    label = f"TP{rank}"
    setproctitle(f"sglang::scheduler_{label}")
    log(label, "Init torch distributed begin.")
    if mode == "dead_rank" and rank == 1:
        time.sleep(float(os.environ.get("HW_DIE_AFTER", "3")))
        os.kill(os.getpid(), signal.SIGKILL)
    keep = meet_peers(rank, store_port, TP)
    log(label, "Init torch distributed ends. mem usage=0.00 GB")
    if mode == "slow" and rank == 0:
        busy_compute(float(os.environ.get("HW_SLOW_S", "12")))
    log(label, "Load weight begin. avail mem=60.00 GB")
    if mode == "fifo_rank":
        wait_after_load(rank, keep, os.environ["HW_FIFO"])
    log(label, "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=59.00 GB, mem usage=1.00 GB.")
    if mode == "jit_lock" and rank == 0:
        jit_build(os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "hw_test_ext"))
    log(label, "KV Cache is allocated. #tokens: 4096, K size: 0.01 GB, V size: 0.01 GB")
    log(label, "max_total_num_tokens=4096, chunked_prefill_size=2048, max_prefill_tokens=16384, context_len=2048")
    channel = socket.socket(fileno=ready_fd)
    channel.sendall(b"r")
    if mode == "spin" and rank == 0:
        spin(os.environ["HW_RATE_FILE"])
    channel.recv(1)  # wait for requests that never come
    del keep


def jit_build(folder):
    """What torch.utils.cpp_extension does before a JIT build (needs torch: run under the lab's
    python): one process builds under the folder's FileBaton, the others wait for its `lock` to go.
    A `lock` left by a killed build is never removed by anyone, so the wait is forever."""
    from torch.utils.file_baton import FileBaton

    os.makedirs(folder, exist_ok=True)
    baton = FileBaton(os.path.join(folder, "lock"))
    if baton.try_acquire():
        baton.release()  # nothing to build here: the lock was free
    else:
        baton.wait()


def load_from_fifo(path):
    """Rank 1's weights are a FIFO nobody writes (a hung filesystem): open() blocks for good."""
    with open(path, "rb") as weights:
        return weights.read()


def barrier_after_load(keep):
    """Rank 0 loaded its weights and waits for every peer to say it did too (as SGLang's post-load barrier)."""
    _server, peers = keep
    for peer in peers:
        peer.recv(1)


def wait_after_load(rank, keep, fifo):
    if rank == 1:
        load_from_fifo(fifo)
    else:
        log(f"TP{rank}", "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=59.00 GB, mem usage=1.00 GB.")
        barrier_after_load(keep)


def spin(rate_file):
    """A ready rank busy on the CPU (a benchmark's workload): appends `t work_units` each second.
    HW_SPIN_KIND=alloc: each unit maps, fills and frees 8 MiB instead (page faults, munmap)."""
    alloc = os.environ.get("HW_SPIN_KIND") == "alloc"
    units, next_report = 0, time.monotonic() + 1.0
    with open(rate_file, "a") as out:
        while True:
            if alloc:
                block = bytearray(b"\x01") * (8 << 20)
                del block
            else:
                sum(i * i for i in range(2000))
            units += 1
            if time.monotonic() >= next_report:
                out.write(f"{time.monotonic():.3f} {units}\n")
                out.flush()
                next_report += 1.0


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
