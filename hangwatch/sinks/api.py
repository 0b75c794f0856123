"""The HTTP API: FastAPI on uvicorn, in a daemon thread of the watcher's process.

Endpoints only read the `WatchView` (a few reference copies under its lock), so the loop never
waits on a request and a request never waits on a tick. Nothing here runs a program or writes a
file. Every response passes through `hangwatch.redact`; a guard in front of the app bounds body
size (413) and request rate per client (429) and checks the bearer token (401) on every path but
/healthz.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import socket
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import uvicorn
from fastapi import FastAPI, Query, Request, Response
from fastapi.responses import HTMLResponse
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from pydantic import BaseModel, ConfigDict

from hangwatch._version import __version__
from hangwatch.bundle import bundle_tarball_bytes
from hangwatch.errors import HangwatchError
from hangwatch.model import GpuSample, Verdict
from hangwatch.redact import redact_files, redacted, redacted_verdict
from hangwatch.sinks.http_limits import QuietServer, raise_nofile_limit, uvicorn_limits
from hangwatch.sinks.launchid import AgentLabels
from hangwatch.sinks.metrics import make_registry
from hangwatch.sinks.store import AlertRecord, Episode, HistoryStore, Refinement, Transition
from hangwatch.sinks.web import Mode, page_data, render_page
from hangwatch.sinks.web.snapshot import node_snapshot
from hangwatch.watch.published import WatchView

__all__ = ["LOOPBACK_NAMES", "RequestGuard", "ServeError", "ServerHandle", "create_app", "is_loopback", "serve_in_thread"]

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 9464
_JSON = "application/json"


class ServeError(HangwatchError):
    help_text = ("hangwatch serves on 127.0.0.1:9464 by default. To bind elsewhere pass --token TOKEN (clients send "
                 "'Authorization: Bearer TOKEN'), or --insecure on a network you trust; use --port for another port.")


# ---------------------------------------------------------------- response models (the OpenAPI schema)


class FactModel(BaseModel):
    text: str
    source: str


class RunnerUpModel(BaseModel):
    cause: str
    rule: str
    confidence: float


class MissingModel(BaseModel):
    source: str
    reason: str
    hint: str | None


class RefinementModel(BaseModel):
    at: float
    cause: str
    confidence: float


class EpisodeModel(BaseModel):
    id: str
    started_at: float
    state: Literal["stalled", "crashed", "resolved", "stopped"]
    cause: str | None
    refined: list[RefinementModel]


class BlockerModel(BaseModel):
    rank: str | None
    pid: int | None
    waits_on: str
    frame: str | None
    state: str | None
    for_s: float | None
    chain: list[str] = []
    definite: bool = False


class EtaModel(BaseModel):
    ready_in_s: float | None
    from_starts: int
    budget_s: float | None
    overdue_s: float | None = None
    usual_s: float | None = None


class VerdictModel(BaseModel):
    """The same shape as `hangwatch diagnose --json` (Verdict.to_dict)."""

    state: Literal["starting", "progressing", "stalled", "ready", "crashed", "stopped", "unknown"]
    cause: str | None
    confidence: float
    confidence_label: Literal["low", "medium", "high"]
    rule: str | None
    title: str | None
    message: str | None
    phase: str | None
    phases: dict[str, str]
    evidence: list[FactModel]
    remedy: str | None
    ranks: list[str]
    runners_up: list[RunnerUpModel]
    missing: list[MissingModel]
    since_s: float | None
    engine: str | None
    references: list[str]
    episode: EpisodeModel | None = None  # live: the stall episode (docs/live.md)
    blocker: BlockerModel | None = None  # live: the end of the wait-for chain
    eta: EtaModel | None = None  # live: when it should be ready, from past starts


class StartupModel(BaseModel):
    """GET /startupz: a k8s startupProbe target; 200 only once the server is ready."""

    ready: bool
    state: str | None
    phase: str | None
    elapsed_s: float | None  # since the watch began
    eta: EtaModel | None
    cause: str | None


class HealthModel(BaseModel):
    status: Literal["ok", "stale"]  # stale (503): the watch loop has not ticked for `stale_after_s`
    ticks: int  # watch-loop ticks so far: a probe can check that it grows
    state: str | None  # None before the first verdict


class StacksModel(BaseModel):
    server: str
    stacks: dict[str, list[dict[str, Any]]]  # rank label -> threads, each {"name", "frames": [...], ...}
    # every rank's main-thread stack merged (root first), ranks marked per frame (docs/live.md)
    tree: dict[str, Any] = {}


class PhaseSpanModel(BaseModel):
    model_config = ConfigDict(extra="allow")  # the loop may add detail (line numbers, progress)
    phase: str
    at: float | None
    end: float | None = None


class TimelineModel(BaseModel):
    server: str
    ranks: dict[str, list[PhaseSpanModel]]
    # the clock of `at`/`end`: seconds since the watch began at `started_at` (epoch); `now` on that clock
    started_at: float | None = None
    now: float | None = None


class GpuModel(BaseModel):
    index: int
    name: str | None
    memory_used_mib: float | None
    memory_total_mib: float | None
    utilization_pct: float | None


class GpuSampleModel(BaseModel):
    t: float  # seconds since the watch began (the timeline's clock)
    gpus: list[GpuModel]


class GpusModel(BaseModel):
    server: str
    started_at: float | None
    samples: list[GpuSampleModel]


class HistoryModel(BaseModel):
    enabled: bool  # False when the daemon runs without a history store
    # the store's own records: pydantic builds their schemas from the dataclasses
    transitions: list[Transition]
    alerts: list[AlertRecord]
    episodes: list[Episode] = []  # stall episodes, newest first
    refinements: list[Refinement] = []  # causes refined inside an episode, newest first


class ErrorModel(BaseModel):
    detail: str


_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorModel, "description": "Missing or wrong bearer token"},
    413: {"model": ErrorModel, "description": "Request body too large"},
    429: {"model": ErrorModel, "description": "Too many requests from this client"},
}


# ---------------------------------------------------------------- the app


def create_app(
    view: WatchView,
    *,
    token: str | None = None,
    store: HistoryStore | None = None,
    max_body: int = 64 * 1024,
    rate: float | None = 50.0,
    registry: CollectorRegistry | None = None,
    preflight: Mapping[str, Any] | None = None,
    stale_after_s: float = 30.0,
    hosts: Sequence[str] = (),
    agent: AgentLabels | None = None,
) -> FastAPI:
    """The API over `view`. `rate`: requests per second per client address (burst 2x); None: unbounded.
    `preflight`: the report of the preflight run before this launch (`hangwatch run`), served at /preflight.

    Without a token, only requests whose Host header names loopback (or one of `hosts`) are served:
    a web page on another origin could otherwise read /bundle through DNS rebinding.
    """
    app = FastAPI(title="hangwatch", version=__version__, description=_DESCRIPTION, responses=_ERRORS)
    app.state.token = token
    app.state.hosts = set(LOOPBACK_NAMES) | {h.lower() for h in hosts}
    registry = registry if registry is not None else make_registry(view, agent=agent)
    _routes(app, view, store, registry, stale_after_s)
    _preflight_route(app, preflight)
    app.add_middleware(RequestGuard, token=token, max_body=max_body, rate=rate, hosts=app.state.hosts)
    return app


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "localhost.localdomain", "ip6-localhost")


_DESCRIPTION = ("Why is this SGLang/vLLM server stuck starting? The latest verdict, stacks, phases, metrics, "
                "an evidence bundle and the alert history of one watched server. Read-only.")


def _preflight_route(app: FastAPI, report: Mapping[str, Any] | None) -> None:
    @app.get("/preflight", summary="The preflight before this launch: {findings, checked, skipped}",
             responses={404: {"model": ErrorModel, "description": "No preflight ran (attach, or run --no-preflight)"}})
    def preflight() -> Response:
        if report is None:
            return _json_response({"detail": "no preflight ran for this server (hangwatch run runs one; attach does not)"}, 404)
        return _json_response(dict(report), 200)


def _routes(app: FastAPI, view: WatchView, store: HistoryStore | None, registry: CollectorRegistry,
            stale_after_s: float = 30.0) -> None:
    cache = _VerdictCache()
    bundles = _BundleCache(view)

    @app.get("/healthz", response_model=HealthModel, summary="Liveness (no token needed)")
    async def healthz() -> Any:
        latest, age = view.latest(), view.tick_age_s()
        verdict, stale = latest.verdict, age > stale_after_s
        body = {"status": "stale" if stale else "ok", "ticks": latest.tick,
                "state": verdict.state.value if verdict else None}
        return _json_response(body, 503) if stale else body

    @app.get("/verdict", response_model=VerdictModel, summary="The latest verdict (as `diagnose --json`)",
             responses={503: {"model": ErrorModel, "description": "No verdict yet"}})
    async def verdict() -> Response:
        current = view.latest().verdict
        if current is None:
            return _json_response({"detail": "no verdict yet"}, 503, {"Retry-After": "1"})
        return Response(cache.body(current), media_type=_JSON)

    @app.get("/stacks", response_model=StacksModel, summary="The latest Python stacks per rank")
    def stacks() -> dict[str, Any]:
        latest = view.latest()
        return {"server": view.server_name, "stacks": redacted(dict(latest.stacks)),
                "tree": redacted(dict(latest.stack_tree))}

    @app.get("/startupz", response_model=StartupModel, summary="Startup probe: 200 once ready, else 503 (no token needed)",
             responses={503: {"model": StartupModel, "description": "Not ready yet (the body says why)"}})
    def startupz() -> Response:
        body = startup_body(view)
        return _json_response(redacted(body), 200 if body["ready"] else 503)

    @app.get("/timeline", response_model=TimelineModel, summary="Startup phases per rank, with times")
    def timeline() -> dict[str, Any]:
        started = getattr(view, "started_at", None)
        return {"server": view.server_name, "ranks": redacted(dict(view.latest().timeline)), "started_at": started,
                "now": None if started is None else round(time.time() - started, 3)}

    @app.get("/gpus", response_model=GpusModel, summary="Per-GPU memory and utilisation over time")
    def gpus() -> dict[str, Any]:
        return {"server": view.server_name, "started_at": getattr(view, "started_at", None),
                "samples": gpu_history(list(view.latest().gpu_samples))}

    @app.get("/history", response_model=HistoryModel,
             summary="Past verdict transitions, episodes and alert deliveries of this server (?all=1: of every server)")
    def history(limit: int = Query(100, ge=1, le=1000), all: bool = Query(False)) -> Any:  # noqa: A002
        if store is None:
            return {"enabled": False, "transitions": [], "alerts": [], "episodes": [], "refinements": []}
        # a history file may hold other servers' records (--history shared by several agents)
        server = None if all else redacted(view.server_name)
        try:
            return redacted({"enabled": True, "transitions": [t.to_dict() for t in store.transitions(limit, server)],
                             "alerts": [a.to_dict() for a in store.alerts(limit, server)],
                             "episodes": [dict(e.__dict__) for e in store.episodes(limit, server)],
                             "refinements": [r.to_dict() for r in store.refinements(limit, server)]})
        except sqlite3.Error as exc:  # damaged since start: say so, the rest of the API goes on
            return _json_response({"detail": f"the history cannot be read: {exc}"}, 503)

    @app.get("/bundle", summary="The current evidence as a bundle (.tar.gz, secrets redacted)",
             response_class=Response, responses={200: {"content": {"application/gzip": {}}}})
    def bundle() -> Response:
        data = bundles.get()
        name = f"hangwatch-{_safe(view.server_name)}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.tar.gz"
        return Response(data, media_type="application/gzip",
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})

    @app.get("/metrics", summary="Prometheus metrics (text format; OpenMetrics on request)",
             response_class=Response, responses={200: {"content": {"text/plain": {}}}})
    def metrics(request: Request) -> Response:
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encoder(registry), headers={"Content-Type": content_type})

    @app.get("/snapshot", summary="Everything the page draws: {mode, title, nodes: [this agent's endpoints]}")
    async def snapshot() -> Response:
        return _json_response(await _page_data(app, view, "live"), 200)

    @app.get("/", response_class=HTMLResponse, summary="The live page (no token needed: it holds no data)")
    def page() -> HTMLResponse:
        html, policy = render_page("live", title=f"hangwatch · {view.server_name}", auth=bool(app.state.token))
        return HTMLResponse(html, headers=page_headers(policy))

    @app.get("/report.html", response_class=HTMLResponse, summary="This page as one self-contained HTML file")
    async def report() -> HTMLResponse:
        data = await _page_data(app, view, "report")
        html, policy = render_page("report", title=data["title"], data=data)
        name = f"hangwatch-{_safe(view.server_name)}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.html"
        return HTMLResponse(html, headers={**page_headers(policy), "Content-Disposition": f'inline; filename="{name}"'})


async def _page_data(app: FastAPI, view: WatchView, mode: Mode) -> dict[str, Any]:
    node = await node_snapshot(app, socket.gethostname())
    return page_data(mode, f"hangwatch · {view.server_name}", [node], generated_at=time.time())


def page_headers(policy: str) -> dict[str, str]:
    return {"Content-Security-Policy": policy + "; frame-ancestors 'none'", "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}


def gpu_history(samples: list[GpuSample], limit: int = 600) -> list[dict[str, Any]]:
    """The newest `limit` samples (thinned evenly when there are more), as plain dicts."""
    step = max(1, -(-len(samples) // limit))
    kept = samples[::-1][::step][::-1]
    return [{"t": round(s.t, 2), "gpus": [{"index": g.index, "name": g.name, "memory_used_mib": g.memory_used_mib,
                                          "memory_total_mib": g.memory_total_mib, "utilization_pct": g.utilization_pct}
                                         for g in s.gpus]} for s in kept]


def startup_body(view: WatchView) -> dict[str, Any]:
    """What /startupz says: state, phase, time watched, ETA and cause (k8s shows it on a failed probe)."""
    latest = view.latest()
    verdict, obs = latest.verdict, latest.observation
    return {
        "ready": verdict is not None and verdict.state.value == "ready",
        "state": verdict.state.value if verdict else None,
        "phase": verdict.phase.value if verdict and verdict.phase else None,
        "elapsed_s": round(obs.t, 1) if obs is not None else None,
        "eta": verdict.eta.to_dict() if verdict and verdict.eta else None,
        "cause": verdict.cause if verdict else None,
    }


class _VerdictCache:
    """Redacts and encodes each verdict once: the loop replaces it about once a second, clients poll faster."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._verdict: Verdict | None = None
        self._body = b""

    def body(self, verdict: Verdict) -> bytes:
        with self._lock:
            if verdict is not self._verdict:
                self._body = json.dumps(redacted_verdict(verdict)).encode()
                self._verdict = verdict
            return self._body


