"""A daemon that lives for weeks, in accelerated time (issue 25; printed, never asserted).

    python bench/bench_soak.py [--starts 1000] [--ticks 20] [--every 50] [--png docs/soak.png]

One daemon in this process: the real HistoryStore (a SQLite file, its retention on), the real
AlertDispatcher with a WebhookSink posting to a loopback HTTP receiver, and the real API
(uvicorn, GET /verdict) over one published view. It watches START starts of a SIMULATED server
(not SGLang: a simulation writing SGLang's log lines, with a simulated process table) through the
real Watcher, one Watcher per start as a restarted sidecar attaches anew, each reading the real
log file through LogTail; the log is shared by all starts (as `tee -a` keeps it) and rotated
(renamed, a new file) every few starts, also in the middle of a start. Per start: TICKS ticks of
simulated time (1 s each, run as fast as they compute); 8 in 10 starts reach `ready`, one crashes
(a traceback, the launcher gone) and one stalls (a rank dies while the other waits): both alert,
and the next start's `ready` resolves them.

Every EVERY starts it samples: RSS, open fds, threads, the SQLite file size (with its WAL), the
time of the history queries the API and the dispatcher make, and the API's p99 over 200
GET /verdict. At the end: every episode's firing and resolved alerts delivered (counted at the
receiver: none lost, none twice), and the curves as a PNG (matplotlib: `pip install matplotlib`).
The store's retention is shrunk (`--keep-episodes`, `--keep-transitions`) so that a run of a
thousand starts reaches its limits the way weeks of starts reach the defaults.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import http.server
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from hangwatch.classify import load_rules  # noqa: E402
from hangwatch.model import Missing  # noqa: E402
from hangwatch.sinks.alerts import AlertDispatcher, RetryPolicy, WebhookSink  # noqa: E402
from hangwatch.sinks.api import create_app, serve_in_thread  # noqa: E402
from hangwatch.sinks.store import HistoryStore, Retention  # noqa: E402
from hangwatch.watch import WatchConfig, Watcher  # noqa: E402
from hangwatch.watch.logsource import LogSource  # noqa: E402
from hangwatch.watch.published import LatestView  # noqa: E402
from hangwatch.watch.reading import EVERY, Reading  # noqa: E402
from helpers.recorded_sources import RecordedSources, proc, server  # noqa: E402

SERVER = "sim-sglang:30000"
START_LINES = [
    "[{ts}] server_args=ServerArgs(model_path='/models/sim', tp_size=2, port=30000)",
    "[{ts} TP0] Init torch distributed begin.", "[{ts} TP1] Init torch distributed begin.",
    "[{ts} TP0] Init torch distributed ends. mem usage=0.00 GB", "[{ts} TP1] Init torch distributed ends. mem usage=0.00 GB",
    "[{ts} TP0] Load weight begin. avail mem=60.00 GB", "[{ts} TP1] Load weight begin. avail mem=60.00 GB",
    "[{ts} TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=59.00 GB",
    "[{ts} TP1] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=59.00 GB",
    "[{ts} TP0] Memory pool end. avail mem=40.00 GB", "[{ts} TP1] Memory pool end. avail mem=40.00 GB",
    "[{ts}] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
    "[{ts}] The server is fired up and ready to roll!",
]
CRASH = ("[{ts}] Traceback (most recent call last):\n  File \"/sim/launch_server.py\", line 12, in <module>\n"
         "    main()\nRuntimeError: the simulated server crashed\n")
SERVING = "[{ts} TP0] Prefill batch. #new-seq: 1, #new-token: {n}, #cached-token: 0, token usage: 0.01, #running-req: 0\n"


class SimulatedServer(RecordedSources):
    """The Sources of one simulated start: a simulated process table, and its log read from the
    real file by the daemon's own log reader (LogSource, as LiveSources reads it: LogTail, its
    rotation, and a burst skimmed or skipped, the skip said in the reading's missing)."""

    def __init__(self, log: Path, pid: int, rules: list[Any]) -> None:
        super().__init__(procs=[proc(pid, "launcher", ppid=1), proc(pid + 1, "scheduler", "TP0", ppid=pid),
                                proc(pid + 2, "scheduler", "TP1", ppid=pid)])
        self.log_missing: dict[str, Missing] = {}  # the reader's "log" and "log_burst" entries
        # a start tail of 0, as `hangwatch run` on a log that exists: this start's lines only
        config = WatchConfig(log_path=str(log), initial_log_bytes=0, gpus=False)
        self.reader = LogSource(server(), config, rules, self.log_missing)

    @property
    def log_bytes_seen(self) -> int:
        return self.reader.bytes_seen

    def read_log(self) -> bytes:
        return self.reader.read() if self.reader.opened else b""

    def read(self, parts: frozenset[str] = EVERY, *, rescan: bool = True) -> Reading:
        reading = super().read(parts, rescan=rescan)
        return replace(reading, missing=(*reading.missing, *self.log_missing.values()))

    def close(self) -> None:
        self.reader.close()


