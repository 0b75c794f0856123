"""First look on the real lab servers (issue 26), printed, never asserted.

    python bench/bench_first_look.py [--restarts 5] [--late 300] [--late-repeat 5]

1. restart mid-stall: one stuck server (`--restart-scenario`, default weights-fifo); N times, a
   daemon (`hangwatch attach --history H`, Slack to a real local HTTP receiver) that alerted
   once is killed with -9 and a second one starts on the same history and watches for
   `--second-s`: the Slack messages in all (right: exactly 1) and the second daemon's states.
2. late attach: one stuck server (`--late-scenario`, default two-node-watchdog, whose log
   repeats a line every 5 s); N attaches, the k-th `--late` + k * `--late-step` seconds after
   the onset: the first verdict (right: stalled with the scenario's cause), its since_s against
   the time since the onset, and the seconds from the attach to that verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from lab.expected import is_right  # noqa: E402

HANGWATCH = str(Path(sys.executable).parent / "hangwatch")
ONSET_TIMEOUT_S = 900


class _Receiver:
    """A Slack-like incoming webhook on 127.0.0.1 that counts what it is sent."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.bodies.append(json.loads(body or b"{}"))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/T000/B000/XXXX"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Watch:
    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        self.lines: list[tuple[float, dict[str, Any]]] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.lines.append((time.time(), json.loads(line)))

    def wait_state(self, state: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if any(v["state"] == state for _, v in self.lines):
                return True
            time.sleep(0.5)
        return False

    def kill9(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._thread.join(5)


def _stuck(scenario: str, tmp: Path) -> tuple[subprocess.Popen[str], dict[str, Any], float | None]:
    onset = tmp / f"{scenario}.onset.json"
    lab = subprocess.Popen([sys.executable, str(ROOT / "lab" / "run.py"), scenario, "--onset-file", str(onset),
                            "--hold", "2400"], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert lab.stdout is not None
    header = json.loads(lab.stdout.readline())
    deadline = time.monotonic() + ONSET_TIMEOUT_S
    while not onset.exists() and time.monotonic() < deadline and lab.poll() is None:
        time.sleep(1.0)
    return lab, header, float(json.loads(onset.read_text())["t"]) if onset.exists() else None


def _stop(lab: subprocess.Popen[str]) -> None:
    try:
        os.killpg(lab.pid, signal.SIGTERM)
        lab.wait(timeout=60)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(lab.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def restarts(scenario: str, runs: int, second_s: float, tmp: Path) -> None:
    lab, header, onset = _stuck(scenario, tmp)
    try:
        if onset is None:
            print(f"1. {scenario}: no onset; nothing measured", flush=True)
            return
        right = 0
        for run in range(runs):
            slack = _Receiver()
            env = {**os.environ, "HANGWATCH_SLACK_WEBHOOK": slack.url}
            args = [HANGWATCH, "attach", str(header["pid"]), "--json", "--history", str(tmp / f"history-{run}.sqlite")]
            first = _Watch(args, env)
            stalled = first.wait_state("stalled", 300)
            deadline = time.monotonic() + 60
            while not slack.bodies and time.monotonic() < deadline:
                time.sleep(0.2)
            first.kill9()
            second = _Watch(args, env)
            time.sleep(second_s)
            second.kill9()
            time.sleep(2.0)
            states = [v["state"] for _, v in second.lines]
            episodes = {v["episode"]["id"] for _, v in second.lines if v.get("episode")}
            first_ids = {v["episode"]["id"] for _, v in first.lines if v.get("episode")}
            ok = stalled and len(slack.bodies) == 1 and states and set(states) == {"stalled"} and episodes <= first_ids
            right += bool(ok)
            for _, v in second.lines:
                if v["state"] != "stalled":  # what ended the resumed episode, for the record
                    print(f"   second daemon: {v['state']} {v.get('cause')} {v.get('message')}", flush=True)
            print(f"1. {scenario} restart {run + 1}: first daemon stalled={stalled}; Slack messages in all: "
                  f"{len(slack.bodies)}; second daemon's states: {states}; same episode: {episodes <= first_ids}"
                  f" (load average {os.getloadavg()[0]:.1f})", flush=True)
            slack.close()
        print(f"1. {scenario}: restart mid-stall right (exactly one message, stalled throughout) in {right}/{runs}", flush=True)
    finally:
        _stop(lab)


def late_attaches(scenario: str, runs: int, late_s: float, step_s: float, tmp: Path) -> None:
    lab, header, onset = _stuck(scenario, tmp)
    try:
        if onset is None:
            print(f"2. {scenario}: no onset; nothing measured", flush=True)
            return
        right = 0
        for run in range(runs):
            time.sleep(max(0.0, onset + late_s + run * step_s - time.time()))
            began = time.time()
            done = subprocess.run([HANGWATCH, "attach", str(header["pid"]), "--json", "--exit-on", "stalled,crashed,ready",
                                   "--timeout", "120", "--no-learn"], capture_output=True, text=True, timeout=300)
            lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
            first = lines[0] if lines else {"state": "none", "cause": None, "since_s": None}
            ok = is_right(scenario, first)
            right += ok
            print(f"2. {scenario} late attach {run + 1}, {began - onset:.0f} s after the onset: first verdict "
                  f"{first['state']} {first.get('cause')} since_s {first.get('since_s')}; verdicts {len(lines)}; "
                  f"attach -> exit {time.time() - began:.1f} s (load average {os.getloadavg()[0]:.1f})", flush=True)
        print(f"2. {scenario}: first verdict right in {right}/{runs}", flush=True)
    finally:
        _stop(lab)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--restarts", type=int, default=5, help="restart cycles (0: skip)")
    parser.add_argument("--restart-scenario", default="weights-fifo")
    parser.add_argument("--second-s", type=float, default=20.0, help="how long the restarted daemon watches")
    parser.add_argument("--late", type=float, default=300.0, help="seconds after the onset of the first late attach")
    parser.add_argument("--late-step", type=float, default=20.0)
    parser.add_argument("--late-repeat", type=int, default=5, help="late attaches (0: skip)")
    parser.add_argument("--late-scenario", default="two-node-watchdog")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hangwatch-first-look-") as tmp:
        if args.restarts:
            restarts(args.restart_scenario, args.restarts, args.second_s, Path(tmp))
        if args.late_repeat:
            late_attaches(args.late_scenario, args.late_repeat, args.late, args.late_step, Path(tmp))


if __name__ == "__main__":
    main()