class _BundleCache:
    """One bundle per tick, built by one request at a time: four clients polling /bundle cost one build
    per tick, not four (the probe saw the loop slow to half its rate), and no more than one core."""

    def __init__(self, view: WatchView) -> None:
        self._view, self._lock = view, threading.Lock()
        self._tick, self._data = -1, b""

    def get(self) -> bytes:
        with self._lock:
            latest = self._view.latest()
            if latest.tick != self._tick or not self._data:
                self._data = bundle_tarball_bytes(latest.bundle_files())  # redacted by the writer
                self._tick = latest.tick
            return self._data


def redacted_files(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """Bundle files with secrets masked (hangwatch.redact.redact_files)."""
    return redact_files(files)


def _json_response(body: dict[str, Any], status: int, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body).encode(), status_code=status, media_type=_JSON, headers=headers)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:64] or "server"


# ---------------------------------------------------------------- the guard (plain ASGI: cheap per request)


# The page itself holds no data (it fetches /snapshot with the token the user types), so it is open.
# /startupz is a kubelet's startupProbe target, and a probe cannot read a Secret into a header: it
# says only state, phase, times and the cause id (no stacks, command lines, logs or evidence).
_OPEN_PATHS = frozenset({"/healthz", "/startupz", "/"})


class RequestGuard:
    """413 for big bodies, 429 past `rate` per client address, 401 without the bearer token."""

    def __init__(self, app: Any, *, token: str | None, max_body: int, rate: float | None,
                 hosts: set[str] | None = None) -> None:
        self.app, self.max_body, self._hosts = app, max_body, hosts
        self._token = f"Bearer {token}".encode() if token else None
        self._limiter = _RateLimiter(rate) if rate else None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        if not self._token and self._hosts is not None and not _host_allowed(headers.get(b"host", b""), self._hosts):
            return await _send_json(send, 421, "unknown Host header (hangwatch answers loopback names only without a token)")
        if _content_length(headers) > self.max_body:
            return await _send_json(send, 413, "request body too large")
        if b"transfer-encoding" in headers:
            receive = await self._buffer(receive)
            if receive is None:
                return await _send_json(send, 413, "request body too large")
        client = (scope.get("client") or ("?", 0))[0]
        if self._limiter and not self._limiter.allow(client):
            return await _send_json(send, 429, "too many requests", [(b"retry-after", b"1")])
        if self._token and scope["path"] not in _OPEN_PATHS and not self._authorised(headers):
            return await _send_json(send, 401, "missing or wrong bearer token", [(b"www-authenticate", b"Bearer")])
        await self.app(scope, receive, send)

    def _authorised(self, headers: dict[bytes, bytes]) -> bool:
        return hmac.compare_digest(headers.get(b"authorization", b""), self._token or b"")

    async def _buffer(self, receive: Any) -> Any:
        """Read a chunked body up to max_body; a replaying `receive`, or None when it is too big."""
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > self.max_body:
                return None
        body = b"".join(chunks)

        async def replay() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        return replay


