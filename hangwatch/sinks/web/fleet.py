"""Several nodes at once: read each node's agent over its API and say which node stands apart.

A multi-node server runs one hangwatch per node. `Fleet` polls each agent's GET /snapshot (the page's
own data, so a node looks the same here as on its own page) and `apart()` names the node that
differs, in this order of evidence: its agent does not answer (its ranks never showed up); the
verdicts name ranks that all run on it; its ranks are furthest behind in the startup; it alone is
stalled or crashed.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hangwatch.errors import HangwatchError
from hangwatch.model import Phase
from hangwatch.redact import redact_string, terminal_text
from hangwatch.sinks.web import page_data
from hangwatch.userfile import read_user_file

__all__ = ["Fleet", "FleetError", "apart", "create_fleet_app", "node_name", "read_tokens", "summary_lines"]

_BAD = ("stalled", "crashed")


class FleetError(HangwatchError):
    pass


def node_name(url: str) -> str:
    """host:port: nodes of one machine (a lab) share a hostname, never a port."""
    parts = urllib.parse.urlsplit(url)
    return parts.netloc.rpartition("@")[2] or redact_string(url)  # never a user:password given in the URL


def token_lines(path: Path) -> list[str]:
    """The token file's lines, comments and blanks left out: a regular file, read bounded."""
    try:
        text = read_user_file(path, 1 << 20).decode("utf-8", "replace")
    except OSError as exc:
        raise FleetError(f"cannot read the token file {path}: {exc.strerror or exc}") from None
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def read_tokens(path: Path | None, urls: Sequence[str]) -> dict[str, str | None]:
    """URL -> token from a file holding one token for every node, or lines of `URL TOKEN`."""
    tokens: dict[str, str | None] = dict.fromkeys(urls)
    if path is None:
        return tokens
    lines = token_lines(path)
    if len(lines) == 1 and " " not in lines[0]:
        return dict.fromkeys(urls, lines[0])
    for line in lines:
        url, _, token = line.partition(" ")
        if url.rstrip("/") not in {u.rstrip("/") for u in urls} or not token.strip():
            raise FleetError(f"{path}: each line is 'URL TOKEN' for one of the nodes given (or the file is one token)")
        for u in urls:
            if u.rstrip("/") == url.rstrip("/"):
                tokens[u] = token.strip()
    return tokens


MAX_ANSWER = 8 << 20  # bytes of one agent's /snapshot: a node's page data is far smaller


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is that node's error: following it would send the bearer token (and trust) to
    wherever an agent points, and a loop of them would hold the poll."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        raise urllib.error.HTTPError(req.full_url, code, f"redirected to {redact_string(newurl)} (not followed)", headers, fp)


_OPENER = urllib.request.build_opener(_NoRedirect)


def fetch_node(url: str, token: str | None, timeout: float = 3.0) -> dict[str, Any]:
    """One node's NodeData from its agent's /snapshot; on failure a node with `error` set.

    The whole answer must arrive within `timeout` seconds (an agent that trickles bytes is cut off)
    and within MAX_ANSWER bytes; redirects are not followed; any shape of answer that is not a
    node's data is this node's error, never an exception."""
    name = node_name(url)
    request = urllib.request.Request(url.rstrip("/") + "/snapshot", headers={"Accept": "application/json"})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    deadline = time.monotonic() + timeout
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            body = json.loads(_read_bounded(response, deadline))
        node = _node_shape(body)
    except urllib.error.HTTPError as exc:
        why = "the token was refused (--token-file)" if exc.code == 401 else f"HTTP {exc.code}"
        if 300 <= exc.code < 400:
            why = f"HTTP {exc.code} {exc.msg}"
        return _down(name, url, why)
    except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError, TypeError, RecursionError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", None) or exc
        return _down(name, url, redact_string(str(reason))[:300])
    node.update(name=name, url=redact_string(url), error=None)
    return node


def _read_bounded(response: Any, deadline: float) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError("the answer did not arrive in time (a slow or stuck agent)")
        chunk = response.read1(64 << 10) if hasattr(response, "read1") else response.read(64 << 10)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_ANSWER:
            raise ValueError(f"the answer is larger than {MAX_ANSWER >> 20} MiB")
        chunks.append(chunk)


