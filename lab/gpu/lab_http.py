"""The GPU lab launcher's HTTP side: SGLang's health endpoints, answered once every rank is ready.

A simulation of SGLang's HTTP server (a stdlib server on a daemon thread that answers and generates
nothing), so that a lab server that starts can be seen to start the way a real one is: its port
opens, and `/health`, `/ready` answer 200 and `/get_model_info` names the model path, as SGLang's
do (hangwatch's `HealthEndpoint`s for SGLang, engines/sglang.py). Anything else is 404.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve_health(host: str, port: int, model_path: str) -> ThreadingHTTPServer:
    """Bind `host:port` now (an error if it is taken) and answer on a daemon thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            path = self.path.split("?", 1)[0]
            if path in ("/health", "/ready"):
                self._send(200, b"")
            elif path == "/get_model_info":
                self._send(200, json.dumps({"model_path": model_path, "is_generation": True}).encode())
            else:
                self._send(404, b"")

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:  # the server log keeps SGLang's lines only
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="lab-http", daemon=True).start()
    return server
