"""`hangwatch fleet` on the real two-node CPU lab: two `--nnodes 2` launchers on one machine, one
agent per node on its own port, the fleet page in a real Chromium.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.chrome import Browser, facts
from helpers.labrun import TWO_NODE_TP2_GROUP
from helpers.pageprocs import HANGWATCH, ROOT, Procs, free_port, get_json, wait_until

LAB_PYTHON = os.environ.get("HANGWATCH_LAB_PYTHON") or str(ROOT / ".lab-venv" / "bin" / "python")

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(LAB_PYTHON).exists(), reason="no lab venv (lab/install.sh, or set HANGWATCH_LAB_PYTHON)"),
]


def _lab(procs: Procs, scenario: str) -> subprocess.Popen[bytes]:
    return procs.start([sys.executable, str(ROOT / "lab" / "run.py"), scenario, "--hold", "600"], "lab",
                       env={"HANGWATCH_LAB_PYTHON": LAB_PYTHON})


def _launched(procs: Procs, node: int) -> dict[str, Any] | None:
    for line in procs.output("lab").splitlines():
        event = json.loads(line) if line.startswith("{") else {}
        if event.get("event") == "launched" and event.get("node") == node:
            return event
    return None


def _fleet(procs: Procs, urls: list[str]) -> str:
    port = free_port()
    proc = procs.start([HANGWATCH, "fleet", *urls, "--port", str(port)], "fleet")
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, procs.output("fleet")
        return get_json(url + "/healthz")["status"] == "ok"

    wait_until(up, 120, "the fleet page")  # a python start beside two lab nodes on 2 busy cores
    return url


@pytest.mark.xdist_group(TWO_NODE_TP2_GROUP)
def test_fleet_names_the_node_whose_rank_is_still_loading(procs: Procs, browser: Browser) -> None:
    # GIVEN two nodes of one TP=2 server: node 1's TP1 hangs opening its weights, node 0's TP0 waits for it
    lab = _lab(procs, "tp2-one-rank-loading")
    node0 = wait_until(lambda: _launched(procs, 0), 60, "node 0")
    node1 = wait_until(lambda: _launched(procs, 1), 60, "node 1")
    urls = [procs.agent(node0["node_pid"], "agent0", log=node0["log"]),
            procs.agent(node1["node_pid"], "agent1", log=node1["log"])]
    fleet = _fleet(procs, urls)
    browser.driver.get(fleet + "/")
    node1_name = urls[1].removeprefix("http://")
    # WHEN both agents have seen the hang
    def stalled_and_apart() -> dict[str, Any] | None:
        assert lab.poll() is None, procs.output("lab")[-2000:]
        data = get_json(fleet + "/snapshot")
        states = [n["verdict"] and n["verdict"]["state"] for n in data["nodes"]]
        # (on the way there a node may stand apart for a while for another reason: one starts later)
        return data if "stalled" in states and data["fleet"]["apart"] == [node1_name] and "TP1" in data["fleet"]["why"] else None

    # THEN the fleet names node 1, whose TP1 is still loading
    data = wait_until(stalled_and_apart, 300, "a stall with TP1's node apart", every=1.0,
                      on_timeout=lambda: get_json(fleet + "/snapshot")["fleet"])
    assert "TP1" in data["fleet"]["why"], data["fleet"]
    # and the page shows every node's ranks in one timeline and one tree, TP1 on node 1 apart
    page = wait_until(lambda: (f := facts(browser)) and len(f["rows"]) >= 2 and f["outliers"] and f, 120, "the fleet page")
    node0_name = urls[0].removeprefix("http://")
    assert {f"{node0_name}/TP0", f"{node1_name}/TP1"} <= set(page["rows"]), page["rows"]
    # (on one host node 0's agent samples node 1's ranks too, as peers: TP1 may be drawn from either agent)
    assert [name.rsplit("/", 1)[1] for name in page["outliers"]] == ["TP1"], page
    apart_text = browser.text("apart")
    assert node1_name in apart_text and "stands apart" in apart_text
    assert browser.errors() == []
    # the same answer in a terminal, once
    once = subprocess.run([HANGWATCH, "fleet", *urls, "--once"], check=False, capture_output=True, text=True, timeout=60)
    assert once.returncode == 0 and once.stdout.startswith(f"node {node1_name} stands apart"), once.stdout + once.stderr
