"""Watch-loop tick rate while the log holds thousands of 4 KB lines (probe L8).

    .venv/bin/python bench/bench_long_lines.py [LINES]

Starts the test server (tests/integration/programs, stalled in rank 0's rendezvous), attaches
`hangwatch attach --serve`, measures ticks/s for 6 s, appends LINES lines of 4 KB (a config dump),
and measures ticks/s again over 20 s plus hangwatch's CPU share. Prints the figures; asserts nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from helpers.livetools import Procs, _env, free_port, server_cmd, wait_for_text  # noqa: E402


def wait_ticking(port: int, within: float = 120.0) -> None:
    deadline = time.monotonic() + within
    while True:
        try:
            if ticks(port) > 0:
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def ticks(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as response:
        return int(json.loads(response.read())["ticks"])


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rate(port: int, pid: int, seconds: float) -> tuple[float, float]:
    a, c, t = ticks(port), cpu_s(pid), time.monotonic()
    time.sleep(seconds)
    b, d, u = ticks(port), cpu_s(pid), time.monotonic()
    return (b - a) / (u - t), (d - c) / (u - t)


def main() -> None:
    lines = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    procs = Procs()
    try:
        work = Path(tempfile.mkdtemp(prefix="hw-bench-long-"))
        log = work / "server.log"
        with log.open("wb") as fh:
            server = procs.start(server_cmd(free_port()), stdout=fh, stderr=subprocess.STDOUT, env=_env(HW_MODE="tcpstore"))
        wait_for_text(log, "Init torch distributed begin")
        port = free_port()
        hw = procs.hangwatch(["attach", str(server.pid), "--serve", "--port", str(port), "--log", str(log), "--json"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"hangwatch pid {hw.pid}", file=sys.stderr, flush=True)  # for `py-spy dump --pid`
        wait_ticking(port)
        time.sleep(2)
        base, base_cpu = rate(port, hw.pid, 6)
        body = ", ".join(f"field_{i}={i * 7}" for i in range(400))[:4000]
        with log.open("a") as fh:
            for _ in range(lines):
                fh.write(f"[{time.strftime('%Y-%m-%d %H:%M:%S')} TP0] server_args=ServerArgs({body})\n")
        time.sleep(3)
        during, during_cpu = rate(port, hw.pid, 20)
        time.sleep(30)
        after, after_cpu = rate(port, hw.pid, 10)
        print(f"baseline: {base:.2f} ticks/s, {base_cpu:.0%} CPU")
        print(f"while {lines} lines of 4 KB are read: {during:.2f} ticks/s, {during_cpu:.0%} CPU (20 s)")
        print(f"once read (50 s later): {after:.2f} ticks/s, {after_cpu:.0%} CPU (10 s)")
    finally:
        procs.stop()
        signal.signal(signal.SIGINT, signal.SIG_DFL)


if __name__ == "__main__":
    main()
