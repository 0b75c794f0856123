"""Figures for the live watcher (printed, never asserted).

    python bench/bench_live.py [--quick] [--lab SCENARIO,...]

1. one evidence snapshot of 8 Python processes (py-spy stacks in parallel): time
2. a healthy, CPU-bound ranked process watched by `hangwatch attach`: work rate with / without
3. hangwatch's own RSS and CPU while it watches that process (~30 s)
4. start on an existing 1 GiB log (sparse, real lines at its end): time to the first verdict
5. with the lab (real SGLang or vLLM on CPU): time from a hang's onset (the lab's onset file) to
   the right verdict (the scenario's state and cause, lab/expected.py), median over the scenarios
   given with --lab, e.g. --lab weights-fifo,vllm-weights-fifo,vllm-master-port-taken
6. with --repeat N (issue 10): each --lab scenario N times, then N times again with a history file
   that healthy starts filled first (learned budgets); per scenario and pass: onset -> right
   verdict (median, max), flaps (a published `stalled` followed by `starting`/`progressing`),
   whether all N final verdicts agree and the final blocker is named where one rank holds the
   others; then the pass's median and max and the scenarios off target.
   `--lab all` is every lab scenario whose lab is installed (`sglang`, `vllm`: one engine's).
       python bench/bench_live.py --lab-only --lab all --repeat 5
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
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from helpers.livetools import Procs, wait_for_text  # noqa: E402
from lab.expected import EXPECTED, is_right  # noqa: E402

HANGWATCH = str(Path(sys.executable).parent / "hangwatch")
SLEEPER = "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); s.accept()"


def snapshot_of_eight(tmp: Path) -> None:
    from hangwatch.sources.pyspy import dump_many
    from hangwatch.watch.livesources import find_pyspy

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
          f"{len(watcher.log.ring.lines)} lines read, {verdict.state.value}")
    ticks = []
    for _ in range(5):
        t0 = time.perf_counter()
        watcher.tick()
        ticks.append(time.perf_counter() - t0)
    print(f"   a steady tick over {len(watcher.log.ring.lines)} lines: median {statistics.median(ticks) * 1000:.1f} ms")
    watcher.close()


def lab_onset_to_stalled(scenarios: list[str], tmp: Path) -> None:
    delays = []
    for name in scenarios:
        delay, verdict = _one_lab_run(name, tmp)
        want = EXPECTED[name]
        print(f"   {name}: " + (f"{delay:.1f} s from onset to {verdict}" if delay is not None
                                 else f"no right verdict ({'/'.join(want.states)} {want.cause}); last {verdict}"))
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
        right = next((v for v in lines if is_right(name, v)), None)
        if right is None or not onset.exists():
            return None, f"{last['state']} {last.get('cause')}"
        # attach exits right after its last verdict: that fixes the wall time of every line's `t`
        right_at = exited_at - (float(last["t"]) - float(right["t"]))
        return right_at - float(json.loads(onset.read_text())["t"]), f"{right['state']} {right.get('cause')}"
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        lab.wait(timeout=90)


class _Stream:
    """`hangwatch attach --json` read line by line, each verdict stamped with the wall time it came."""

    def __init__(self, args: list[str], stderr: Path) -> None:
        import threading

        with stderr.open("w") as err:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)
        self.lines: list[tuple[float, dict]] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.lines.append((time.time(), json.loads(line)))

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._thread.join(5)


def _flaps(lines: list[tuple[float, dict]], onset: float | None, ends_after_s: float | None) -> tuple[int, int]:
    """(flaps, early stalls). A flap: after the hang's onset (and before the lab ends it, if it
    does), a published `stalled` followed by `starting`/`progressing` (the server cannot have
    moved). An early stall: `stalled` published before the onset (a slow start called stuck)."""
    until = float("inf") if onset is None or ends_after_s is None else onset + ends_after_s
    after = [v["state"] for at, v in lines if onset is not None and onset <= at < until]
    flaps = sum(1 for a, b in zip(after, after[1:], strict=False) if a == "stalled" and b in ("starting", "progressing"))
    early = sum(1 for at, v in lines if v["state"] == "stalled" and (onset is None or at < onset))
    return flaps, early


def _lab_run(name: str, tmp: Path, history: Path | None, after_s: float, limit_s: float) -> dict:
    stamp = time.time_ns()
    # a hang is timed from its onset; a start that recovers, from the lab's `ready` (the server answers)
    event = "ready" if EXPECTED[name].recovers else "onset"
    onset_file = tmp / f"{name}.{stamp}.{event}.json"
    lab = subprocess.Popen([sys.executable, str(ROOT / "lab" / "run.py"), name, f"--{event}-file", str(onset_file),
                            "--hold", str(int(limit_s + 120))], stdout=subprocess.PIPE, text=True, start_new_session=True)
    out: dict = {"delay": None, "flaps": 0, "early": 0, "final": None, "blocker": None}
    watch = None
    try:
        assert lab.stdout is not None
        header = json.loads(lab.stdout.readline())
        args = [HANGWATCH, "attach", str(header["pid"]), "--json"]
        args += ["--history", str(history)] if history else ["--no-learn"]
        watch = _Stream(args, tmp / f"{name}.{stamp}.attach.err")
        deadline, right_at = time.time() + limit_s, None
        while time.time() < deadline and watch.proc.poll() is None:
            time.sleep(0.5)
            found = next((at for at, v in watch.lines if is_right(name, v)), None)
            right_at = right_at or found
            # watched past the right verdict and past the onset (a right verdict may precede it)
            if right_at and onset_file.exists() and time.time() > max(right_at, _onset_time(onset_file, lab) or 0) + after_s:
                break
        watch.stop()
        lines = watch.lines
        with (tmp / f"{name}.{stamp}.lines.jsonl").open("w") as out_lines:  # kept with --keep
            out_lines.writelines(json.dumps({"arrived": at, **verdict}) + "\n" for at, verdict in lines)
        onset = _onset_time(onset_file, lab) if event == "onset" else None
        out["flaps"], out["early"] = _flaps(lines, onset, EXPECTED[name].ends_after_s)
        if EXPECTED[name].known_before_onset:
            out["early"] = 0
        out["final"] = f"{lines[-1][1]['state']} {lines[-1][1].get('cause')}" if lines else "no verdict"
        stalled = [v for _, v in lines if v.get("blocker")]
        out["blocker"] = stalled[-1]["blocker"] if stalled else None
        onset = _onset_time(onset_file, lab)
        if right_at is not None and onset is not None:
            out["delay"] = max(0.0, right_at - onset)
    finally:
        if watch is not None and watch.proc.poll() is None:
            watch.stop()
        try:
            os.killpg(lab.pid, signal.SIGTERM)
            lab.wait(timeout=60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(lab.pid, signal.SIGKILL)
        if lab.stdout is not None:  # the lab's events (launched, onset, ready, exited, error)
            (tmp / f"{name}.{stamp}.lab.jsonl").write_text(lab.stdout.read())
    return out


def _onset_time(onset_file: Path, lab: subprocess.Popen) -> float | None:
    """The onset event's time; a --ready-file holds only the word "ready": its mtime then."""
    if not onset_file.exists():
        return None
    try:
        return float(json.loads(onset_file.read_text())["t"])
    except (ValueError, KeyError, TypeError):
        return onset_file.stat().st_mtime