_NODE_FIELDS = ("verdict", "timeline", "stacks", "gpus", "history", "preflight")


def _node_shape(body: Any) -> dict[str, Any]:
    """The first node of a /snapshot answer, each field a dict or None, the fields `apart` reads typed:
    a malformed answer raises ValueError here, in this node's fetch, not later in the poll."""
    if not isinstance(body, dict) or not isinstance(body.get("nodes"), list) or not body["nodes"]:
        raise ValueError("malformed answer: no nodes in the /snapshot document")
    raw = body["nodes"][0]
    if not isinstance(raw, dict):
        raise ValueError("malformed answer: the node is not an object")
    node = dict(raw)
    for field in _NODE_FIELDS:
        if node.get(field) is not None and not isinstance(node[field], dict):
            raise ValueError(f"malformed answer: {field} is not an object")
    verdict = node.get("verdict")
    if verdict is not None:
        if not isinstance(verdict.get("ranks") or [], list) or not isinstance(verdict.get("phases") or {}, dict):
            raise ValueError("malformed answer: the verdict's ranks or phases")
        if not all(isinstance(r, str) for r in verdict.get("ranks") or []):
            raise ValueError("malformed answer: a rank is not a string")
    for key, field in (("timeline", "ranks"), ("stacks", "stacks")):
        inner = (node.get(key) or {}).get(field)
        if inner is not None and not (isinstance(inner, dict) and all(isinstance(k, str) for k in inner)):
            raise ValueError(f"malformed answer: {key}.{field}")
    ranks = ((node.get("timeline") or {}).get("ranks") or {}).values()
    if not all(isinstance(spans, list) and all(isinstance(span, dict) for span in spans) for spans in ranks):
        raise ValueError("malformed answer: timeline spans")
    return node


def _down(name: str, url: str, error: str) -> dict[str, Any]:
    return {"name": name, "url": redact_string(url), "error": error, "verdict": None, "timeline": None, "stacks": None,
            "gpus": None, "history": None, "preflight": None}


# ---------------------------------------------------------------- which node stands apart (pure)


