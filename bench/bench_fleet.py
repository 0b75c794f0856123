"""What one stuck agent costs the fleet: a poll of two loopback agents, one answering at once, one
trickling a byte a second (as a stuck or hostile agent does).

    .venv/bin/python bench/bench_fleet.py [--polls 3] [--timeout 3]

Prints each poll's duration and what each node shows; asserts nothing. Each agent has a deadline
for its whole answer, so a poll takes about `--timeout` however long the trickle goes on (before
issue 24, urllib's per-read timeout never fired and a poll took the whole trickle: 40 s here).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from hangwatch.sinks.web.fleet import Fleet

GOOD = json.dumps({"nodes": [{"verdict": {"state": "progressing", "ranks": [], "phases": {}}}]}).encode()


class _Agent(BaseHTTPRequestHandler):
    server: Any

    def do_GET(self) -> None:  # noqa: N802
        try:
            if self.server.trickle:
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
                for _ in range(40):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(1)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(GOOD)))
            self.end_headers()
            self.wfile.write(GOOD)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the fleet gave up on it: that is the point

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--polls", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=3.0)
    args = parser.parse_args()
    servers = []
    for trickle in (True, False):
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Agent)
        server.daemon_threads = True
        server.trickle = trickle  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    urls = [f"http://127.0.0.1:{s.server_address[1]}" for s in servers]
    fleet = Fleet(urls, {}, timeout=args.timeout)
    for n in range(args.polls):
        started = time.monotonic()
        data = fleet.poll_once()
        took = time.monotonic() - started
        slow, good = data["nodes"]
        print(f"poll {n}: {took:.2f} s; answering node: {good['verdict']['state']}; trickling node: {slow['error']}")
    for server in servers:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