def lab_repeated(scenarios: list[str], runs: int, tmp: Path, after_s: float, limit_s: float, passes: str = "both") -> None:
    summary: dict[str, list[str]] = {"no history": [], "with history": []}
    all_delays: dict[str, list[float]] = {"no history": [], "with history": []}
    chosen = [(label, history) for label, history in (("no history", None), ("with history", tmp / "history.sqlite"))
              if passes == "both" or passes == label.replace(" ", "-")]
    for label, history in chosen:
        if history is not None:  # ready starts of each engine and TP size measured, to learn from
            engines = {name.startswith("vllm-") for name in scenarios}
            for healthy in [n for n in EXPECTED if n.removeprefix("vllm-").startswith("healthy") and n.startswith("vllm-") in engines]:
                _lab_run(healthy, tmp, history, after_s=1.0, limit_s=limit_s)
        for name in scenarios:
            # a start that reached ready has nothing left to flap: a few seconds after it do
            watched = min(after_s, 3.0) if EXPECTED[name].recovers else after_s
            results = [_lab_run(name, tmp, history, watched, limit_s) for _ in range(runs)]
            delays = [r["delay"] for r in results if r["delay"] is not None]
            all_delays[label] += delays
            finals = {r["final"] for r in results}
            blockers = {f"{b['rank'] or 'a process (pid)'}: {b['waits_on'][:60]}" for r in results if (b := r["blocker"])}
            want = EXPECTED[name].blocker
            named = sum(1 for r in results if r["blocker"] and r["blocker"]["rank"] == want) if want else None
            flaps = sum(r["flaps"] for r in results)
            timing = (f"onset -> right verdict median {statistics.median(delays):.1f} s, max {max(delays):.1f} s"
                      if delays else "no right verdict")
            print(f"6. {name} ({label}, {runs} runs): {timing}; right in {len(delays)}/{runs}; "
                  f"flaps {flaps}; early stalls {sum(r['early'] for r in results)}; final verdicts agree: {'yes' if len(finals) == 1 else 'no'} "
                  f"({'; '.join(sorted(str(f) for f in finals))}); blocker: {'; '.join(sorted(blockers)) or '-'}"
                  + (f" ({want} named in {named}/{runs})" if want else "")
                  + f" (load average {os.getloadavg()[0]:.1f})", flush=True)
            if flaps or len(delays) < runs or len(finals) > 1 or (named is not None and named < runs):
                summary[label].append(name)
    for label, delays in all_delays.items():
        if delays:
            print(f"6. {label}: onset -> right verdict median {statistics.median(delays):.1f} s, max {max(delays):.1f} s "
                  f"over {len(delays)} runs of {len(scenarios)} scenarios; off target (a flap, a wrong or disagreeing "
                  f"verdict, the blocker not named): {', '.join(summary[label]) or 'none'}")


