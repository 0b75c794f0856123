"""Real GPU hangs for hangwatch: real CUDA and NCCL code that really blocks, on 1–2 GPUs.

    python lab/gpu/run.py SCENARIO [--log FILE] [--onset-file F] [--port P] [--hold S]
                          [--http-port H] [--disable-cuda-graph]

stdout: one JSON line {"pid": launcher, "log": FILE, "ranks": [pid, ...]}; then it stays up until
killed or --hold seconds pass, and kills its ranks on the way out. `--log -`: the ranks write to
the launcher's own stdout/stderr, as SGLang's schedulers do (what `hangwatch run` captures).

--disable-cuda-graph: SGLang's flag of that name (ServerArgs.disable_cuda_graph): the ranks capture
no CUDA graph (healthy, graph-capture skip the capture step and decode would run eagerly), so
graph-capture then starts. --http-port H: once every rank reported ready, the launcher serves
SGLang's health endpoints on H (/health, /ready: 200; /get_model_info: the model path) and only
then logs SGLang's ready line, as SGLang's HTTP server does after its schedulers are up. The
HTTP side is a simulation (a stdlib server that answers, generating nothing); the ranks are real.
engine/sglang/launch_server.py takes SGLang's own spellings (--port, --nccl-port) for these.

The launcher spawns one process per rank and waits for each rank's "ready" on a pipe, in rank
order, as SGLang's launcher does (it does not reap a rank that dies: that one stays a zombie).
Each rank titles itself `sglang::scheduler_TP<r>` and writes SGLang's phase markers at the
matching points (engine/sglang/srt/lab_scheduler.py), so that the process layout, the log and the
engine/user split of the stacks are SGLang's while the blocking calls are real. This is not
SGLang: it is torch.distributed + NCCL + CUDA (+ a CuPy kernel) with SGLang's titles and markers.

Scenarios (two ranks unless said):
  healthy       NCCL group, 4 GiB weights, a KV pool, the sampler warm-up kernel run to completion,
                real CUDA graphs (matmuls + all-reduce) for 8 batch sizes, then the ready line.
  collective    NCCL group formed, 20 GiB "weights" per GPU; rank 1's user hook (user_hooks.py)
                never returns, so it skips the all-reduce rank 0 waits in (torch.cuda.synchronize,
                GPU 0 at 100 %).
  nccl-init     the TCPStore rendezvous completes; rank 1 then waits on a store key and never
                enters NCCL; rank 0's first all-reduce blocks in ncclCommInitRank (bootstrap).
  dead-rank     the group forms, then rank 1 is SIGKILLed; rank 0 waits in the next all-reduce.
  rendezvous-mismatch
                the user's process-group setup (user_hooks.py) sends rank 1 to another TCPStore
                port than rank 0 serves: both block in init_process_group, before NCCL (one GPU
                suffices: device rank % count).
  kv-slow       one rank builds a 90 GiB pool, 1 GiB every 0.5 s, silent in the log, then prints
                the ready line: slow but healthy.
  spin-kernel   each rank launches a kernel that spins on a device flag nobody sets (the sampler
                warm-up), then synchronizes: GPUs at 100 %, no collective.
  graph-capture both ranks in capture_one_batch_size; rank 1 runs its first eager warm-up without
                the pre-capture barrier, so its all-reduce waits on the GPU for rank 0, which waits
                in the barrier (gloo) for rank 1.

LAB_GPU_CPU=1: the distributed scenarios on CPU with gloo, for checking without a GPU.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for _path in (HERE, HERE / "engine" / "sglang" / "srt"):  # user_hooks, lab_scheduler (spawn passes sys.path on)
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

SCENARIOS = ("healthy", "collective", "nccl-init", "dead-rank", "rendezvous-mismatch", "kv-slow", "spin-kernel",
             "graph-capture")
SINGLE_RANK = ("kv-slow",)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", choices=SCENARIOS)
    parser.add_argument("--log", default="/tmp/hangwatch-gpu-lab.log")
    parser.add_argument("--onset-file")
    parser.add_argument("--port", type=int, default=29650, help="TCPStore port of the rendezvous")
    parser.add_argument("--hold", type=float, default=600.0, help="seconds to stay up")
    parser.add_argument("--wait-file", help="ranks start their work once this file exists (a watcher is attached)")
    # On the command line so that hangwatch's setup key (engine, version, model, tp, GPU model) is
    # the same for every start of one size, as a real server's is; --tp-size 1 also runs one rank.
    parser.add_argument("--model-path", default="lab/gpu-tiny")
    parser.add_argument("--tp-size", type=int, default=2, choices=(1, 2))
    parser.add_argument("--disable-cuda-graph", action="store_true",
                        help="capture no CUDA graph (SGLang's flag): graph-capture then starts")
    parser.add_argument("--http-port", type=int, help="serve the health endpoints here once every rank is ready")
    parser.add_argument("--http-host", default="127.0.0.1")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for key, value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
        os.environ.setdefault(key, value)

    from lab_scheduler import RankOptions, run_scheduler_process

    # --tp-size 1: one rank on one GPU (healthy, spin-kernel; the others need a peer to hang on)
    world = 1 if args.scenario in SINGLE_RANK or args.tp_size == 1 else 2
    ctx = mp.get_context("spawn")
    options = RankOptions(disable_cuda_graph=args.disable_cuda_graph, launcher_says_ready=args.http_port is not None)
    readers, procs = [], []
    for rank in range(world):
        reader, writer = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=run_scheduler_process,
                           args=(args.scenario, rank, world, args.port, args.log, args.onset_file, writer, args.wait_file,
                                 options))
        proc.start()
        writer.close()  # the rank holds the only write end: its death reads as EOF
        readers.append(reader)
        procs.append(proc)
    print(json.dumps({"pid": os.getpid(), "log": args.log, "ranks": [p.pid for p in procs]}), flush=True)

    def stop(*_: object) -> None:
        for proc in procs:
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    deadline = time.time() + args.hold
    all_ready = True
    for reader in readers:  # SGLang's launcher: recv() from each scheduler in rank order
        while not reader.poll(min(1.0, max(0.0, deadline - time.time()))):
            if time.time() >= deadline:
                stop()
        try:
            reader.recv()
        except EOFError:
            all_ready = False  # that rank died after all; SGLang would report "scheduler is dead" here
    if args.http_port is not None and all_ready:  # SGLang's HTTP server comes up, then says so
        from lab_http import serve_health

        serve_health(args.http_host, args.http_port, args.model_path)
        log_ready_line(args.log)
    while time.time() < deadline:  # every rank ready: the server runs until killed
        time.sleep(1.0)
    stop()
    return 0


def log_ready_line(log: str) -> None:
    """SGLang's line once its HTTP server answers (the launcher's own, so without a TP prefix),
    where the ranks log."""
    line = f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] The server is fired up and ready to roll!\n"
    if log == "-":
        sys.stderr.write(line)
        sys.stderr.flush()
        return
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(line)


if __name__ == "__main__":
    sys.exit(main())
