"""`hangwatch fleet URL...`: every node's agent in one page and one summary (multi-node servers)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated

import typer


def fleet(
    urls: Annotated[list[str] | None, typer.Argument(help="Each node's agent (hangwatch attach PID --serve), e.g. http://node1:9464.")] = None,
    token_file: Annotated[Path | None, typer.Option(
        "--token-file", help="The nodes' bearer token: a file with one token, or lines 'URL TOKEN'.")] = None,
    host: Annotated[str, typer.Option("--host", help="Address of the fleet page.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port of the fleet page.")] = 9465,
    token: Annotated[str | None, typer.Option("--token", envvar="HANGWATCH_TOKEN",
                                                 help="Bearer token the fleet page requires.")] = None,
    insecure: Annotated[bool, typer.Option("--insecure", help="Allow a non-loopback page without a token.")] = False,
    once: Annotated[bool, typer.Option("--once", help="Read every node once, print the summary and exit.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="With --once: print the fleet's JSON (the page's data); with --prometheus: the fleet's summary as one JSON object.")] = False,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between reads of the nodes.", min=0.2)] = 1.0,
    prometheus: Annotated[str | None, typer.Option("--prometheus", help="Read the fleet from the Prometheus that scrapes the agents (instead of URLs), e.g. http://prometheus:9090.")] = None,
    selector: Annotated[str, typer.Option("--selector", help="With --prometheus: which agents, as label matchers, e.g. '{job=\"hangwatch\"}'.")] = "",
    serve: Annotated[bool, typer.Option("--serve", help="With --prometheus: serve the fleet page (else print once and exit).")] = False,
) -> None:
    """Show several nodes' agents as one: all ranks in one timeline and one stack tree, and the node that stands apart.

    With --prometheus URL the nodes come from Prometheus (a few queries, whatever the fleet's size),
    grouped by launch; only the nodes that stand apart are asked for their details.
    """
    if prometheus is not None:
        if urls:
            raise typer.BadParameter("give agents' URLs or --prometheus, not both", param_hint="--prometheus")
        from hangwatch.cli.promfleet import prom_fleet

        prom_fleet(prometheus, selector=selector, token_file=token_file, host=host, port=port, token=token,
                   insecure=insecure, json_out=json_out, serve=serve, interval=interval)
        return
    if not urls:
        raise typer.BadParameter("give each node's agent URL, or --prometheus URL", param_hint="URLS")
    from hangwatch.sinks.web.fleet import (
        Fleet,
        create_fleet_app,
        read_tokens,
        summary_lines,
    )

    env_token = os.environ.get("HANGWATCH_PEER_TOKEN")
    tokens = read_tokens(token_file, urls)
    if token_file is None and env_token:
        tokens = dict.fromkeys(urls, env_token)
    watcher = Fleet(urls, tokens, interval=interval)
    if once:
        data = watcher.poll_once()
        watcher.stop()
        print(json.dumps(data, indent=1) if json_out else "\n".join(summary_lines(data)))
        if all(node.get("error") for node in data["nodes"]):
            print(f"hangwatch fleet: none of the {len(urls)} nodes answered", file=sys.stderr)
            raise typer.Exit(1)
        return
    from hangwatch.sinks.api import serve_in_thread

    if token is None and watcher.holds_tokens:
        # the page would hold token-protected agents' data: it needs a token too. One token for every
        # agent is one the user already holds; several, and the page gets its own, said once here.
        distinct = {t for t in tokens.values() if t}
        token = distinct.pop() if len(distinct) == 1 else secrets.token_urlsafe(24)
        said = "the agents' token" if len(set(tokens.values()) - {None}) == 1 else f"this token: {token}"
        print(f"hangwatch fleet: the agents need a token, so the page does too; open it with {said}", file=sys.stderr)
    app = create_fleet_app(watcher, token=token)
    handle = serve_in_thread(app, host, port, token=token, insecure=insecure)
    watcher.start()
    print(f"hangwatch fleet: {len(urls)} nodes; open {handle.url}/", file=sys.stderr)
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        if stop.is_set():  # asked twice: whatever still winds down, the process ends now
            os._exit(128 + signum)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    last: str | None = None
    try:
        while not stop.wait(interval):
            latest = watcher.data()
            if latest is None:
                continue
            line = summary_lines(latest)[0]
            if line != last:
                print(f"hangwatch fleet: {line}", file=sys.stderr, flush=True)
                last = line
    finally:
        watcher.stop()
        handle.stop()


__all__ = ["fleet"]
