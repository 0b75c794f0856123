"""HTTP bounds over real sockets (probe A6, A8, A9, A13, A19, A21, A24).

The server is the real uvicorn in a thread of this process (`serve_in_thread`), except for the
file-descriptor case, which runs a real `hangwatch attach --serve` daemon under a low RLIMIT_NOFILE.
"""

from __future__ import annotations

import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from hangwatch.sinks import http_limits
from hangwatch.sinks.api import _bind, create_app, serve_in_thread
from hangwatch.watch.published import LatestView, Published
from helpers.livetools import Procs, wait_for_text
from helpers.serve_fixtures import make_view
from helpers.serve_support import free_port

HANGWATCH = str(Path(sys.executable).parent / "hangwatch")


def _vmhwm_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _closed_by_peer(sock: socket.socket, within_s: float) -> bool:
    sock.settimeout(within_s)
    try:
        return sock.recv(65536) == b"" or True  # a 400 before the close counts as closed too
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize("token", [None, "tok"])
def test_a_huge_header_is_cut_off_before_it_is_buffered(token: str | None) -> None:
    handle = serve_in_thread(create_app(make_view(), token=token, rate=None), "127.0.0.1", 0)
    try:
        before = _vmhwm_kib()
        sock = _connect(handle.port)
        sent = 0
        try:
            sock.sendall(b"GET /bundle HTTP/1.1\r\nHost: 127.0.0.1\r\nX: ")
            chunk = b"a" * 2**20
            for _ in range(40):  # 40 MiB offered; the server stops reading at 16 KiB
                sock.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert sent < 40 * 2**20 or _closed_by_peer(sock, 10)
        sock.close()
        assert _vmhwm_kib() - before < 20 * 1024  # the probe saw +400 MB for 200 MiB
        assert httpx.get(f"{handle.url}/healthz").status_code == 200  # and it still serves
    finally:
        handle.stop()


def test_a_request_head_that_never_ends_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_limits, "HEADER_TIMEOUT_S", 1.0)
    handle = serve_in_thread(create_app(make_view(), rate=None), "127.0.0.1", 0)
    try:
        slow = [_connect(handle.port) for _ in range(5)]
        for sock in slow:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        time.sleep(0.5)
        for sock in slow:
            sock.sendall(b"X-a: b\r\n")  # a byte now and then keeps no connection alive past the deadline
        assert all(_closed_by_peer(sock, 20) for sock in slow)
        # a keep-alive connection gets a new deadline for its next request
        sock = _connect(handle.port)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        assert _closed_by_peer(sock, 20)
    finally:
        handle.stop()


def test_tokenless_api_checks_the_host_header() -> None:
    handle = serve_in_thread(create_app(make_view(), rate=None), "127.0.0.1", 0)
    try:
        url = f"{handle.url}/bundle"
        assert httpx.get(url, headers={"Host": f"evil.example:{handle.port}"}).status_code == 421
        assert httpx.get(url, headers={"Host": f"localhost:{handle.port}"}).status_code == 200
        assert httpx.get(url).status_code == 200  # 127.0.0.1:PORT
    finally:
        handle.stop()
    with_token = serve_in_thread(create_app(make_view(), token="tok", rate=None), "127.0.0.1", 0)
    try:  # with a token the token is the guard: any name a proxy forwards is fine
        response = httpx.get(f"{with_token.url}/stacks", headers={"Host": "node7", "Authorization": "Bearer tok"})
        assert response.status_code == 200
    finally:
        with_token.stop()


def test_healthz_reports_a_frozen_loop_as_stale() -> None:
    view = LatestView("srv")
    handle = serve_in_thread(create_app(view, rate=None, stale_after_s=0.5), "127.0.0.1", 0)
    try:
        view.publish(view.latest(), tick=True)
        assert httpx.get(f"{handle.url}/healthz").json()["status"] == "ok"
        time.sleep(1.0)
        response = httpx.get(f"{handle.url}/healthz")
        assert response.status_code == 503 and response.json()["status"] == "stale"
        view.publish(view.latest(), tick=True)
        assert httpx.get(f"{handle.url}/healthz").json()["status"] == "ok"
    finally:
        handle.stop()


def test_bundle_is_built_once_per_tick_whatever_the_clients() -> None:
    view = make_view()
    builds = []
    files = view.latest().bundle_files()
    view.publish(Published(bundle=lambda: builds.append(1) or files), tick=True)
    handle = serve_in_thread(create_app(view, rate=None), "127.0.0.1", 0)
    try:
        bodies = {httpx.get(f"{handle.url}/bundle").content for _ in range(4)}
        assert len(builds) == 1 and len(bodies) == 1
        view.publish(view.latest(), tick=True)
        httpx.get(f"{handle.url}/bundle")
        assert len(builds) == 2
    finally:
        handle.stop()


def test_accepted_sockets_get_tcp_nodelay() -> None:
    listening = _bind("127.0.0.1", 0)
    assert listening.proto == socket.IPPROTO_TCP  # asyncio sets TCP_NODELAY only on IPPROTO_TCP sockets
    listening.close()
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()

    class Transport:
        def get_extra_info(self, name: str) -> socket.socket:
            return accepted

    http_limits._nodelay(Transport())  # type: ignore[arg-type]
    assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    for sock in (client, accepted, server):
        sock.close()


def test_out_of_file_descriptors_the_daemon_keeps_watching(tmp_path: Path) -> None:
    """A9: 60 slow connections against a daemon limited to 64 fds; it must survive and tick on."""
    procs = Procs()
    try:
        log = tmp_path / "server.log"
        server = procs.server("tcpstore", log)
        wait_for_text(log, "Init torch distributed begin")
        port = free_port()

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

        errors = (tmp_path / "stderr").open("wb")
        daemon = procs.hangwatch(["attach", str(server.pid), "--serve", "--port", str(port), "--json", "--log", str(log)],
                                 stdout=subprocess.DEVNULL, stderr=errors, preexec_fn=limit)
        errors.close()
        first = _wait_ticks(port, 0)
        conns = []
        for _ in range(60):
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=2)
                sock.sendall(b"GET / HTTP/1.1\r\n")
                conns.append(sock)
            except OSError:
                break
        time.sleep(6)
        assert daemon.poll() is None, (tmp_path / "stderr").read_text()[-2000:]
        for sock in conns:
            sock.close()
        _wait_ticks(port, first + 2)
        assert daemon.poll() is None
        assert (tmp_path / "stderr").read_text().count("Traceback") == 0  # one line a minute, not a flood
    finally:
        procs.stop()


def _wait_ticks(port: int, above: int, timeout_s: float = 60) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ticks = int(httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).json()["ticks"])
            if ticks > above:
                return ticks
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    pytest.fail(f"the daemon on :{port} did not tick past {above}")
