"""Helpers for the serve integration tests: a real webhook receiver on loopback, a free port, and the
hand-built verdicts of helpers/serve_fixtures.py (one source for both suites)."""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from helpers.serve_fixtures import SECRET, make_verdict, make_view  # noqa: F401


class Receiver:
    """A webhook peer on 127.0.0.1 whose behaviour tests switch: ok, slow, ratelimit, garbage, error."""

    def __init__(self, port: int = 0, mode: str = "ok", *, delay: float = 0.0, limited: int = 1, retry_after: str = "1"):
        self.mode, self.delay, self.limited, self.retry_after = mode, delay, limited, retry_after
        self.bodies: list[dict] = []
        self.headers: list[dict[str, str]] = []  # of each delivered body
        self.gets = 0  # a redirect followed by urllib arrives as a GET
        self.times: list[float] = []
        self.hits = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self.server.daemon_threads = True
        self.server.receiver = self  # type: ignore[attr-defined]
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/services/T000/B000/XXXX"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, n: int, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while len(self.bodies) < n and time.monotonic() < deadline:
            time.sleep(0.02)
        return len(self.bodies) >= n


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:
        rx: Receiver = self.server.receiver  # type: ignore[attr-defined]
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        rx.hits += 1
        if rx.mode == "garbage":
            self.wfile.write(b"\x00\xffNOT HTTP AT ALL\r\n\r\n")
            self.close_connection = True
            return
        if rx.mode == "slow":
            time.sleep(rx.delay)
        if rx.mode == "ratelimit" and rx.hits <= rx.limited:
            return self._reply(429, b"rate_limited", {"Retry-After": rx.retry_after})
        if rx.mode == "error":
            return self._reply(500, b"<html>upstream oops</html>")
        if rx.mode == "redirect":
            return self._reply(302, b"", {"Location": rx.retry_after})  # retry_after holds the target URL here
        rx.bodies.append(json.loads(body))
        rx.headers.append(dict(self.headers.items()))
        rx.times.append(time.monotonic())
        self._reply(200, b"ok")

    def do_GET(self) -> None:
        self.server.receiver.gets += 1  # type: ignore[attr-defined]
        self._reply(200, b"ok")

    def _reply(self, status: int, body: bytes, headers: dict | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
