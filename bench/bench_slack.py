"""Time from a stall to the Slack message arriving at a receiver on loopback (printed, not asserted).

    .venv/bin/python bench/bench_slack.py [--runs 3]

Per run: a real HTTP receiver on 127.0.0.1 stands in for Slack's incoming webhook; the test
server of tests/integration/programs starts with rank 1 missing (rank 0 really blocks in accept()
waiting for it: `HW_MODE=tcpstore`), and `hangwatch attach PID --slack-webhook URL --json` watches
it. Printed: onset (rank 0 logs that it waits) → stalled verdict → Slack message received.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from helpers.livetools import Procs, json_lines, wait_for_text  # noqa: E402


class Receiver:
    """A loopback webhook that records when each POST arrived."""

    def __init__(self) -> None:
        arrivals: list[tuple[float, dict]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                arrivals.append((time.time(), json.loads(body or b"{}")))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.arrivals = arrivals
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


def one_run(tmp: Path) -> tuple[float, float] | None:
    procs, receiver = Procs(), Receiver()
    log = tmp / f"server-{time.monotonic_ns()}.log"
    try:
        server = procs.server("tcpstore", log)
        wait_for_text(log, "Init torch distributed begin.")
        onset = time.time()  # rank 0 now waits for a peer that never comes
        watch = procs.hangwatch(["attach", str(server.pid), "--json", "--slack-webhook", receiver.url,
                                 "--exit-on", "stalled", "--timeout", "60"])
        stalled_at = next((time.time() for v in json_lines(watch, 70) if v["state"] == "stalled"), None)
        deadline = time.time() + 30
        while not receiver.arrivals and time.time() < deadline:
            time.sleep(0.02)
        if stalled_at is None or not receiver.arrivals:
            return None
        return stalled_at - onset, receiver.arrivals[0][0] - onset
    finally:
        procs.stop()
        receiver.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hangwatch-bench-slack-") as tmp:
        results = [one_run(Path(tmp)) for _ in range(args.runs)]
    done = [r for r in results if r is not None]
    for i, r in enumerate(results, 1):
        print(f"run {i}: " + ("no stall or no message" if r is None else f"stalled at {r[0]:.1f} s, Slack message at {r[1]:.1f} s after the onset"))
    if done:
        print(f"onset -> stalled: median {statistics.median(r[0] for r in done):.1f} s; "
              f"onset -> Slack message received: median {statistics.median(r[1] for r in done):.1f} s; "
              f"stalled -> message: median {statistics.median(r[1] - r[0] for r in done) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
