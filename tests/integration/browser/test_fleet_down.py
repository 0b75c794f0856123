"""The fleet page leads with the diagnosis (issue 23): with one node's agent down, the banner is the
most urgent verdict of the nodes that answer, the node that does not is one card ("unreachable since
HH:MM — is it started?") and that fact is evidence. A real agent on a stalled test server, a port that
refuses, `hangwatch fleet`, a real Chromium."""

from __future__ import annotations

import socket
from pathlib import Path

from helpers.chrome import Browser
from helpers.pageprocs import HANGWATCH, Procs, free_port, get_json, start_test_server, wait_until


def test_a_node_that_does_not_answer_is_one_card_and_evidence_not_the_banner(procs: Procs, browser: Browser,
                                                                             tmp_path: Path) -> None:
    server = start_test_server(procs, tmp_path, "fifo_rank")
    agent = procs.agent(server.pid)
    with socket.socket() as closed:  # bound, never listening: connections to it are refused
        closed.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{closed.getsockname()[1]}"
        port = free_port()
        procs.start([HANGWATCH, "fleet", agent, down, "--port", str(port), "--interval", "0.5"], "fleet")
        fleet = f"http://127.0.0.1:{port}"
        wait_until(lambda: any((n["verdict"] or {}).get("state") == "stalled"
                               for n in get_json(fleet + "/snapshot")["nodes"]), 90, "the stall")
        browser.driver.get(fleet + "/")
        wait_until(lambda: browser.js("return document.getElementById('banner').dataset.state") == "stalled", 20,
                   "the banner")
        down_name = down.removeprefix("http://")
        card = browser.js(f"return document.querySelector('[data-node=\"{down_name}\"]').textContent")
        assert "unreachable since " in card and "is it started?" in card, card
        evidence = browser.text("evidence")
        assert f"node {down_name} unreachable since" in evidence, evidence
        assert "cannot read this agent" not in browser.text("banner")
        assert browser.errors() == []
