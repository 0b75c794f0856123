"""Bounds on the HTTP server, applied before any request reaches the app (and its token check).

uvicorn with httptools buffers headers without limit and never times a connection out before its
request line and headers are complete; the probe held 200 MiB headers (+400 MB RSS) and 54
slow-header connections that took every file descriptor, after which the watch loop died. Here:

- h11 with `MAX_HEADER_BYTES` for the request line plus headers (431-class close past it);
- `HEADER_TIMEOUT_S` to receive a complete request head, on every request of a keep-alive
  connection (slowloris);
- `MAX_CONNECTIONS` open at once (uvicorn answers 503 past it), kept well under the process's
  file-descriptor limit, whose soft value is raised to the hard one at start;
- TCP_NODELAY on every accepted socket (a listening socket made with protocol 0 leaves asyncio
  without it: 42 ms per keep-alive request).

Each bound is in docs/serving.md ("Bounds").
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import socket
import time
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEADER_TIMEOUT_S", "MAX_CONNECTIONS", "MAX_HEADER_BYTES", "BoundedH11Protocol", "QuietServer",
           "connection_cap", "raise_nofile_limit"]

log = logging.getLogger(__name__)

MAX_HEADER_BYTES = 16 * 1024  # request line + headers; a bearer token and a browser's headers fit in 4 KiB
HEADER_TIMEOUT_S = 10.0  # to send a complete request head
MAX_CONNECTIONS = 64  # a dashboard, a few scrapers and curl; never near the fd limit


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request head (uvicorn has none)."""

    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        _nodelay(transport)
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._arm_head_timer()  # the next request on a keep-alive connection: a new deadline
        super().data_received(data)
        if self.cycle is not None and not self.cycle.response_complete:
            self._disarm_head_timer()  # the head is complete: the app (and its limits) has it now

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        self._disarm_head_timer()
        self._head_timer = self.loop.call_later(HEADER_TIMEOUT_S, self._head_timeout)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
            return
        if self.conn.their_state is h11.IDLE or self.conn.their_state is h11.SEND_BODY:
            self.transport.close()


class QuietServer(uvicorn.Server):
    """uvicorn's server whose loop reports running out of file descriptors once a minute, in one line.

    asyncio logs a traceback for every failed accept(); under a connection flood that is thousands of
    lines a second, and a stderr nobody drains (a pipe) then blocks the loop that writes them.
    """

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        asyncio.get_running_loop().set_exception_handler(_ExceptionHandler())
        await super().serve(sockets)


class _ExceptionHandler:
    def __init__(self, every_s: float = 60.0) -> None:
        self.every_s, self._last, self._dropped = every_s, -every_s, 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
            now = time.monotonic()
            if now - self._last < self.every_s:
                self._dropped += 1
                return
            log.warning("hangwatch API: cannot accept connections (%s); %d more such errors not shown",
                        exc.strerror or exc, self._dropped)
            self._last, self._dropped = now, 0
            return
        loop.default_exception_handler(context)


def _nodelay(transport: asyncio.Transport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass  # a socket closing under us: nothing to tune


def raise_nofile_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one (systemd's soft default is 1024); returns the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


def connection_cap(nofile: int) -> int:
    """MAX_CONNECTIONS, or a quarter of the fd limit when that is lower: the loop keeps fds for /proc and py-spy."""
    return max(4, min(MAX_CONNECTIONS, nofile // 4))


def uvicorn_limits(nofile: int) -> dict[str, Any]:
    """The uvicorn.Config arguments that apply these bounds."""
    return {"http": BoundedH11Protocol, "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
            "limit_concurrency": connection_cap(nofile), "backlog": 128}
