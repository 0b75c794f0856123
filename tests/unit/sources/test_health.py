"""The engine's own endpoint as readiness, against a real HTTP server on loopback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from hangwatch.engines import get_engine
from hangwatch.engines.endpoints import HealthEndpoint
from hangwatch.sources.health import HealthProber, ask, probe_host
from helpers.liveprocs import wait_until


class Engine(ThreadingHTTPServer):
    """Answers per path from `routes` (status, body); records every request."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.routes: dict[str, tuple[int, bytes]] = {}
        self.asked: list[tuple[str, str]] = []


class Handler(BaseHTTPRequestHandler):
    server: Engine

    def do_GET(self) -> None:
        self.server.asked.append(("GET", self.path))
        status, body = self.server.routes.get(self.path, (404, b"Not Found"))
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.server.asked.append(("POST", self.path))
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def engine() -> Iterator[Engine]:
    server = Engine()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def poll_until_answer(prober: HealthProber, port: int, count: int) -> None:
    """Poll like the watch loop until `count` answers have come back."""
    seen: list[object] = []

    def answered() -> bool:
        answer = prober.poll("127.0.0.1", port)
        if answer is not None and (not seen or seen[-1] is not answer):
            seen.append(answer)
        return len(seen) >= count

    wait_until(answered, timeout_s=10.0, interval=0.01)


def test_sglang_ready_only_after_ready_answers_200(engine: Engine) -> None:
    # GIVEN an SGLang-like server whose warm-up has not finished (/ready 503)
    engine.routes["/ready"] = (503, b"")
    prober = HealthProber(get_engine("sglang").health_endpoints)
    port = engine.server_address[1]
    poll_until_answer(prober, port, 1)
    assert prober.answer is not None and not prober.answer.ready and prober.answer.status == 503
    # WHEN the server finishes its start
    engine.routes["/ready"] = (200, b"")
    wait_until(lambda: (a := prober.poll("127.0.0.1", port)) is not None and a.ready, timeout_s=10.0, interval=0.01)
    # THEN ready, and nothing more is asked; never a POST (a generation)
    count = len(engine.asked)
    for _ in range(5):
        prober.poll("127.0.0.1", port)
    assert len(engine.asked) == count
    assert all(method == "GET" for method, _ in engine.asked)
    assert {path for _, path in engine.asked} == {"/ready"}
    prober.close()


def test_an_endpoint_this_version_lacks_is_dropped_for_the_next(engine: Engine) -> None:
    engine.routes["/health"] = (200, b"")  # an older SGLang: no /ready
    prober = HealthProber(get_engine("sglang").health_endpoints)
    port = engine.server_address[1]
    wait_until(lambda: (a := prober.poll("127.0.0.1", port)) is not None and a.ready, timeout_s=10.0, interval=0.01)
    assert [path for _, path in engine.asked] == ["/ready", "/health"]
    assert prober.answer is not None and prober.answer.url.endswith(f":{port}/health")
    prober.close()


def test_model_info_proves_up_not_ready(engine: Engine) -> None:
    engine.routes["/get_model_info"] = (200, json.dumps({"model_path": "/models/tiny"}).encode())
    answer = ask("127.0.0.1", engine.server_address[1], HealthEndpoint("/get_model_info", proves="up", json_key="model_path"))
    assert (answer.status, answer.ready) == (200, False)


def test_a_200_that_is_not_the_engines_answer_is_not_ready(engine: Engine) -> None:
    engine.routes["/v1/models"] = (200, b"<html>some proxy</html>")
    answer = ask("127.0.0.1", engine.server_address[1], HealthEndpoint("/v1/models", json_key="data"))
    assert not answer.ready and "not this engine's answer" in answer.detail
    engine.routes["/v1/models"] = (200, json.dumps({"object": "list", "data": [{"id": "tiny"}]}).encode())
    assert ask("127.0.0.1", engine.server_address[1], HealthEndpoint("/v1/models", json_key="data")).ready


def test_no_answer_is_not_ready() -> None:
    import socket

    with socket.socket() as sock:  # a port that accepts nothing: bound, not listening
        sock.bind(("127.0.0.1", 0))
        answer = ask("127.0.0.1", sock.getsockname()[1], HealthEndpoint("/health"), timeout_s=0.2)
    assert answer.status is None and not answer.ready and answer.detail.startswith("no answer")


def test_a_server_that_accepts_and_never_answers_costs_the_timeout_only() -> None:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as sock:  # accepts (backlog), never reads
        answer = ask("127.0.0.1", sock.getsockname()[1], HealthEndpoint("/health"), timeout_s=0.2)
    assert answer.status is None and "timed out" in answer.detail


def test_wildcard_binds_are_reached_on_loopback() -> None:
    assert [probe_host(h) for h in ("0.0.0.0", "", "::", "10.0.0.5")] == ["127.0.0.1", "127.0.0.1", "::1", "10.0.0.5"]


def test_vllm_endpoints_are_health_then_models() -> None:
    assert [e.path for e in get_engine("vllm").health_endpoints] == ["/health", "/v1/models"]
