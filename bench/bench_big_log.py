"""Figures for big logs (issue 25; printed, never asserted).

    python bench/bench_big_log.py [--sizes 1,10] [--burst-mb-s 60] [--burst-s 10] [--repeat 5]

1. first verdict on an existing log of 1 GiB and 10 GiB (sparse: a real start at its head, a hole,
   16 MiB of real serving lines at its end): `hangwatch attach PID --log BIG --json` from process
   start to its first verdict, and in process (rules loaded) discover + the first tick; with the
   phases it found (the start's, at the head) and the bytes it read.
2. a burst: a watched server's log gains BURST_MB_S MB/s for BURST_S s (serving lines, with a
   traceback and a phase line inside), then one phase line; the watch loop (1 tick/s, in process)
   sees that last line LAG s after it was written, and the traceback and the inner phase line
   were found (or the bytes skipped are said in `missing`).

The disk: each big file is sparse (a few MiB on disk) and deleted at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from helpers.livetools import Procs, wait_for_text  # noqa: E402

HANGWATCH = str(Path(sys.executable).parent / "hangwatch")
SERVING = (b"[2026-11-30 10:00:%02d TP0] Prefill batch. #new-seq: 1, #new-token: %d, #cached-token: 0, "
           b"token usage: 0.01, #running-req: 0, #queue-req: 0\n")
TRACEBACK = (b"[2026-11-30 10:05:00 TP1] Scheduler hit an exception: Traceback (most recent call last):\n"
             b'  File "/opt/sglang/srt/managers/scheduler.py", line 2714, in run_scheduler_process\n'
             b"    scheduler.event_loop_overlap()\n"
             b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
INNER_PHASE = b"[2026-11-30 10:05:01 TP0] Capture cuda graph begin. This can take up to several minutes.\n"
LAST_PHASE = b"[2026-11-30 10:05:02 TP0] Capture cuda graph end. Time elapsed: 1.00 s. mem usage=0.10 GB.\n"


def serving(nbytes: int) -> bytes:
    one = b"".join(SERVING % (i % 60, 8 + i % 97) for i in range(1000))
    return one * max(1, nbytes // len(one))


def make_big(path: Path, start: bytes, size: int) -> None:
    with open(path, "wb") as fh:
        fh.write(start)
        fh.truncate(size)  # a hole: size without disk
        fh.seek(size)
        fh.write(serving(16 << 20))  # real lines in the start tail and in the stretch searched before it


class Serving:
    """Appends a serving line to `path` every `every` s while running: the server a big log comes from,
    busy (its batch counters move: news, which ends the first look early)."""

    def __init__(self, path: Path, every: float = 0.05) -> None:
        self.path, self.every, self.stop = path, every, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        with open(self.path, "ab") as fh:
            while not self.stop.wait(self.every):
                fh.write(SERVING % (n % 60, 8 + n % 97))
                fh.flush()
                n += 1

    def __enter__(self) -> Serving:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)


def first_verdicts(pid: int, start: bytes, tmp: Path, gib: int, repeat: int, cli_runs: bool = True) -> None:
    from hangwatch.classify import load_rules
    from hangwatch.sources.discover import discover
    from hangwatch.watch import WatchConfig, Watcher

    big = tmp / f"big-{gib}.log"
    try:
        make_big(big, start, gib << 30)
        for serving in (True, False):
            cli = []
            for _ in range(repeat if cli_runs else 0):
                t0 = time.perf_counter()
                with Serving(big) if serving else contextlib.nullcontext():
                    out = subprocess.run([HANGWATCH, "attach", str(pid), "--log", str(big), "--json", "--exit-on",
                                          "ready,stalled,crashed,starting,progressing"], capture_output=True, timeout=120)
                cli.append(time.perf_counter() - t0)
                assert out.stdout.strip(), out.stderr.decode()[-500:]
            rules = load_rules()
            small = tmp / "start-only.log"
            small.write_bytes(start)
            inproc, look, reference, cpu = [], [], [], []
            for _ in range(repeat):
                for path, times in ((big, inproc), (small, reference)):
                    with Serving(path) if serving else contextlib.nullcontext():
                        t0, c0 = time.perf_counter(), time.process_time()
                        watcher = Watcher(discover(pid), rules, WatchConfig(log_path=str(path)))
                        looked = _timed(watcher, "_first_look")
                        _, verdict = watcher.tick()
                        times.append(time.perf_counter() - t0)
                        spent = time.process_time() - c0
                    if path == big:
                        cpu.append(spent)
                        look.append(looked[0])
                        phases = sorted({p.event.phase.value for p in watcher.log.ring.phases})
                        seen = watcher.sources.log_bytes_seen
                        state = verdict.state.value
                    watcher.close()
            small.unlink()
            from_start = f"{_spread(cli)} s from process start (`hangwatch attach`); " if cli else ""
            what = ("the server busy (a serving line every 50 ms: the first look ends at its first news)" if serving
                    else "the server quiet (nothing moves: the first look waits its whole 1 s, as `nothing moved` needs)")
            print(f"1. first verdict on a {gib} GiB log, {what}: {from_start}"
                  f"in process {_spread(inproc)} s (discover + first tick; of it the first look, its log read, seeks "
                  f"and skims included, {_spread(look)} s; this process's CPU for it {_spread(cpu)} s: what no load "
                  f"lengthens), the same on the {len(start) / 1024:.0f} KiB start alone "
                  f"{_spread(reference)} s; {state}, phases {', '.join(phases)}; {seen / 2**20:.1f} MiB read; "
                  f"load average {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        big.unlink(missing_ok=True)


def _timed(obj: Any, name: str) -> list[float]:
    """Wraps obj.name (bench instrumentation): its wall time lands in the list returned."""
    inner, spent = getattr(obj, name), [0.0]

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t0

    setattr(obj, name, timed)
    return spent


def burst(pid: int, start: bytes, tmp: Path, mb_s: float, seconds: float) -> None:
    from hangwatch.classify import load_rules
    from hangwatch.sources.discover import discover
    from hangwatch.watch import WatchConfig, Watcher

    log = tmp / "burst.log"
    log.write_bytes(start)
    watcher = Watcher(discover(pid), load_rules(), WatchConfig(log_path=str(log)))
    watcher.tick()
    stop, seen_at = threading.Event(), {}
    ticks: list[float] = []

    def loop() -> None:
        while not stop.is_set():
            t0 = time.monotonic()
            watcher.tick()
            ticks.append(time.monotonic() - t0)
            texts = {p.event.text for p in watcher.log.ring.phases}
            for name, line in (("inner", INNER_PHASE), ("last", LAST_PHASE)):
                if name not in seen_at and line.decode().rstrip("\n") in texts:
                    seen_at[name] = time.monotonic()
            if any(x.text.startswith("torch.OutOfMemoryError") for x in watcher.log.ring.lines) and "traceback" not in seen_at:
                seen_at["traceback"] = time.monotonic()
            stop.wait(max(0.0, 1.0 - (time.monotonic() - t0)))

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    block = serving(int(mb_s * 1e6 / 10))  # written 10 times a second
    written, began = 0, time.monotonic()
    with open(log, "ab") as fh:
        for n in range(int(seconds * 10)):
            fh.write(block)
            written += len(block)
            if n == int(seconds * 5):
                fh.write(TRACEBACK)
            if n == int(seconds * 8):
                fh.write(INNER_PHASE)
            fh.flush()
            time.sleep(max(0.0, began + (n + 1) / 10 - time.monotonic()))
        rate = written / (time.monotonic() - began) / 1e6
        fh.write(LAST_PHASE)
    wrote_last = time.monotonic()
    deadline = wrote_last + 120
    while "last" not in seen_at and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    thread.join(30)
    missing = {m.source: m.reason for m in watcher.sources.missing()}
    watcher.close()
    log.unlink(missing_ok=True)
    lag = f"{seen_at['last'] - wrote_last:.1f} s" if "last" in seen_at else "not within 120 s"
    print(f"2. burst of {written / 1e6:.0f} MB at {rate:.0f} MB/s for {seconds:.0f} s, then a phase line: seen {lag} after it "
          f"was written; traceback in the burst {'found' if 'traceback' in seen_at else 'NOT found'}, phase line in the "
          f"burst {'found' if 'inner' in seen_at else 'NOT found'}; tick median {statistics.median(ticks) * 1000:.0f} ms, "
          f"max {max(ticks) * 1000:.0f} ms; skipped: {missing.get('log_burst', 'none')}; load average {os.getloadavg()[0]:.1f}")


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,10", help="GiB, comma-separated")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--burst-mb-s", type=float, default=60.0)
    parser.add_argument("--burst-s", type=float, default=10.0)
    parser.add_argument("--no-burst", action="store_true")
    parser.add_argument("--no-cli", action="store_true", help="time the first verdict in process only")
    args = parser.parse_args()
    procs = Procs()
    with tempfile.TemporaryDirectory(prefix="hw-bench-big-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            log = tmp / "healthy.log"
            server = procs.server("healthy", log)
            wait_for_text(log, "fired up")
            start = log.read_bytes()
            for gib in (int(s) for s in args.sizes.split(",") if s):
                first_verdicts(server.pid, start, tmp, gib, args.repeat, not args.no_cli)
            if not args.no_burst:
                burst(server.pid, start, tmp, args.burst_mb_s, args.burst_s)
        finally:
            procs.stop()


if __name__ == "__main__":
    main()