class Receiver(http.server.ThreadingHTTPServer):
    """The webhook receiver: counts each (episode, kind) it was sent."""

    def __init__(self) -> None:
        self.got: dict[tuple[str, str], int] = {}
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = (body.get("episode_id"), body.get("event"))
                with receiver.lock:
                    receiver.got[key] = receiver.got.get(key, 0) + 1
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)


class Log:
    """The shared server log: appended by every start, rotated (renamed away, a new file) by size."""

    def __init__(self, path: Path, rotate_bytes: int) -> None:
        self.path, self.rotate_bytes, self.written, self.rotations = path, rotate_bytes, 0, 0
        self.path.touch()

    def write(self, text: str) -> None:
        self.write_bytes(text.encode())

    def write_bytes(self, data: bytes) -> None:
        with open(self.path, "ab") as fh:
            fh.write(data)
        self.written += len(data)
        if self.path.stat().st_size > self.rotate_bytes:
            os.replace(self.path, self.path.with_suffix(".log.1"))  # the one before is dropped, as logrotate does
            self.path.touch()
            self.rotations += 1


def one_start(n: int, log: Log, rules: list[Any], view: LatestView, dispatcher: AlertDispatcher, ticks: int,
              clock: list[float], serving_lines: int, burst: bytes, skipped: list[int]) -> str:
    kind = "crash" if n % 10 == 3 else "stall" if n % 10 == 7 else "healthy"
    sim = SimulatedServer(log.path, 1000 + 10 * n, rules)
    # no first look: its wait is real time, and this daemon's clock is simulated (it would only sleep)
    watcher = Watcher(server(), rules, WatchConfig(gpus=False, initial_log_bytes=0, learn=False, first_look_s=0),
                      sources=sim, clock=lambda: clock[0], wall=lambda: 1.8e9 + clock[0])
    watcher.view = view  # the daemon's API serves whichever start it watches now
    ts = lambda: time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(1.8e9 + clock[0]))  # noqa: E731
    last = "none"
    try:
        for t in range(ticks):
            if t < 4:  # the start's phases, over its first ticks
                log.write("".join(line.format(ts=ts()) + "\n" for line in START_LINES[t * 4:(t + 1) * 4]
                                  if kind == "healthy" or "ready" not in line and "Uvicorn" not in line))
            elif kind == "healthy":
                log.write("".join(SERVING.format(ts=ts(), n=8 + i % 97) for i in range(serving_lines)))
                if t == 6 and burst:  # a chatty stretch (a flood of batch lines): skimmed or skipped, said in missing
                    log.write_bytes(burst)
            elif kind == "crash" and t == 5:
                log.write(CRASH.format(ts=ts()))
                sim.procs = [replace(p, alive=False, exit_code=1, state=None) for p in sim.procs]
                sim.launcher_gone = True
            elif kind == "stall" and t == 5:
                sim.procs = [replace(p, alive=False, exit_code=-9, state=None) if p.rank == "TP1" else p for p in sim.procs]
            if kind != "stall" or t < 5:
                sim.burn("TP0", 0.5)
            _, verdict = watcher.tick()
            dispatcher.on_verdict(verdict, SERVER)
            last = verdict.state.value
            clock[0] += 1.0
    finally:
        skipped[0] += sim.reader.skipped_bytes
        watcher.close()
    return f"{kind}:{last}"