class _RateLimiter:
    """A token bucket per client address; runs on the event loop thread only, so no lock."""

    def __init__(self, rate: float, *, max_clients: int = 10_000) -> None:
        self.rate, self.burst, self.max_clients = rate, 2 * rate, max_clients
        self._buckets: dict[str, tuple[float, float]] = {}

    def allow(self, client: str) -> bool:
        now = time.monotonic()
        tokens, last = self._buckets.get(client, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        if len(self._buckets) >= self.max_clients and client not in self._buckets:
            self._buckets.clear()  # a flood of addresses: forget them all rather than grow without bound
        self._buckets[client] = (tokens - 1 if tokens >= 1 else tokens, now)
        return tokens >= 1


def _host_allowed(raw: bytes, hosts: set[str]) -> bool:
    """`127.0.0.1:9464`, `[::1]:9464`, `localhost` -> the name without port, checked against `hosts`."""
    if "*" in hosts:
        return True
    host = raw.decode("latin-1").strip().lower()
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".") in hosts


def _content_length(headers: dict[bytes, bytes]) -> int:
    try:
        return int(headers.get(b"content-length", b"0") or 0)
    except ValueError:
        return 0  # h11 has already rejected a malformed length; nothing to bound here

async def _send_json(send: Any, status: int, detail: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


# ---------------------------------------------------------------- serving


@dataclass
class ServerHandle:
    server: uvicorn.Server
    thread: threading.Thread
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def stop(self, timeout: float = 5.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_in_thread(
    app: FastAPI,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    token: str | None = None,
    insecure: bool = False,
    log_level: str = "warning",
    start_timeout: float = 10.0,
) -> ServerHandle:
    """Start uvicorn for `app` in a daemon thread and return once it accepts connections (port 0: any free)."""
    token = token or app.state.token
    if token and token != app.state.token:
        raise ServeError("the token given to serve_in_thread differs from the one the app checks")
    if not is_loopback(host) and not token and not insecure:
        raise ServeError(f"refusing to serve on {host} without --token (or --insecure): the API shows stacks, "
                         "command lines and logs of the watched server")
    sock = _bind(host, port)
    hosts = getattr(app.state, "hosts", None)
    if hosts is not None:
        hosts.add("*" if not is_loopback(host) else host.strip("[]").lower())  # off loopback the token guards
    nofile = raise_nofile_limit()
    config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="off", proxy_headers=False,
                            server_header=False, timeout_keep_alive=5, **uvicorn_limits(nofile))
    server = QuietServer(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="hangwatch-api", daemon=True)
    thread.start()
    _wait_started(server, thread, start_timeout)
    return ServerHandle(server, thread, host, sock.getsockname()[1])


def _bind(host: str, port: int) -> socket.socket:
    # Bound here, not by uvicorn, so "address in use" is a clear error now and port 0 reports its port.
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted sockets only then
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock


def _wait_started(server: uvicorn.Server, thread: threading.Thread, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise ServeError("the HTTP server did not start (see the log above)")
        time.sleep(0.01)
