"""Start one lab scenario and stay in the foreground until killed or --hold seconds pass.

usage: python lab/run.py SCENARIO [--port P] [--log FILE] [--onset-file F] [--ready-file F]
                         [--hold S] [--late S] [--kv-tokens N] [--kill-at TEXT]

stdout: JSON lines. The first is {"pid": N, "log": "...", "port": P} (N = node 0's
`sglang.launch_server` or `vllm serve` pid); then one line per event (launched, onset, ready, exited, error).
On exit (SIGINT, SIGTERM, --hold elapsed, everything exited) it kills what it started.
Runs with any python3: only the servers use the lab venv.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # so `lab` imports as a package
from lab.scenarios import SCENARIOS, start

_print_lock = threading.Lock()


def _print(record: dict) -> None:
    with _print_lock:
        print(json.dumps(record), flush=True)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("--port", type=int, help="HTTP port of node 0 (default: free in 31000-31999)")
    p.add_argument("--log", help="server log of node 0 (node 1: FILE with .node1.log)")
    p.add_argument("--onset-file", help="JSON written when the hang (or slow phase) begins")
    p.add_argument("--ready-file", help="'ready' written once the scenario reached its state")
    p.add_argument("--hold", type=float, default=600.0, help="seconds to stay up (default 600)")
    p.add_argument("--late", type=float, help="two-node-late: node 1 starts S s after onset")
    p.add_argument("--kv-tokens", type=int, help="kv-slow: --max-total-tokens")
    p.add_argument("--kill-at", help="rank-killed: node-1 log text that triggers the SIGKILL")
    p.add_argument("--dist-port", type=int, help="--dist-init-addr port (default: 29600-29699)")
    p.add_argument("--output", choices=("file", "tee", "cat", "line-loop"), default="file",
                   help="how the output reaches the log: the server writes it (file), `| tee -a LOG`, "
                        "`| cat >> LOG`, or a shell loop appending each line (no file held open)")
    p.add_argument("--master-port", type=int, help="vllm --nnodes 2: --master-port (default: 29700-29799)")
    return p


def _on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds into the finally below, which cleans up


def main() -> int:
    args = _parser().parse_args()
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGHUP, _on_signal)
    opts = {"late": args.late, "kv_tokens": args.kv_tokens, "kill_at": args.kill_at,
            "dist_port": args.dist_port, "output": args.output,
            "master_port": args.master_port}
    pending: list[dict] = []  # events that arrive before the first line is printed
    header_done = threading.Event()

    def on_event(record: dict) -> None:
        with _print_lock:
            if not header_done.is_set():
                pending.append(record)
                return
        _print(record)

    run = start(args.scenario, port=args.port, log=args.log, onset_file=args.onset_file,
                ready_file=args.ready_file, on_event=on_event,
                **{k: v for k, v in opts.items() if v is not None})
    try:
        with _print_lock:
            print(json.dumps({"pid": run.pid, "log": str(run.log), "port": run.port}), flush=True)
            for record in pending:
                print(json.dumps(record), flush=True)
            header_done.set()
        deadline = time.monotonic() + args.hold
        while time.monotonic() < deadline and run.alive():
            time.sleep(0.5)
        if not run.alive():
            time.sleep(1.0)  # let the driver report the exit codes
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # a second signal must not cut the cleanup short
        run.stop()
        _print({"event": "stopped", "scenario": args.scenario, "t": round(time.time(), 3)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
