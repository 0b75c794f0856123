"""A small client for Prometheus's HTTP API: instant queries, with a timeout and a size cap.

The fleet reads every agent's `hangwatch_*` series from the Prometheus that already scrapes them
(`hangwatch fleet --prometheus URL`), so the fleet's cost is a few queries, not one request per node.
Redirects are refused (a query must not be carried to another host with its token), the answer is
read up to `max_bytes`, and every error is one line that names the server and what failed.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hangwatch.errors import HangwatchError
from hangwatch.redact import redact_string

__all__ = ["PrometheusClient", "PrometheusError", "Sample", "selector_matchers"]


class PrometheusError(HangwatchError):
    pass


@dataclass(frozen=True)
class Sample:
    """One series of an instant vector: its labels and its value at the query's time."""

    labels: Mapping[str, str]
    value: float


_MATCHER = re.compile(r'\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*')


def selector_matchers(selector: str) -> str:
    """The label matchers inside `{...}` (checked one by one), to put after each metric's name."""
    text = selector.strip()
    if not text:
        return ""
    if not (text.startswith("{") and text.endswith("}")):
        raise PrometheusError(f'--selector must be label matchers in braces, e.g. {{job="hangwatch"}}; got {selector!r}')
    inner = text[1:-1].strip().rstrip(",")
    position = 0
    while position < len(inner):
        match = _MATCHER.match(inner, position)
        if match is None:
            raise PrometheusError(f"--selector: cannot read a label matcher at {inner[position:position + 30]!r}")
        position = match.end()
        if position < len(inner):
            if inner[position] != ",":
                raise PrometheusError(f"--selector: expected ',' at {inner[position:position + 30]!r}")
            position += 1
    return inner


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        raise urllib.error.HTTPError(req.full_url, code, f"redirect to {newurl} refused", headers, fp)


class PrometheusClient:
    """GET /api/v1/query against one Prometheus (or anything that speaks its API: Thanos, Mimir)."""

    def __init__(self, url: str, *, timeout: float = 5.0, token: str | None = None, max_bytes: int = 64 << 20) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise PrometheusError(f"--prometheus wants an http(s) URL, e.g. http://prometheus:9090; got {url!r}")
        self.url, self.timeout, self.max_bytes = url.rstrip("/"), timeout, max_bytes
        self._token = token
        self._opener = urllib.request.build_opener(_NoRedirect)
        self.queries = 0  # how many this client sent (the bench reports it)

    def query(self, expr: str) -> list[Sample]:
        """An instant query at the server's now; a vector's series (a scalar is one series without labels)."""
        body = urllib.parse.urlencode({"query": expr}).encode()
        request = urllib.request.Request(f"{self.url}/api/v1/query", data=body, method="POST",
                                         headers={"Accept": "application/json",
                                                  "Content-Type": "application/x-www-form-urlencoded"})
        if self._token:
            request.add_header("Authorization", f"Bearer {self._token}")
        self.queries += 1
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                raw = response.read(self.max_bytes + 1)
        except urllib.error.HTTPError as exc:
            raise PrometheusError(f"Prometheus at {self.url}: {self._http_error(exc)}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise PrometheusError(f"cannot reach Prometheus at {self.url}: {redact_string(str(reason))}") from None
        if len(raw) > self.max_bytes:
            raise PrometheusError(f"Prometheus at {self.url}: the answer to {expr!r} is over {self.max_bytes} bytes")
        return _samples(self.url, expr, raw)

    @staticmethod
    def _http_error(exc: urllib.error.HTTPError) -> str:
        if exc.code in (401, 403):
            return f"HTTP {exc.code}: the token was refused (HANGWATCH_PROMETHEUS_TOKEN)"
        try:
            detail = json.loads(exc.read(65536)).get("error")
        except (ValueError, OSError, AttributeError):
            detail = None
        return f"HTTP {exc.code}" + (f": {redact_string(str(detail))[:300]}" if detail else f" ({exc.reason})")


def _samples(url: str, expr: str, raw: bytes) -> list[Sample]:
    try:
        body = json.loads(raw)
        data = body["data"]
        kind, result = data["resultType"], data["result"]
    except (ValueError, KeyError, TypeError):
        raise PrometheusError(f"{url} did not answer as Prometheus's API does (no data.result)") from None
    if body.get("status") != "success":
        raise PrometheusError(f"Prometheus at {url}: {body.get('error') or 'the query failed'}: {expr}")
    try:
        if kind == "scalar":
            return [Sample({}, float(result[1]))]
        if kind != "vector":
            raise PrometheusError(f"Prometheus at {url}: {expr} gave a {kind}, not an instant vector")
        return [Sample({str(k): str(v) for k, v in item["metric"].items()}, float(item["value"][1])) for item in result]
    except (KeyError, IndexError, TypeError, ValueError):
        raise PrometheusError(f"Prometheus at {url}: a malformed series in the answer to {expr}") from None
