"""`hangwatch fleet --prometheus URL`: the fleet as the Prometheus that scrapes its agents sees it."""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
import threading
from pathlib import Path

__all__ = ["prom_fleet"]


def prom_fleet(prometheus: str, *, selector: str, token_file: Path | None, host: str, port: int, token: str | None,
               insecure: bool, json_out: bool, serve: bool, interval: float) -> None:
    """Print the fleet once (a summary, or `--json`), or serve its page (`--serve`) until Ctrl-C."""
    from hangwatch.sinks.web.promfleet import PromFleet, summary_text, token_map
    from hangwatch.sources.prometheus import PrometheusClient

    client = PrometheusClient(prometheus, token=os.environ.get("HANGWATCH_PROMETHEUS_TOKEN") or None)
    watcher = PromFleet(client, selector=selector, tokens=token_map(token_file), interval=max(interval, 1.0))
    if not serve:
        watcher.poll_once()
        watcher.stop()
        summary = watcher.summary() or {}
        print(json.dumps(summary, indent=1) if json_out else "\n".join(summary_text(summary)))
        return
    from hangwatch.sinks.api import serve_in_thread
    from hangwatch.sinks.web.fleet import create_fleet_app

    watcher.poll_once()  # a wrong URL or selector fails now, as one line, not later in a thread
    if token is None and watcher.holds_tokens:
        # the page would hold token-protected agents' details: it needs a token too (as `fleet URL...`)
        distinct = {t for t in watcher.tokens.values() if t}
        token, said = (distinct.pop(), "the agents' token") if len(distinct) == 1 else (secrets.token_urlsafe(24), "")
        said = said or f"this token: {token}"
        print(f"hangwatch fleet: the agents need a token, so the page does too; open it with {said}", file=sys.stderr)
    app = create_fleet_app(watcher, token=token)  # type: ignore[arg-type]  # PromFleet has Fleet's face
    handle = serve_in_thread(app, host, port, token=token, insecure=insecure)
    watcher.start()
    print(f"hangwatch fleet: {len(watcher.urls)} nodes from {prometheus}; open {handle.url}/", file=sys.stderr)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    last: str | None = None
    try:
        while not stop.wait(watcher.interval):
            latest = watcher.data()
            fleet = (latest or {}).get("fleet") or {}
            line = fleet.get("why")
            if line and line != last:
                print(f"hangwatch fleet: {line}", file=sys.stderr, flush=True)
                last = line
    finally:
        watcher.stop()
        handle.stop()
