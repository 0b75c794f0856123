"""The Prometheus client's refusals, against a real local HTTP peer that misbehaves (a redirect, a
body that is not Prometheus's API). The client against the real Prometheus: tests/integration/fleet."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from hangwatch.sources.prometheus import PrometheusClient, PrometheusError
from helpers.serve_support import Receiver


@pytest.fixture
def peer() -> Iterator[Receiver]:
    rx = Receiver()
    yield rx
    rx.close()


def test_a_redirect_is_refused_and_not_followed(peer: Receiver) -> None:
    target = Receiver()
    try:
        peer.mode, peer.retry_after = "redirect", target.url
        with pytest.raises(PrometheusError, match="redirect"):
            PrometheusClient(f"http://127.0.0.1:{peer.port}", token="secret").query("up")
        assert target.hits == 0 and target.gets == 0
    finally:
        target.close()


class _Html(BaseHTTPRequestHandler):
    """Answers every POST with a 200 HTML page: a proxy's login page, not Prometheus."""

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = b"<html>please log in</html>"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def html() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Html)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_an_answer_that_is_not_prometheus_api_is_one_clear_error(html: str) -> None:
    with pytest.raises(PrometheusError, match="did not answer as Prometheus's API does"):
        PrometheusClient(html).query("up")


def test_a_server_error_names_the_status(peer: Receiver) -> None:
    peer.mode = "error"
    with pytest.raises(PrometheusError, match="HTTP 500"):
        PrometheusClient(f"http://127.0.0.1:{peer.port}").query("up")


def test_an_answer_over_the_cap_is_refused(html: str) -> None:
    with pytest.raises(PrometheusError, match="over 8 bytes"):
        PrometheusClient(html, max_bytes=8).query("up")
