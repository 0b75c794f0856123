"""An engine's own HTTP endpoints that say whether it finished starting, without generating.

Asked only when the port is open and no log can be read (see sources/health.py). A probe must
never send a generation request: a starting server's warm-up may be the very thing that hangs,
and a health check that generates (SGLang's `/health` once the server is up, `/health_generate`)
would queue behind it or disturb it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HealthEndpoint"]


@dataclass(frozen=True)
class HealthEndpoint:
    """GET `path`; a 200 answer `proves` "ready" (the start finished) or only "up" (HTTP serves).

    `json_key`: the answer must be a JSON object holding this key (a real answer of this
    engine, not some other program's 200 on the port).
    """

    path: str
    proves: str = "ready"  # "ready" | "up"
    json_key: str | None = None
