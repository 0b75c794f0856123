"""One node's page data, taken from the API's own endpoints (so the page shows exactly what they serve).

`node_snapshot(app)` calls the route functions of /verdict, /timeline, /stacks, /gpus, /history and
/preflight in process, the way a client would see them: an endpoint that is not there (an older
agent, a feature not built in) or answers with an error is None, and the page leaves its section out.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from fastapi import FastAPI, Response
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

__all__ = ["NODE_PARTS", "node_snapshot"]

# NodeData key -> endpoint path
NODE_PARTS = {"verdict": "/verdict", "timeline": "/timeline", "stacks": "/stacks", "gpus": "/gpus",
              "history": "/history", "preflight": "/preflight"}


async def node_snapshot(app: FastAPI, name: str, url: str | None = None) -> dict[str, Any]:
    routes = {route.path: route for route in app.routes if isinstance(route, APIRoute) and "GET" in (route.methods or ())}
    node: dict[str, Any] = {"name": name, "url": url, "error": None}
    for key, path in NODE_PARTS.items():
        route = routes.get(path)
        node[key] = await _call(route.endpoint) if route else None
    return node


async def _call(endpoint: Any) -> Any:
    # Query(...) defaults hold their plain default in `.default` (history's limit=100)
    kwargs = {name: getattr(p.default, "default", p.default) for name, p in inspect.signature(endpoint).parameters.items()
              if p.default is not inspect.Parameter.empty}
    try:
        if inspect.iscoroutinefunction(endpoint):
            result = await endpoint(**kwargs)
        else:
            result = await run_in_threadpool(endpoint, **kwargs)
    except Exception:  # noqa: BLE001 - one part that fails (a damaged history) leaves its section out, not the page
        return None
    if isinstance(result, Response):
        if result.status_code != 200 or not result.media_type or "json" not in result.media_type:
            return None
        return json.loads(bytes(result.body))
    if hasattr(result, "model_dump"):
        return result.model_dump(mode="json")
    return result
