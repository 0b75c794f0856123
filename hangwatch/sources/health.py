"""Ask the engine itself whether it finished starting, when no log can tell.

Used only while the server's port is open and its log is unreadable (a pipe to a runtime on
another host, a journal we cannot read). One GET per tick at most, with a short timeout, on a
worker thread: the answer joins the next tick, so a server whose HTTP loop hangs never slows
the watch loop. Endpoints come from the engine (`Engine.health_endpoints`); one that answers
404/405 (another version) is dropped for the next. Once an endpoint said ready, nothing more is
asked: readiness is sticky, and SGLang's /health generates a token once the server is up.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from hangwatch.engines.endpoints import HealthEndpoint
from hangwatch.model import EndpointAnswer

__all__ = ["HealthProber", "ask", "probe_host"]

_TIMEOUT_S = 0.5
_MAX_BODY = 64 << 10
_GONE = frozenset({404, 405})  # this version has no such endpoint


def probe_host(host: str) -> str:
    """Where to connect for a server bound to `host`: a wildcard bind is reached on loopback."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host in ("::", "[::]"):
        return "::1"
    return host.strip("[]")


def ask(host: str, port: int, endpoint: HealthEndpoint, timeout_s: float = _TIMEOUT_S) -> EndpointAnswer:
    """One GET of `endpoint`; never raises. `ready` only for a real answer of a ready endpoint."""
    url = f"http://{host if ':' not in host else f'[{host}]'}:{port}{endpoint.path}"
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        conn.request("GET", endpoint.path, headers={"Accept": "application/json", "User-Agent": "hangwatch"})
        response = conn.getresponse()
        body = response.read(_MAX_BODY)
    except (OSError, http.client.HTTPException) as exc:
        return EndpointAnswer(url, None, False, f"no answer: {exc}")
    finally:
        conn.close()
    real = response.status == 200 and _holds(body, endpoint.json_key)
    detail = f"{response.status} {response.reason}".strip()
    if response.status == 200 and not real:
        detail += f": not this engine's answer (no {endpoint.json_key!r})"
    return EndpointAnswer(url, response.status, real and endpoint.proves == "ready", detail)


def _holds(body: bytes, key: str | None) -> bool:
    if key is None:
        return True
    try:
        data = json.loads(body)
    except ValueError:
        return False
    return isinstance(data, dict) and key in data


class HealthProber:
    """`poll()` once per tick: returns the newest answer, and starts the next request."""

    def __init__(self, endpoints: Sequence[HealthEndpoint], *, timeout_s: float = _TIMEOUT_S):
        self._endpoints = list(endpoints)
        self._timeout_s = timeout_s
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future[EndpointAnswer] | None = None
        self.answer: EndpointAnswer | None = None

    def poll(self, host: str, port: int) -> EndpointAnswer | None:
        self._collect()
        if self._pending is None and self._endpoints and not (self.answer and self.answer.ready):
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hangwatch-health")
            self._pending = self._pool.submit(ask, probe_host(host), port, self._endpoints[0], self._timeout_s)
        return self.answer

    def _collect(self) -> None:
        if self._pending is None or not self._pending.done():
            return
        answer, self._pending = self._pending.result(), None
        if answer.status in _GONE:
            self._endpoints.pop(0)
        self.answer = answer

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