def apart(nodes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """{"apart": [node names], "why": "..."}: the node that differs from the others, if one does."""
    up = [n for n in nodes if n.get("verdict")]
    down = [n for n in nodes if not n.get("verdict")]
    if down and up:
        errors = "; ".join(f"{n['name']}: {n.get('error') or 'no verdict yet'}" for n in down)
        return {"apart": [n["name"] for n in down], "why": f"its agent does not answer, so its ranks never showed up ({errors})"}
    if not up:
        return {"apart": [], "why": "no node's agent answers"}
    states = sorted({str(n["verdict"].get("state")) for n in up})
    if not any(n["verdict"].get("state") in _BAD for n in up):
        # while every node moves on (or is ready), nodes at different points of the start are normal
        return {"apart": [], "why": f"No node stands apart: {len(up)} node{'s' if len(up) > 1 else ''}, {' / '.join(states)}."}
    owner = _rank_owners(up)
    named = {(owner.get(r, n["name"]), r) for n in up for r in n["verdict"].get("ranks") or []}
    hosts = {node for node, _ in named}
    if len(hosts) == 1 and len(nodes) > 1:
        host = hosts.pop()
        ranks = ", ".join(sorted(r for _, r in named))
        causes = sorted({n["verdict"].get("cause") for n in up if n["verdict"].get("ranks")} - {None})
        return {"apart": [host], "why": f"the verdicts name its rank{'s' if ',' in ranks else ''} {ranks}"
                + (f" ({', '.join(causes)})" if causes else "")}
    behind = _behind(up)
    if behind:
        return behind
    bad = [n for n in up if n["verdict"].get("state") in _BAD]
    if len(bad) == 1 and len(up) > 1:
        v = bad[0]["verdict"]
        return {"apart": [bad[0]["name"]], "why": f"it alone is {v.get('state')}" + (f": {v.get('cause')}" if v.get("cause") else "")}
    return {"apart": [], "why": f"No node stands apart: {len(up)} node{'s' if len(up) > 1 else ''}, {' / '.join(states)}."}


def _rank_owners(nodes: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Rank -> the node it runs on: the node whose log it writes to, else the first whose stacks
    have it (on one host an agent also samples the other nodes' ranks, as peers: stacks, no log)."""
    owner: dict[str, str] = {}
    for key, field in (("timeline", "ranks"), ("stacks", "stacks")):
        for n in nodes:
            for rank in (n.get(key) or {}).get(field) or {}:
                if rank != "main" and not rank.isdigit():
                    owner.setdefault(rank, n["name"])
    return owner


def _progress(spans: Sequence[Mapping[str, Any]]) -> tuple[int, str] | None:
    if not spans:
        return None
    last = spans[-1]
    try:
        order = Phase(last.get("phase")).order
    except ValueError:
        return None
    ended = last.get("end") is not None
    return 2 * order + (1 if ended else 0), f"{last.get('phase')}{' (ended)' if ended else ''}"


def _behind(nodes: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The node holding the rank furthest behind, when exactly one node does and the others are further."""
    lowest: dict[str, tuple[int, str, str]] = {}
    for n in nodes:
        ranks = {r: s for r, s in ((n.get("timeline") or {}).get("ranks") or {}).items() if r != "main"}
        if not ranks:
            lowest[n["name"]] = (-1, "(none)", "no phase logged by any rank yet")
        for rank, spans in ranks.items():
            p = _progress(spans) if rank != "main" else None
            if p is not None and (n["name"] not in lowest or p[0] < lowest[n["name"]][0]):
                lowest[n["name"]] = (p[0], rank, p[1])
    if len(lowest) < 2:
        return None
    ranked = sorted(lowest.items(), key=lambda item: item[1][0])
    (name, (score, rank, where)), (_, (next_score, next_rank, next_where)) = ranked[0], ranked[1]
    if score == next_score:
        return None
    if score < 0:
        return {"apart": [name], "why": f"its ranks have logged no startup phase yet, while {next_rank} reached {next_where}"}
    return {"apart": [name], "why": f"its rank {rank} is furthest behind, in {where}, while {next_rank} reached {next_where}"}


# ---------------------------------------------------------------- polling


class Fleet:
    """Polls every node each `interval` seconds in a daemon thread; `data()` is the latest PageData.

    Each node is fetched in its own daemon thread with its own deadline (`timeout`): a slow agent
    costs its own row ("no answer yet"), never the others' freshness, and is not asked again while
    its last request is still out. Nothing here keeps the process alive at exit."""

    def __init__(self, urls: Sequence[str], tokens: Mapping[str, str | None], *, interval: float = 1.0,
                 timeout: float = 3.0) -> None:
        if not urls:
            raise FleetError("give the URL of at least one node's agent (hangwatch attach PID --serve)")
        for url in urls:
            if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
                raise FleetError(f"not an http(s) URL: {url}")
        self.urls, self.tokens, self.interval, self.timeout = list(urls), dict(tokens), interval, timeout
        self._lock = threading.Lock()
        self._data: dict[str, Any] | None = None
        self._latest: dict[str, dict[str, Any]] = {}
        self._inflight: dict[str, threading.Thread] = {}
        self._submit = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._down_since: dict[str, float] = {}  # url -> when its agent first stopped answering

    @property
    def holds_tokens(self) -> bool:
        """Some agent needs a token: its data is not for anyone who can reach the fleet page."""
        return any(self.tokens.get(url) for url in self.urls)

    def poll_once(self) -> dict[str, Any]:
        """Ask every node not still busy with the last request, wait for them up to `timeout`, publish."""
        deadline = time.monotonic() + self.timeout + 0.5
        with self._submit:  # the poll thread and a first page request may poll at once
            for url in self.urls:
                if url not in self._inflight or not self._inflight[url].is_alive():
                    thread = threading.Thread(target=self._fetch, args=(url,), name="hangwatch-fleet-node", daemon=True)
                    self._inflight[url] = thread
                    thread.start()
            waiting = list(self._inflight.values())
        for thread in waiting:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._submit:
            late = {url for url, thread in self._inflight.items() if thread.is_alive()}
        with self._lock:
            nodes = [_down(node_name(url), url, f"no answer within {self.timeout:g} s") if url in late or url not in self._latest
                     else self._latest[url] for url in self.urls]
        now = time.time()
        for index, node in enumerate(nodes):  # since when each agent has not answered ("unreachable since 20:41")
            if node.get("error"):
                nodes[index] = {**node, "down_since": self._down_since.setdefault(node["url"], now)}
            else:
                self._down_since.pop(node["url"], None)
        try:
            fleet = apart(nodes)
        except Exception as exc:  # noqa: BLE001 - whatever an agent sent, the poll goes on
            fleet = {"apart": [], "why": f"cannot compare the nodes: {type(exc).__name__}"}
        data = page_data("fleet", f"hangwatch fleet · {len(nodes)} nodes", nodes, generated_at=time.time(), fleet=fleet)
        with self._lock:
            self._data = data
        return data

    def _fetch(self, url: str) -> None:
        try:
            node = fetch_node(url, self.tokens.get(url), self.timeout)
        except Exception as exc:  # noqa: BLE001 - one node's failure is that node's row
            node = _down(node_name(url), url, f"{type(exc).__name__}: {redact_string(str(exc))[:200]}")
        with self._lock:
            self._latest[url] = node

    def data(self) -> dict[str, Any] | None:
        with self._lock:
            return self._data

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="hangwatch-fleet", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.poll_once()
            except Exception:  # noqa: BLE001 - the polling thread outlives any one bad round
                pass
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout + 2)


# ---------------------------------------------------------------- the fleet's own page


def create_fleet_app(fleet: Fleet, *, token: str | None = None) -> Any:
    """GET / (the page, fleet mode), /snapshot (every node's data), /report.html, /healthz; the API's guard.

    The fleet's page holds what its agents gave it: when they need a token, so does the page (a
    FleetError without one); without a token only loopback Host names are answered (DNS rebinding)."""
    from fastapi import FastAPI, Response
    from fastapi.responses import HTMLResponse

    from hangwatch.sinks.api import LOOPBACK_NAMES, RequestGuard, page_headers
    from hangwatch.sinks.web import render_page

    if fleet.holds_tokens and not token:
        raise FleetError("the nodes' agents need a token, so the fleet page needs one too: give --token "
                         "(or HANGWATCH_TOKEN), or it would hand their data to anyone who reaches it")
    app = FastAPI(title="hangwatch fleet", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.token = token
    app.state.hosts = set(LOOPBACK_NAMES)

    def current() -> dict[str, Any]:
        return fleet.data() or fleet.poll_once()

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "nodes": len(fleet.urls)}

    @app.get("/snapshot")
    def snapshot() -> Response:
        return Response(json.dumps(current()).encode(), media_type="application/json")

    @app.get("/", response_class=HTMLResponse)
    def page() -> HTMLResponse:
        html, policy = render_page("fleet", title=f"hangwatch fleet · {len(fleet.urls)} nodes", auth=bool(token))
        return HTMLResponse(html, headers=page_headers(policy))

    @app.get("/report.html", response_class=HTMLResponse)
    def report() -> HTMLResponse:
        data = {**current(), "mode": "report"}
        html, policy = render_page("report", title=data["title"], data=data)
        return HTMLResponse(html, headers=page_headers(policy))

    app.add_middleware(RequestGuard, token=token, max_body=64 * 1024, rate=50.0, hosts=app.state.hosts)
    return app


def summary_lines(data: Mapping[str, Any]) -> list[str]:
    """The fleet in a few lines for a terminal: which node stands apart, then each node. Every
    string came from an agent (a hostile one too): each line goes through `terminal_text`."""
    return [terminal_text(line) for line in _summary_lines(data)]


def _summary_lines(data: Mapping[str, Any]) -> list[str]:
    fleet = data.get("fleet") or {}
    names = fleet.get("apart") or []
    lines = [f"node {', '.join(names)} stands apart: {fleet.get('why')}" if names else str(fleet.get("why"))]
    for n in data.get("nodes") or []:
        v = n.get("verdict")
        if v is None:
            lines.append(f"  {n['name']:<22} unreachable  {n.get('error')}")
            continue
        ranks = ",".join(v.get("ranks") or [])
        phases = " ".join(f"{r}:{p}" for r, p in sorted((v.get("phases") or {}).items()))
        lines.append(f"  {n['name']:<22} {str(v.get('state')).upper():<11} {v.get('cause') or '-':<24} "
                     f"{('ranks ' + ranks) if ranks else ''} {phases}".rstrip())
    return lines
