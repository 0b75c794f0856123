"""The API through a real uvicorn on loopback (and the guard over real sockets)."""

import threading
import time
from dataclasses import replace

import httpx
import pytest

from hangwatch.model import State
from hangwatch.sinks.api import ServeError, create_app, serve_in_thread
from helpers.serve_support import SECRET, free_port, make_verdict, make_view


@pytest.fixture
def served(view):
    handle = serve_in_thread(create_app(view, token="tok", rate=None), "127.0.0.1", 0)
    yield handle, httpx.Client(base_url=handle.url, headers={"Authorization": "Bearer tok"}, timeout=5)
    handle.stop()


def test_every_endpoint_over_real_http(served):
    handle, client = served
    assert client.get("/verdict").json()["cause"] == "nccl_peer_exited"
    assert "hangwatch_state" in client.get("/metrics").text
    assert client.get("/stacks").json()["stacks"]["TP0"]
    assert client.get("/timeline").json()["ranks"]["TP0"]
    assert client.get("/bundle").content[:2] == b"\x1f\x8b"
    assert client.get("/history").json()["enabled"] is False
    assert client.get("/docs").status_code == 200
    text = " ".join(client.get(p).text for p in ("/verdict", "/stacks", "/bundle"))
    assert SECRET not in text


def test_token_404_and_healthz_over_real_http(served):
    handle, client = served
    assert httpx.get(f"{handle.url}/verdict").status_code == 401
    assert httpx.get(f"{handle.url}/verdict", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert httpx.get(f"{handle.url}/healthz").json()["status"] == "ok"
    response = client.get("/no/such/path")
    assert response.status_code == 404 and response.headers["content-type"] == "application/json"


def test_chunked_body_past_the_bound_is_413(view):
    handle = serve_in_thread(create_app(view, max_body=1000), "127.0.0.1", 0)
    try:
        def chunks():
            for _ in range(10):
                yield b"x" * 500

        response = httpx.request("GET", f"{handle.url}/verdict", content=chunks())
        assert response.status_code == 413 and response.json()["detail"] == "request body too large"
    finally:
        handle.stop()


def test_rate_bound_over_real_http(view):
    handle = serve_in_thread(create_app(view, rate=5.0), "127.0.0.1", 0)
    try:
        with httpx.Client(base_url=handle.url) as client:
            codes = [client.get("/healthz").status_code for _ in range(40)]
        assert 429 in codes and codes[0] == 200
    finally:
        handle.stop()


def test_non_loopback_needs_token_or_insecure(view):
    app = create_app(view)
    with pytest.raises(ServeError, match="without --token"):
        serve_in_thread(app, "0.0.0.0", 0)
    handle = serve_in_thread(app, "0.0.0.0", 0, insecure=True)
    handle.stop()
    handle = serve_in_thread(create_app(view, token="t"), "0.0.0.0", 0)
    handle.stop()
    with pytest.raises(ServeError, match="differs"):
        serve_in_thread(create_app(view, token="t"), "0.0.0.0", 0, token="other")


def test_port_in_use_is_a_clear_error(view):
    handle = serve_in_thread(create_app(view), "127.0.0.1", 0)
    try:
        with pytest.raises(ServeError, match="cannot listen"):
            serve_in_thread(create_app(view), "127.0.0.1", handle.port)
    finally:
        handle.stop()


def test_a_slow_bundle_neither_blocks_other_requests_nor_the_loop():
    # GIVEN a view whose bundle takes 2 s to build, and a loop publishing at 20 Hz
    view = make_view(make_verdict())
    view.publish(replace(view.latest(), bundle=lambda: time.sleep(2.0) or {"meta.json": b"{}"}))
    stop, ticks = threading.Event(), []

    def loop() -> None:
        while not stop.is_set():
            start = time.perf_counter()
            view.publish(replace(view.latest(), verdict=make_verdict(State.STALLED, since_s=len(ticks))), tick=True)
            ticks.append(time.perf_counter() - start)
            time.sleep(0.05)

    handle = serve_in_thread(create_app(view, rate=None), "127.0.0.1", free_port())
    ticker = threading.Thread(target=loop)
    ticker.start()
    try:
        slow = threading.Thread(target=lambda: httpx.get(f"{handle.url}/bundle", timeout=10))
        slow.start()
        time.sleep(0.2)
        # WHEN /verdict is asked while /bundle is building
        start = time.perf_counter()
        assert httpx.get(f"{handle.url}/verdict").status_code == 200
        # THEN it answers at once, and the loop never waited on the API
        assert time.perf_counter() - start < 0.5
        slow.join(10)
    finally:
        stop.set()
        ticker.join()
        handle.stop()
    assert max(ticks) < 0.05 and len(ticks) >= 20
