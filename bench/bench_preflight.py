"""How long `hangwatch preflight` takes on this host, in-process and as the command.

    .venv/bin/python bench/bench_preflight.py [--repeat 5] [--python PATH]

Times `run_preflight` (read the host, the launch's package versions through its Python, NVML,
evaluate the checks) for a TP=2 SGLang command over the lab's tiny model, and the whole
`hangwatch preflight --json` command (interpreter start-up included). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from hangwatch.cli.preflight_run import run_preflight

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--python", default=os.environ.get("HANGWATCH_LAB_PYTHON") or sys.executable,
                        help="the launch's Python (its package metadata is read)")  # fmt: skip
    args = parser.parse_args()
    cmd = [args.python, "-m", "sglang.launch_server", "--model-path", str(ROOT / "lab" / ".work" / "tiny-llama"), "--tp", "2"]
    inproc = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        report, _ = run_preflight(cmd, os.environ)
        inproc.append(time.perf_counter() - start)
    whole = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "hangwatch", "preflight", "--json", "--", *cmd], capture_output=True, check=False, timeout=120)
        whole.append(time.perf_counter() - start)
    print(f"checks: {len(report.checked)} checked, {len(report.skipped)} skipped, {len(report.findings)} findings")
    print(f"run_preflight: median {statistics.median(inproc):.2f} s (min {min(inproc):.2f}, max {max(inproc):.2f}) over {args.repeat}")
    print(f"hangwatch preflight --json: median {statistics.median(whole):.2f} s (min {min(whole):.2f}, max {max(whole):.2f})")


if __name__ == "__main__":
    main()
