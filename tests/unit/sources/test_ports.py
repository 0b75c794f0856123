"""read_listening with real sockets, through `ss` and through the /proc/net/tcp fallback."""

from __future__ import annotations

import os
import shutil
import socket
import time
from collections.abc import Iterator

import pytest

from hangwatch.errors import SourceUnavailable
from hangwatch.model import ListeningSocket
from hangwatch.sources.ports import parse_ss, port_owner, read_listening

HAVE_SS = shutil.which("ss") is not None
BACKENDS = [pytest.param("ss", marks=pytest.mark.skipif(not HAVE_SS, reason="no ss here")), "/nonexistent/ss"]


def _own_name() -> str:
    """This process's name as the kernel gives it to ss and /proc: "python", or the title a
    pytest-xdist worker gives itself ("[pytest-xdist r", cut to 15 bytes)."""
    with open("/proc/self/comm") as fh:
        return fh.read().strip()


@pytest.fixture
def listener() -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


@pytest.fixture
def listener6() -> Iterator[int]:
    try:
        sock = socket.socket(socket.AF_INET6)
        sock.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback")
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


@pytest.mark.parametrize("ss", BACKENDS)
def test_our_listening_socket_with_its_owner(ss: str, listener: int) -> None:
    sockets, text = read_listening(ss=ss)
    assert port_owner(sockets, listener) == ListeningSocket("127.0.0.1", listener, os.getpid(), _own_name())
    assert text.splitlines()[0].startswith("State")
    assert f"127.0.0.1:{listener}" in text and f"pid={os.getpid()}," in text


@pytest.mark.parametrize("ss", BACKENDS)
def test_ipv6(ss: str, listener6: int) -> None:
    sockets, text = read_listening(ss=ss)
    assert port_owner(sockets, listener6) == ListeningSocket("::1", listener6, os.getpid(), _own_name())
    assert f"[::1]:{listener6}" in text


@pytest.mark.parametrize("ss", BACKENDS)
def test_the_table_reads_back_to_the_same_sockets(ss: str, listener: int) -> None:
    sockets, text = read_listening(ss=ss)
    assert parse_ss(text) == sockets


def test_both_sources_give_the_same_sockets(listener: int) -> None:
    if not HAVE_SS:
        pytest.skip("no ss here")
    # read ss around /proc: another process's socket may open or close between two reads, so a
    # socket ss saw both times must be in /proc's, and each of /proc's in one of ss's reads
    before = set(read_listening()[0])
    from_proc = set(read_listening(ss="/nonexistent")[0])
    after = set(read_listening()[0])
    assert before & after <= from_proc <= before | after
    assert port_owner(from_proc, listener) is not None


def test_a_closed_port_has_no_owner(listener: int) -> None:
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    assert port_owner(read_listening(ss="/nonexistent")[0], port) is None


def test_a_hanging_ss_falls_back_within_its_timeout(tmp_path, listener: int) -> None:
    slow = tmp_path / "ss"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(0o755)
    started = time.monotonic()
    sockets, _ = read_listening(ss=str(slow), timeout_s=0.5)
    assert time.monotonic() - started < 3
    assert port_owner(sockets, listener) is not None


def test_a_failing_ss_falls_back(tmp_path, listener: int) -> None:
    broken = tmp_path / "ss"
    broken.write_text("#!/bin/sh\necho 'ss: option requires an argument' >&2\nexit 1\n")
    broken.chmod(0o755)
    assert port_owner(read_listening(ss=str(broken))[0], listener) is not None


def test_neither_source_is_source_unavailable(tmp_path) -> None:
    with pytest.raises(SourceUnavailable) as err:
        read_listening(ss="/nonexistent", proc_root=str(tmp_path))
    assert err.value.source == "ports" and "ss" in (err.value.hint or "")


def test_the_owner_cache_is_checked_before_reuse() -> None:
    # GIVEN a listening socket whose owner (pid, fd) was found and cached
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    assert f"fd={sock.fileno()})" in read_listening(ss="/nonexistent")[1]
    # WHEN the socket moves to another fd (dup, then the first fd closed)
    moved = os.dup(sock.fileno())
    sock.close()
    try:
        sockets, text = read_listening(ss="/nonexistent")
        # THEN the stale cache entry is not trusted: the owner is found on its new fd
        assert port_owner(sockets, port).pid == os.getpid()
        assert f"pid={os.getpid()},fd={moved})" in text
    finally:
        os.close(moved)


SS_TEXT = """State  Recv-Q Send-Q Local Address:Port Peer Address:PortProcess
LISTEN 0      2048         0.0.0.0:30000      0.0.0.0:*    users:(("python3",pid=4242,fd=25))
LISTEN 0      128    127.0.0.53%lo:53         0.0.0.0:*    users:(("systemd-resolve",pid=700,fd=14))
LISTEN 0      4096               *:8080             *:*    users:(("sglang::schedu",pid=11,fd=3),("sglang::schedu",pid=12,fd=3))
LISTEN 0      511  [::ffff:127.0.0.1]:9000          *:*
LISTEN 0      128             [::]:22            [::]:*
"""


def test_parse_ss() -> None:
    assert parse_ss(SS_TEXT) == [
        ListeningSocket("0.0.0.0", 30000, 4242, "python3"),
        ListeningSocket("127.0.0.53", 53, 700, "systemd-resolve"),
        ListeningSocket("::", 8080, 11, "sglang::schedu"),
        ListeningSocket("::ffff:127.0.0.1", 9000),
        ListeningSocket("::", 22),
    ]
    assert parse_ss(SS_TEXT.split("\n", 1)[1]) == parse_ss(SS_TEXT)  # -H output: no header


def test_port_owner_prefers_a_known_pid() -> None:
    sockets = [ListeningSocket("0.0.0.0", 80), ListeningSocket("::", 80, 5, "nginx")]
    assert port_owner(sockets, 80) == sockets[1]
    assert port_owner(sockets[:1], 80) == sockets[0]
    assert port_owner(sockets, 81) is None
