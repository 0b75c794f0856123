"""The web page: one renderer (page.html + page.css + page.js) for the live page, the report and the fleet.

The three differ only in where the page's JavaScript gets its data:

* ``live``: it polls the API it was served from (/verdict, /timeline, /stacks, /gpus, /history,
  /preflight) every second, with the bearer token the user typed (kept in sessionStorage);
* ``report``: the data is embedded in the file (`hangwatch diagnose --html`, GET /report.html);
* ``fleet``: it polls /fleet.json of `hangwatch fleet`, which reads several nodes' APIs.

The data the script draws (embedded, or assembled from the endpoints) is a `PageData` dict:
``{"mode", "title", "generated_at", "nodes": [NodeData, ...], "fleet": {...} | None}`` where a node is
``{"name", "url", "error", "verdict", "timeline", "stacks", "gpus", "history", "preflight"}`` and each
of the last six is the JSON body of the endpoint of that name (None when absent).

Everything is inlined in one HTML document: no CDN, no second request, and a Content-Security-Policy
(`csp()`) that allows no network access but the page's own origin.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any, Literal

__all__ = ["Mode", "csp", "page_data", "render_page"]

Mode = Literal["live", "report", "fleet"]


@cache
def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _script_json(value: Any) -> str:
    """JSON safe inside <script>: no `</script>`, no `<!--`, no U+2028/9 line breaks in old parsers."""
    text = json.dumps(value, separators=(",", ":"), default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def csp(script: str, style: str) -> str:
    """Only the inline script and style (by hash) run; fetches go to the page's own origin, nowhere else."""
    return (f"default-src 'none'; script-src {_sha256(script)}; style-src {_sha256(style)}; "
            "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'")
    # frame-ancestors is added to the HTTP header only: browsers log an error for it in a <meta> policy.


def render_page(mode: Mode, *, title: str = "hangwatch", data: Mapping[str, Any] | None = None,
                auth: bool = False) -> tuple[str, str]:
    """The HTML document and its Content-Security-Policy.

    `data` (a PageData dict) is embedded for reports; live and fleet pages fetch theirs. `auth`: the
    API wants a bearer token, so the page asks for it before its first fetch.
    """
    config = {"mode": mode, "data": data, "auth": auth}
    script = "window.HW_CONFIG=" + _script_json(config) + ";\n" + _asset("page.js")
    style = _asset("page.css")
    policy = csp(script, style)
    page = _asset("page.html")
    replacements = {"{{TITLE}}": _html(title), "{{CSP}}": _html(policy), "{{STYLE}}": style, "{{SCRIPT}}": script}
    html = re.sub(r"\{\{[A-Z]+\}\}", lambda m: replacements[m.group(0)], page)
    return html, policy


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def page_data(mode: Mode, title: str, nodes: list[dict[str, Any]], *, generated_at: float,
              fleet: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A PageData dict (see the module docstring)."""
    return {"mode": mode, "title": title, "generated_at": generated_at, "nodes": nodes,
            "fleet": dict(fleet) if fleet else None}
