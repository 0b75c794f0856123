"""What finding the log behind a pipe costs: `find_log` on a writer behind `| grep | tee FILE`.

    .venv/bin/python bench/bench_logfind.py [--repeat 20]

Discovery runs once per attach (and `collect`): it reads every visible process's fd links and
fdinfo to find the pipe's reader, so it scales with the processes and fds on the host. Prints the
process count and the time per call; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from hangwatch.sources.logfind import find_log


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        shell = subprocess.Popen(["sh", "-c", f"sleep 120 2>&1 | grep --line-buffered . | tee {log}"],
                                 stdout=subprocess.DEVNULL, start_new_session=True)
        try:
            time.sleep(0.5)
            writer = int(subprocess.run(["pgrep", "-g", str(shell.pid), "-x", "sleep"], capture_output=True,
                                        text=True, check=True).stdout.split()[0])
            times = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                found = find_log(writer)
                times.append(time.perf_counter() - started)
            processes = sum(1 for name in os.listdir("/proc") if name.isdigit())
            print(f"find_log: {found.via}")
            print(f"{processes} processes visible; per call: median {statistics.median(times) * 1000:.1f} ms, "
                  f"max {max(times) * 1000:.1f} ms over {args.repeat}")
        finally:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait(timeout=10)


if __name__ == "__main__":
    main()
