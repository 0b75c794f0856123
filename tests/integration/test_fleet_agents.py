"""`hangwatch fleet` against hostile and broken agents on loopback (issue 24): real HTTP servers that
redirect (to a receiver that records what reaches it), answer slowly or never, trickle bytes, send
malformed or oversized answers; the real `hangwatch fleet` process for SIGTERM, Host and token."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from hangwatch.sinks.web.fleet import MAX_ANSWER, Fleet, FleetError, create_fleet_app, fetch_node
from helpers.livetools import HANGWATCH, free_port

GOOD = {"nodes": [{"verdict": {"state": "progressing", "cause": None, "ranks": [], "phases": {"TP0": "weights"}},
                   "timeline": {"ranks": {}}, "stacks": {"stacks": {}}}]}


class Agent:
    """A loopback HTTP server whose every GET is answered by `behaviour(handler)`; records requests."""

    def __init__(self, behaviour: Any) -> None:
        self.behaviour = behaviour
        self.requests: list[dict[str, str]] = []
        agent = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                agent.requests.append(dict(self.headers.items()) | {"path": self.path})
                try:
                    agent.behaviour(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def send(handler: BaseHTTPRequestHandler, body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> None:
    handler.send_response(status)
    for name, value in {"Content-Type": "application/json", "Content-Length": str(len(body)), **(headers or {})}.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


@pytest.fixture
def agents() -> Iterator[list[Agent]]:
    made: list[Agent] = []
    yield made
    for agent in made:
        agent.close()


def make(agents: list[Agent], behaviour: Any) -> Agent:
    agents.append(Agent(behaviour))
    return agents[-1]


def good(h: BaseHTTPRequestHandler) -> None:
    send(h, json.dumps(GOOD).encode())


def test_a_redirect_is_not_followed_and_the_token_goes_nowhere_else(agents: list[Agent]) -> None:
    elsewhere = make(agents, good)
    for status in (301, 302, 303, 307, 308):
        redirecting = make(agents, lambda h, s=status: send(h, b"", s, {"Location": f"{elsewhere.url}/snapshot"}))
        node = fetch_node(redirecting.url, "tokSECRET", timeout=3)
        assert node["verdict"] is None and f"HTTP {status}" in node["error"] and "not followed" in node["error"]
    assert elsewhere.requests == []  # neither the request nor the bearer token reached the other address


def test_a_slow_agent_costs_only_its_own_row(agents: list[Agent]) -> None:
    never = make(agents, lambda h: time.sleep(30))
    trickle = make(agents, lambda h: [h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")]
                   + [(h.wfile.write(b" "), h.wfile.flush(), time.sleep(0.5)) for _ in range(60)])
    fine = make(agents, good)
    fleet = Fleet([never.url, trickle.url, fine.url], {}, interval=0.5, timeout=1.5)
    started = time.monotonic()
    data = fleet.poll_once()
    took = time.monotonic() - started
    nodes = {n["url"]: n for n in data["nodes"]}
    assert nodes[fine.url]["verdict"]["state"] == "progressing"
    assert nodes[never.url]["verdict"] is None and nodes[trickle.url]["verdict"] is None
    assert took < 10, took  # bounded by the per-agent deadline, not by the slowest agent's whims
    # polled again while the slow requests are still out: the good node stays fresh
    fleet.start()
    try:
        first = fleet.data()["generated_at"]
        time.sleep(2.0)
        later = fleet.data()
        assert later["generated_at"] > first
        assert {n["url"]: n for n in later["nodes"]}[fine.url]["verdict"]["state"] == "progressing"
        assert sum(1 for r in never.requests) <= 3  # not asked again while its last request is out
    finally:
        fleet.stop()


MALFORMED = [
    b"not json", b'{"nodes": "x"}', b'{"nodes": []}', b'{"nodes": [5]}', b'{"nodes": [{"verdict": [1, 2]}]}',
    b'{"nodes": [{"verdict": {"state": "stalled", "ranks": 5}}]}',
    b'{"nodes": [{"verdict": {"state": "stalled", "ranks": [1]}}]}',
    b'{"nodes": [{"verdict": {"state": "stalled", "ranks": []}, "timeline": {"ranks": {"TP0": "x"}}}]}',
    b'{"nodes": [{"verdict": {"state": "stalled"}, "timeline": {"ranks": [1]}}]}',
    b"[" * 100000 + b"]" * 100000, b"null", b'"x"',
]


def test_a_malformed_answer_is_that_nodes_error_and_the_poll_survives(agents: list[Agent]) -> None:
    bad = [make(agents, lambda h, b=body: send(h, b)) for body in MALFORMED]
    huge = make(agents, lambda h: send(h, b'{"nodes": [{"x": "' + b"a" * (MAX_ANSWER + 10) + b'"}]}'))
    fine = make(agents, good)
    urls = [a.url for a in [*bad, huge, fine]]
    fleet = Fleet(urls, {}, interval=0.3, timeout=5)
    data = fleet.poll_once()
    nodes = {n["url"]: n for n in data["nodes"]}
    assert nodes[fine.url]["verdict"]["state"] == "progressing"
    errors = [nodes[a.url]["error"] for a in [*bad, huge]]
    assert all(errors), errors
    assert "larger than 8 MiB" in nodes[huge.url]["error"]
    fleet.start()
    try:
        time.sleep(1.5)
        assert fleet._thread is not None and fleet._thread.is_alive()
        assert fleet.data()["generated_at"] > data["generated_at"]
    finally:
        fleet.stop()


def test_sigterm_ends_hangwatch_fleet_behind_a_stuck_agent(agents: list[Agent]) -> None:
    stuck = make(agents, lambda h: time.sleep(60))
    trickle = make(agents, lambda h: [h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")]
                   + [(h.wfile.write(b" "), h.wfile.flush(), time.sleep(0.5)) for _ in range(120)])
    port = free_port()
    proc = subprocess.Popen([*HANGWATCH, "fleet", stuck.url, trickle.url, "--port", str(port), "--interval", "0.5"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        time.sleep(2)  # requests to both agents are out now
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) is not None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_the_fleet_page_checks_host_and_needs_a_token_for_token_protected_agents(agents: list[Agent], tmp_path: Any) -> None:
    fine = make(agents, good)
    # without a token: loopback Host names only
    app_fleet = Fleet([fine.url], {})
    from hangwatch.sinks.api import serve_in_thread

    handle = serve_in_thread(create_fleet_app(app_fleet), "127.0.0.1", 0)
    try:
        base = f"http://127.0.0.1:{handle.port}"
        assert httpx.get(f"{base}/snapshot", timeout=10).status_code == 200
        assert httpx.get(f"{base}/snapshot", headers={"Host": f"evil.example:{handle.port}"}, timeout=10).status_code == 421
    finally:
        handle.stop()
    # agents behind a token: the page is never served without one (the app refuses; the CLI uses the
    # agents' one token, which the user holds, and needs it on /snapshot)
    with pytest.raises(FleetError, match="fleet page needs one too"):
        create_fleet_app(Fleet([fine.url], {fine.url: "agentTOKEN"}))
    token_file = tmp_path / "tokens"
    token_file.write_text("agentTOKEN\n")
    port = free_port()
    proc = subprocess.Popen([*HANGWATCH, "fleet", fine.url, "--token-file", str(token_file), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/snapshot", timeout=10).status_code == 401
        assert httpx.get(f"{base}/snapshot", headers={"Authorization": "Bearer agentTOKEN"}, timeout=10).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    assert proc.stderr is not None and b"the page does too" in proc.stderr.read()
    # with one: its data needs it
    handle = serve_in_thread(create_fleet_app(Fleet([fine.url], {fine.url: "agentTOKEN"}), token="pageTOKEN"), "127.0.0.1", 0)
    try:
        base = f"http://127.0.0.1:{handle.port}"
        assert httpx.get(f"{base}/snapshot", timeout=10).status_code == 401
        ok = httpx.get(f"{base}/snapshot", headers={"Authorization": "Bearer pageTOKEN"}, timeout=10)
        assert ok.status_code == 200 and "agentTOKEN" not in ok.text
        assert fine.requests[-1]["Authorization"] == "Bearer agentTOKEN"
    finally:
        handle.stop()


def test_credentials_in_an_agents_url_are_never_shown(agents: list[Agent]) -> None:
    fine = make(agents, good)
    url = fine.url.replace("http://", "http://admin:urlPWsecret@")
    data = Fleet([url], {}).poll_once()
    assert "urlPWsecret" not in json.dumps(data)
    from hangwatch.sinks.web.fleet import summary_lines

    assert "urlPWsecret" not in "\n".join(summary_lines(data))