def sample(store: HistoryStore, api_port: int, db: Path) -> dict[str, float]:
    gc.collect()
    rounds = []
    for _ in range(20):  # the median round: a loaded host's stalls fall on a few rounds
        started = time.perf_counter()
        store.transitions(100)
        store.episodes(100)
        store.open_episode(SERVER)
        store.last_transition(SERVER)
        store.owed_alerts("webhook")
        rounds.append((time.perf_counter() - started) * 1000)
    query_ms = statistics.median(rounds)
    conn = http.client.HTTPConnection("127.0.0.1", api_port, timeout=10)
    times = []
    for _ in range(200):
        t0 = time.perf_counter()
        conn.request("GET", "/verdict")
        response = conn.getresponse()
        response.read()
        times.append((time.perf_counter() - t0) * 1000)
        assert response.status == 200, response.status
    conn.close()
    times.sort()
    size = sum(p.stat().st_size for p in (db, db.with_name(db.name + "-wal")) if p.exists())
    counts = store.counts()
    return {"rss_mib": _rss_mib(), "fds": len(os.listdir("/proc/self/fd")), "threads": threading.active_count(),
            "db_kib": size / 1024, "query_ms": query_ms, "api_p50_ms": times[len(times) // 2],
            "api_p99_ms": times[int(len(times) * 0.99) - 1], "transitions": counts["transitions"],
            "episodes": counts["episodes"], "outbox": counts["outbox"], "load": os.getloadavg()[0]}


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def plot(rows: list[dict[str, float]], starts: list[int], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("rss_mib", "RSS (MiB)"), ("fds", "open fds"), ("threads", "threads"), ("db_kib", "SQLite + WAL (KiB)"),
              ("query_ms", "history queries (ms: 5 queries, median of 20)"), ("api_p99_ms", "GET /verdict p99 (ms)"),
              ("transitions", "transitions kept"), ("episodes", "episodes kept"), ("outbox", "outbox rows"),
              ("load", "host load average (shared, 2 cores)")]
    fig, axes = plt.subplots(2, 5, figsize=(19, 6.5))
    for ax, (key, label) in zip(axes.flat, panels, strict=True):
        ax.plot(starts, [row[key] for row in rows], marker=".", linewidth=1)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("simulated starts", fontsize=8)
        ax.set_ylim(bottom=0, top=max(1.0, max(row[key] for row in rows) * 1.3))
        ax.tick_params(labelsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)  # drawn at every sample: a figure kept open is memory this process's RSS curve would show


def _title(args: argparse.Namespace, starts: int, log: Log) -> str:
    return (f"bench/bench_soak.py (a simulated server): {starts} starts, {starts * args.ticks} verdicts, "
            f"{log.written / 2**30:.1f} GiB of log over {log.rotations} rotations; load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=10, help="ticks (simulated seconds) per start")
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--serving-lines", type=int, default=20, help="log lines per tick of a ready start")
    parser.add_argument("--rotate-mib", type=float, default=1.0)
    parser.add_argument("--keep-episodes", type=int, default=50)
    parser.add_argument("--keep-transitions", type=int, default=500)
    parser.add_argument("--burst-mib", type=float, default=0.0,
                        help="a healthy start's one flood of batch lines (MiB): with 1000 starts, 12 makes 10 GiB of log")
    parser.add_argument("--png", type=Path, default=None)
    args = parser.parse_args()
    rules = load_rules()
    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="hw-bench-soak-") as tmp_name:
        tmp = Path(tmp_name)
        db = tmp / "history.sqlite"
        store = HistoryStore(db, retention=Retention(max_episodes=args.keep_episodes, max_transitions=args.keep_transitions,
                                                     every_writes=100))
        sink = WebhookSink(f"http://127.0.0.1:{receiver.server_address[1]}/hook")
        dispatcher = AlertDispatcher([sink], store, policy=RetryPolicy(attempts=None))
        view = LatestView(SERVER, started_at=time.time())
        api = serve_in_thread(create_app(view, store=store, rate=None), "127.0.0.1", 0)
        log = Log(tmp / "server.log", int(args.rotate_mib * 2**20))
        clock, rows, at, ends, skipped = [0.0], [], [], {}, [0]
        line = SERVING.format(ts="2026-11-30 10:00:00", n=42).encode()
        burst = line * int(args.burst_mib * 2**20 / len(line))
        began = time.monotonic()
        try:
            for n in range(args.starts):
                end = one_start(n, log, rules, view, dispatcher, args.ticks, clock, args.serving_lines, burst, skipped)
                ends[end] = ends.get(end, 0) + 1
                if n == 0 or (n + 1) % args.every == 0:
                    dispatcher.flush(30.0)
                    rows.append(sample(store, api.port, db))
                    at.append(n + 1)
                    print(f"{n + 1:5d} starts, {clock[0]:8.0f} simulated s, {log.written / 2**30:.2f} GiB of log, "
                          f"{time.monotonic() - began:.0f} s: " + ", ".join(f"{k} {v:.1f}" for k, v in rows[-1].items()), flush=True)
                    if args.png and len(rows) > 1:  # the curves so far: a run stopped early still has them
                        plot(rows, at, args.png, _title(args, n + 1, log))
            dispatcher.flush(60.0)
            fired = {e for (e, kind) in receiver.got if kind == "firing"}
            resolved = {e for (e, kind) in receiver.got if kind == "resolved"}
            twice = sum(1 for (_, kind), count in receiver.got.items() if count > 1 and kind in ("firing", "resolved"))
            expected = sum(v for k, v in ends.items() if k.split(":")[0] in ("crash", "stall"))
            wall = time.monotonic() - began
            print(f"{args.starts} starts ({', '.join(f'{k} {v}' for k, v in sorted(ends.items()))}), "
                  f"{args.starts * args.ticks} verdicts in {clock[0] / 3600:.1f} simulated hours ({wall:.0f} s of wall time), "
                  f"{log.written / 2**20:.0f} MiB of log over {log.rotations} rotations; of the bursts "
                  f"{skipped[0] / 2**20:.0f} MiB skipped unread (said in missing), the rest skimmed")
            print(f"alerts: {len(fired)} episodes fired and {len(resolved)} resolved at the receiver for {expected} "
                  f"failed starts; delivered twice: {twice}; still owed: {len(store.owed_alerts('webhook'))}")
            first, last = rows[0] if len(rows) < 3 else rows[1], rows[-1]
            print("first -> last sample: " + ", ".join(f"{k} {first[k]:.1f} -> {last[k]:.1f}" for k in first))
            if args.png:
                plot(rows, at, args.png, _title(args, args.starts, log))
                print(f"curves: {args.png}")
        finally:
            api.stop()
            dispatcher.close()
            store.close()
            receiver.shutdown()


if __name__ == "__main__":
    main()
