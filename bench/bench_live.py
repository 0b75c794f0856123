"""Figures for the live watcher (printed, never asserted).

    python bench/bench_live.py [--quick] [--lab SCENARIO,...]

1. one evidence snapshot of 8 Python processes (py-spy stacks in parallel): time
2. a healthy, CPU-bound ranked process watched by `hangwatch attach`: work rate with / without
3. hangwatch's own RSS and CPU while it watches that process (~30 s)
4. start on an existing 1 GiB log (sparse, real lines at its end): time to the first verdict
5. with the lab (real SGLang or vLLM on CPU): time from a hang's onset (the lab's onset file) to
   the right verdict (the scenario's state and cause, RIGHT below), median over the scenarios
   given with --lab, e.g. --lab weights-fifo,vllm-weights-fifo,vllm-master-port-taken
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from helpers.livetools import Procs, wait_for_text  # noqa: E402

HANGWATCH = str(Path(sys.executable).parent / "hangwatch")
SLEEPER = "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); s.accept()"


def snapshot_of_eight(tmp: Path) -> None:
    from hangwatch.sources.pyspy import dump_many
    from hangwatch.watch.gather import find_pyspy

    procs = Procs()
    try:
        children = [procs.start([sys.executable, "-c", SLEEPER]) for _ in range(8)]
        time.sleep(1.0)
        targets = [(p.pid, f"TP{i}") for i, p in enumerate(children)]
        dump_many(targets, pyspy=find_pyspy())  # warm the page cache for py-spy itself
        times = []
        for _ in range(5):
            started = time.perf_counter()
            dumps, missing = dump_many(targets, pyspy=find_pyspy())
            times.append(time.perf_counter() - started)
        print(f"1. stacks of 8 processes in parallel: median {statistics.median(times) * 1000:.0f} ms "
              f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}; {len(dumps)} dumped, {len(missing)} missing)")
    finally:
        procs.stop()


def _last_rate_line(rate_file: Path) -> tuple[float, int]:
    t, units = rate_file.read_text().strip().splitlines()[-1].split()
    return float(t), int(units)


def _rate_between(a: tuple[float, int], b: tuple[float, int]) -> float:
    return (b[1] - a[1]) / (b[0] - a[0])


def watched_overhead(tmp: Path, seconds: float) -> None:
    """Rate alone, watched, alone again: the two alone windows bracket the load of the host."""
    procs = Procs()
    rate_file = tmp / "rate.txt"
    try:
        log = tmp / "spin.log"
        server = procs.server("spin", log, HW_RATE_FILE=str(rate_file))
        wait_for_text(log, "fired up")
        time.sleep(2.0)
        before = _window_rate(rate_file, seconds / 2)
        watch = procs.hangwatch(["attach", str(server.pid), "--json"], stdout=subprocess.DEVNULL)
        time.sleep(2.0)  # past start-up: measure the steady state
        watched, cpu, rss = _watched_window(rate_file, psutil.Process(watch.pid), seconds)
        watch.send_signal(signal.SIGINT)
        watch.wait(timeout=10)
        after = _window_rate(rate_file, seconds / 2)
        alone = (before + after) / 2
        print(f"2. CPU-bound rank's work rate watched / alone: {watched / alone:.3f} "
              f"({watched:.0f} vs {before:.0f} before, {after:.0f} after; load average {os.getloadavg()[0]:.1f})")
        print(f"3. hangwatch attach over {seconds:.0f}s: {cpu * 100:.1f}% of one core (py-spy and ss included), "
              f"RSS {rss:.0f} MiB (max)")
    finally:
        procs.stop()


def _window_rate(rate_file: Path, seconds: float) -> float:
    a = _last_rate_line(rate_file)
    time.sleep(seconds)
    return _rate_between(a, _last_rate_line(rate_file))


def _watched_window(rate_file: Path, me: psutil.Process, seconds: float) -> tuple[float, float, float]:
    """(work rate, hangwatch's CPU share incl. reaped children, its max RSS MiB) over `seconds`."""
    cpu0, wall0, rss = sum(me.cpu_times()), time.monotonic(), 0.0
    a = _last_rate_line(rate_file)
    while time.monotonic() - wall0 < seconds:
        rss = max(rss, me.memory_info().rss / 2**20)
        time.sleep(0.5)
    cpu = (sum(me.cpu_times()) - cpu0) / (time.monotonic() - wall0)
    return _rate_between(a, _last_rate_line(rate_file)), cpu, rss


def big_log_first_verdict(tmp: Path) -> None:
    procs = Procs()
    big = tmp / "big.log"
    try:
        log = tmp / "healthy.log"
        server = procs.server("healthy", log)
        wait_for_text(log, "fired up")
        with open(big, "wb") as fh:
            fh.truncate(1 << 30)  # a 1 GiB hole: size without disk
            fh.seek(1 << 30)
            line = b"[2026-11-30 10:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 8, #cached-token: 0\n"
            fh.write(log.read_bytes() + line * (2 * 2**20 // len(line)))
        started = time.perf_counter()
        watch = procs.hangwatch(["attach", str(server.pid), "--log", str(big), "--json", "--exit-on", "ready,stalled,crashed,starting,progressing"])
        first = watch.stdout.readline()
        elapsed = time.perf_counter() - started
        state = json.loads(first)["state"] if first else "none"
        print(f"4. first verdict on a {big.stat().st_size / 2**30:.1f} GiB log: {elapsed:.2f} s from process start ({state})")
        _in_process_first_tick(server.pid, big)
    finally:
        procs.stop()
        big.unlink(missing_ok=True)


def _in_process_first_tick(pid: int, big: Path) -> None:
    from hangwatch.classify import load_rules
    from hangwatch.sources.discover import discover
    from hangwatch.watch import WatchConfig, Watcher

    rules = load_rules()
    started = time.perf_counter()
    watcher = Watcher(discover(pid), rules, WatchConfig(log_path=str(big)))
    _, verdict = watcher.tick()
    elapsed = time.perf_counter() - started
    print(f"   in process (rules loaded): discover + first tick {elapsed * 1000:.0f} ms, "
          f"{len(watcher.log.lines)} lines read, {verdict.state.value}")
    ticks = []
    for _ in range(5):
        t0 = time.perf_counter()
        watcher.tick()
        ticks.append(time.perf_counter() - t0)
    print(f"   a steady tick over {len(watcher.log.lines)} lines: median {statistics.median(ticks) * 1000:.1f} ms")
    watcher.close()


# scenario -> (states that are right, the right cause); the same as tests/integration/test_*lab.py
RIGHT: dict[str, tuple[tuple[str, ...], str]] = {
    "two-node-missing": (("stalled",), "multinode_rendezvous"),
    "weights-fifo": (("stalled",), "weight_loading_io"),
    "tp2-one-rank-loading": (("stalled",), "weight_loading_io"),
    "rank-killed": (("stalled",), "multinode_rendezvous"),
    "hs-dump-patch": (("stalled",), "patch_or_user_code"),
    "port-taken": (("stalled",), "port_in_use"),
    "vllm-two-node-missing": (("stalled",), "multinode_rendezvous"),
    "vllm-weights-fifo": (("stalled",), "weight_loading_io"),
    "vllm-warmup-blocked": (("stalled",), "patch_or_user_code"),
    "vllm-master-port-taken": (("stalled", "crashed"), "port_in_use"),
    "vllm-worker-killed": (("stalled", "crashed"), "dead_rank"),
}


def lab_onset_to_stalled(scenarios: list[str], tmp: Path) -> None:
    delays = []
    for name in scenarios:
        env_name, venv, script = (("HANGWATCH_VLLM_PYTHON", ".vllm-venv", "lab/install_vllm.sh") if name.startswith("vllm-")
                                  else ("HANGWATCH_LAB_PYTHON", ".lab-venv", "lab/install.sh"))
        if not Path(os.environ.get(env_name) or ROOT / venv / "bin" / "python").exists():
            print(f"   {name}: lab not installed ({script}); skipped")
            continue
        delay, verdict = _one_lab_run(name, tmp)
        right = RIGHT.get(name, (("stalled",), None))
        print(f"   {name}: " + (f"{delay:.1f} s from onset to {verdict}" if delay is not None
                                 else f"no right verdict ({'/'.join(right[0])} {right[1]}); last {verdict}"))
        if delay is not None:
            delays.append(delay)
    if delays:
        print(f"5. lab onset -> right verdict: median {statistics.median(delays):.1f} s over {len(delays)} scenarios "
              f"(load average {os.getloadavg()[0]:.1f})")


def _one_lab_run(name: str, tmp: Path) -> tuple[float | None, str]:
    """(seconds from the onset to the first right verdict, that verdict as `state cause`)."""
    onset = tmp / f"{name}.onset.json"
    lab = subprocess.Popen([sys.executable, str(ROOT / "lab" / "run.py"), name, "--onset-file", str(onset), "--hold", "900"],
                           stdout=subprocess.PIPE, text=True, start_new_session=True)
    states, cause = RIGHT.get(name, (("stalled",), None))
    try:
        assert lab.stdout is not None
        header = json.loads(lab.stdout.readline())
        watch = subprocess.run([HANGWATCH, "attach", str(header["pid"]), "--json", "--exit-on", "stalled,crashed,ready", "--timeout", "800"],
                               capture_output=True, text=True, timeout=860)
        exited_at = time.time()
        lines = [json.loads(line) for line in watch.stdout.splitlines() if line.strip()]
        if not lines:
            return None, "no verdict"
        last = lines[-1]
        right = next((v for v in lines if v["state"] in states and (cause is None or v["cause"] == cause)), None)
        if right is None or not onset.exists():
            return None, f"{last['state']} {last.get('cause')}"
        # attach exits right after its last verdict: that fixes the wall time of every line's `t`
        right_at = exited_at - (float(last["t"]) - float(right["t"]))
        return right_at - float(json.loads(onset.read_text())["t"]), f"{right['state']} {right.get('cause')}"
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        lab.wait(timeout=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="shorter measurements")
    parser.add_argument("--lab", default="", help="comma-separated lab scenarios for figure 5")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hangwatch-bench-") as tmp:
        snapshot_of_eight(Path(tmp))
        watched_overhead(Path(tmp), 10.0 if args.quick else 30.0)
        big_log_first_verdict(Path(tmp))
        if args.lab:
            lab_onset_to_stalled([s for s in args.lab.split(",") if s], Path(tmp))


if __name__ == "__main__":
    main()