def _installed(name: str) -> bool:
    env_name, venv, script = (("HANGWATCH_VLLM_PYTHON", ".vllm-venv", "lab/install_vllm.sh") if name.startswith("vllm-")
                              else ("HANGWATCH_LAB_PYTHON", ".lab-venv", "lab/install.sh"))
    if Path(os.environ.get(env_name) or ROOT / venv / "bin" / "python").exists():
        return True
    print(f"   {name}: lab not installed ({script}); skipped")
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="shorter measurements")
    parser.add_argument("--lab", default="", help="comma-separated lab scenarios for figures 5 and 6, or all, sglang, vllm")
    parser.add_argument("--repeat", type=int, default=0, help="figure 6: runs per scenario and pass")
    parser.add_argument("--lab-only", action="store_true", help="only the lab figures")
    parser.add_argument("--watch-after", type=float, default=30.0, help="figure 6: seconds watched after the right verdict (flaps)")
    parser.add_argument("--limit", type=float, default=400.0, help="figure 6: seconds one run may take")
    parser.add_argument("--keep", help="figure 6: keep each run's verdict lines, onset and errors in this folder")
    parser.add_argument("--pass", dest="passes", choices=("both", "no-history", "with-history"), default="both",
                        help="figure 6: which passes to run")
    args = parser.parse_args()
    wanted = {"all": list(EXPECTED), "sglang": [n for n in EXPECTED if not n.startswith("vllm-")],
              "vllm": [n for n in EXPECTED if n.startswith("vllm-")]}.get(args.lab, [s for s in args.lab.split(",") if s])
    unknown = [s for s in wanted if s not in EXPECTED]
    if unknown:
        parser.error(f"no such lab scenario: {', '.join(unknown)} (known: {', '.join(EXPECTED)})")
    scenarios = [s for s in wanted if _installed(s)]
    with tempfile.TemporaryDirectory(prefix="hangwatch-bench-") as scratch:
        tmp = args.keep or scratch
        Path(tmp).mkdir(parents=True, exist_ok=True)
        if not args.lab_only:
            snapshot_of_eight(Path(tmp))
            watched_overhead(Path(tmp), 10.0 if args.quick else 30.0)
            big_log_first_verdict(Path(tmp))
        if scenarios and not args.repeat:
            lab_onset_to_stalled(scenarios, Path(tmp))
        if scenarios and args.repeat:
            lab_repeated(scenarios, args.repeat, Path(tmp), args.watch_after, args.limit, args.passes)


if __name__ == "__main__":
    main()
