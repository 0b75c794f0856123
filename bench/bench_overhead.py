"""What watching costs the watched server (issue 25; printed, never asserted).

    python bench/bench_overhead.py [--pairs 12] [--window 5] [--workloads cpu,alloc] [--attribution 30]

The workload is the test server (tests/integration/programs: a launcher and two ranks titled
`sglang::scheduler_TP0/1`, as SGLang titles them) once ready, its rank 0 busy for good and appending
its work units per second to a file: `cpu` computes in Python, `alloc` maps, fills and frees 8 MiB
per unit (page faults and munmap: what /proc reads and py-spy's memory reads contend with).

One `hangwatch attach PID --json` runs per configuration; it is paused (SIGSTOP) for the `alone`
windows and resumed (SIGCONT) for the `watched` ones, so no window holds its start-up. Each pair is
one alone and one watched window of WINDOW s, their order alternating pair by pair (a drift in the
host's load falls on both sides). The ratio per pair is the time per work unit watched over alone
(1.01: the rank took 1 % longer watched), and the same of the rank's own CPU time per unit (on a
loaded host the steadier one); printed as median, min and max over the pairs.

Configurations: Python stacks on (py-spy, the default) and off (`HANGWATCH_PYSPY` naming no
program: the stacks rung is reported missing); the native rung is allowed in both (the default
`--native`: it runs only for a server that looks stalled, so not for this ready one).

--attribution S: a Watcher in this process watches the same server for S ticks of 1 s, and the CPU
of each source (this thread's CPU time plus the children it waited for: `ss`, py-spy) is printed
per tick, before the pairs.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from helpers.livetools import Procs, wait_for_text  # noqa: E402

HANGWATCH = str(Path(sys.executable).parent / "hangwatch")


def _rate_line(rate_file: Path) -> tuple[float, int]:
    t, units = rate_file.read_text().strip().splitlines()[-1].split()
    return float(t), int(units)


def _window(rate_file: Path, rank: psutil.Process, seconds: float) -> tuple[float, float]:
    """(wall seconds, the rank's CPU seconds) per work unit over about `seconds`, between two of
    the rank's own reports. CPU time per unit is not moved by how often the host's scheduler runs
    the rank, only by what watching costs it (its caches, its memory map's lock): on a loaded
    host it is the steadier figure of the two."""
    time.sleep(1.05)  # a report written after this window began
    a, cpu_a = _rate_line(rate_file), sum(rank.cpu_times()[:2])
    time.sleep(seconds)
    b, cpu_b = _rate_line(rate_file), sum(rank.cpu_times()[:2])
    units = max(1, b[1] - a[1])
    return (b[0] - a[0]) / units, (cpu_b - cpu_a) / units


def pairs(server_pid: int, rank: psutil.Process, rate_file: Path, *, stacks: bool, n: int, window: float) -> dict[str, Any]:
    env = dict(os.environ)
    if not stacks:
        env["HANGWATCH_PYSPY"] = "/nonexistent/py-spy"
    watch = subprocess.Popen([HANGWATCH, "attach", str(server_pid), "--json"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(watch.stdout.readline, b"")), daemon=True)  # type: ignore[union-attr, arg-type]
    reader.start()
    me = psutil.Process(watch.pid)
    try:
        deadline = time.monotonic() + 120
        while not lines and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3.0)  # past the first ticks: the steady state a sidecar lives in
        ratios, cpu_ratios, cpu_watched, wall_watched = [], [], 0.0, 0.0
        for i in range(n):
            order = ("alone", "watched") if i % 2 == 0 else ("watched", "alone")
            per_unit = {}
            for side in order:
                if side == "alone":
                    os.kill(watch.pid, signal.SIGSTOP)
                    per_unit[side] = _window(rate_file, rank, window)
                    os.kill(watch.pid, signal.SIGCONT)
                else:
                    cpu0, t0 = _cpu(me), time.monotonic()
                    per_unit[side] = _window(rate_file, rank, window)
                    cpu_watched += _cpu(me) - cpu0
                    wall_watched += time.monotonic() - t0
            ratios.append(per_unit["watched"][0] / per_unit["alone"][0])
            cpu_ratios.append(per_unit["watched"][1] / per_unit["alone"][1])
        state = lines[-1].decode().split('"state": "', 1)[-1].split('"', 1)[0] if lines else "none"
        return {"ratios": ratios, "cpu_ratios": cpu_ratios, "cpu": cpu_watched / wall_watched, "state": state}
    finally:
        try:
            os.kill(watch.pid, signal.SIGCONT)
            os.killpg(watch.pid, signal.SIGINT)
            watch.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(watch.pid, signal.SIGKILL)


def _cpu(proc: psutil.Process) -> float:
    """CPU seconds of hangwatch and its children (py-spy, ss), reaped ones included."""
    times = proc.cpu_times()
    return times.user + times.system + times.children_user + times.children_system + sum(
        sum(c.cpu_times()[:2]) for c in _children(proc))


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.Error:
        return []


def attribution(server_pid: int, ticks: int) -> None:
    from hangwatch.classify import load_rules
    from hangwatch.sources.discover import discover
    from hangwatch.watch import WatchConfig, Watcher

    watcher = Watcher(discover(server_pid), load_rules(), WatchConfig())
    cost: dict[str, float] = {}

    def wrap(obj: Any, name: str, key: str) -> None:
        inner = getattr(obj, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0, c0 = time.thread_time(), _children_cpu()
            try:
                return inner(*args, **kwargs)
            finally:
                cost[key] = cost.get(key, 0.0) + time.thread_time() - t0 + _children_cpu() - c0

        setattr(obj, name, timed)

    for name, key in (("read_log", "log read"), ("read_procs", "/proc (process tree)"), ("read_ports", "ports (ss)"),
                      ("read_gpus", "NVML"), ("dump", "py-spy stacks"), ("read_health", "health endpoint")):
        wrap(watcher.sources, name, key)
    wrap(watcher, "_decide", "classify")
    wrap(watcher, "_observe", "observe")
    self0, kids0, began = _self_cpu(), _children_cpu(), time.monotonic()
    for _ in range(ticks):
        t0 = time.monotonic()
        _, verdict = watcher.tick()
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
    wall = time.monotonic() - began
    total = _self_cpu() - self0 + _children_cpu() - kids0
    watcher.close()
    print(f"where the cost comes from ({ticks} ticks in process, verdict {verdict.state.value}): "
          f"{total / wall * 100:.2f} % of one core in all")
    for key, value in sorted(cost.items(), key=lambda kv: -kv[1]):
        print(f"   {key:22s} {value / ticks * 1000:6.2f} ms per tick ({value / total * 100:4.1f} %)")


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=12)
    parser.add_argument("--window", type=float, default=5.0)
    parser.add_argument("--workloads", default="cpu,alloc")
    parser.add_argument("--attribution", type=int, default=30, help="ticks (0: none)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hw-bench-overhead-") as tmp_name:
        tmp = Path(tmp_name)
        for kind in args.workloads.split(","):
            procs = Procs()
            try:
                rate_file = tmp / f"rate-{kind}.txt"
                log = tmp / f"spin-{kind}.log"
                server = procs.server("spin", log, HW_RATE_FILE=str(rate_file), HW_SPIN_KIND=kind)
                wait_for_text(log, "fired up")
                time.sleep(2.0)
                if args.attribution and kind == "cpu":
                    attribution(server.pid, args.attribution)
                rank = next(p for p in psutil.Process(server.pid).children(recursive=True)
                            if "scheduler_TP0" in " ".join(p.cmdline()))
                for stacks in (True, False):
                    found = pairs(server.pid, rank, rate_file, stacks=stacks, n=args.pairs, window=args.window)
                    r, c = found["ratios"], found["cpu_ratios"]
                    print(f"{kind} rank, Python stacks {'on ' if stacks else 'off'} (native rung allowed), {len(r)} pairs of "
                          f"{args.window:.0f} s: watched/alone time per unit median {statistics.median(r):.3f} (min {min(r):.3f}, "
                          f"max {max(r):.3f}); the rank's CPU per unit median {statistics.median(c):.3f} (min {min(c):.3f}, "
                          f"max {max(c):.3f}); hangwatch {found['cpu'] * 100:.2f} % of one core, py-spy and ss included; "
                          f"verdict {found['state']}; load average {os.getloadavg()[0]:.1f}", flush=True)
            finally:
                procs.stop()


if __name__ == "__main__":
    main()
