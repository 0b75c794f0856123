"""The GPU lab's launcher under SGLang's own command line: `python3 lab/gpu/engine/sglang/launch_server.py`.

    python3 lab/gpu/engine/sglang/launch_server.py --lab-scenario graph-capture --model-path lab/gpu-tiny \
        --tp-size 2 --host 127.0.0.1 --port 30000 --nccl-port 29650 [--disable-cuda-graph] [--onset-file F]

A simulation of `python -m sglang.launch_server`'s command line, so that `hangwatch run --remedy`
treats a GPU lab launch as it treats an SGLang launch: the path ends in `sglang/launch_server`
(hangwatch's SGLang launcher pattern), and the flags are SGLang's spellings — `--port` the serving
HTTP port, `--nccl-port` the torch.distributed TCPStore port, `--disable-cuda-graph` — so that the
remedy's change (remedies.yaml `sglang-disable-cuda-graph`: append `--disable-cuda-graph`) lands
exactly as on a real launch. Everything else is lab/gpu/run.py: real ranks, real NCCL and CUDA, and
a real CUDA-graph capture hang (graph-capture) unless `--disable-cuda-graph` is given, in which
case nothing is captured and the server starts (its port answers /health). The ranks write to this
process's stdout and stderr, as SGLang's schedulers do. `--lab-scenario` is the lab's own flag.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

GPU_LAB = Path(__file__).resolve().parents[2]  # lab/gpu


def run_argv(argv: list[str] | None = None) -> list[str]:
    """lab/gpu/run.py's arguments for this SGLang-spelled command line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lab-scenario", default="graph-capture", help="the lab scenario (lab/gpu/run.py)")
    parser.add_argument("--model-path", default="lab/gpu-tiny")
    parser.add_argument("--tp-size", "--tp", dest="tp_size", type=int, default=2, choices=(1, 2))
    parser.add_argument("--host", default="127.0.0.1", help="the serving host (HTTP)")
    parser.add_argument("--port", type=int, default=30000, help="the serving port (HTTP): /health, /ready")
    parser.add_argument("--nccl-port", type=int, default=29650, help="the torch.distributed TCPStore port")
    parser.add_argument("--disable-cuda-graph", action="store_true", help="capture no CUDA graph (SGLang's flag)")
    parser.add_argument("--onset-file")
    parser.add_argument("--hold", type=float, default=600.0)
    args = parser.parse_args(argv)
    out = [args.lab_scenario, "--log", "-", "--model-path", args.model_path, "--tp-size", str(args.tp_size),
           "--port", str(args.nccl_port), "--http-host", args.host, "--http-port", str(args.port),
           "--hold", str(args.hold)]
    if args.onset_file:
        out += ["--onset-file", args.onset_file]
    if args.disable_cuda_graph:
        out.append("--disable-cuda-graph")
    return out


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(GPU_LAB))
    import run  # lab/gpu/run.py

    return run.main(run_argv(argv))


if __name__ == "__main__":
    sys.exit(main())
