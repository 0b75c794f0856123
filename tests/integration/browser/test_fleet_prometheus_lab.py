"""`hangwatch fleet --prometheus` on the real two-node CPU lab: two `--nnodes 2` SGLang launchers on one
machine (node 1's TP1 hangs opening its weights, node 0's TP0 waits for it), one agent per node, a real
Prometheus scraping both. The launch comes from SGLang's own `--dist-init-addr`/`--nnodes`/`--node-rank`;
Prometheus sees both nodes stalled alike in weight loading, so the agents' own evidence names node 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.chrome import Browser
from helpers.labrun import TWO_NODE_TP2_GROUP
from helpers.pageprocs import HANGWATCH, ROOT, Procs, free_port, get_json, wait_until
from helpers.promserver import PROMETHEUS, Prometheus

LAB_PYTHON = os.environ.get("HANGWATCH_LAB_PYTHON") or str(ROOT / ".lab-venv" / "bin" / "python")

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(LAB_PYTHON).exists(), reason="no lab venv (lab/install.sh, or set HANGWATCH_LAB_PYTHON)"),
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus not installed (apt-get install prometheus)"),
]


def _launched(procs: Procs, node: int) -> dict[str, Any] | None:
    for line in procs.output("lab").splitlines():
        event = json.loads(line) if line.startswith("{") else {}
        if event.get("event") == "launched" and event.get("node") == node:
            return event
    return None


def _fleet_json(url: str) -> dict[str, Any]:
    out = subprocess.run([HANGWATCH, "fleet", "--prometheus", url, "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.xdist_group(TWO_NODE_TP2_GROUP)
def test_fleet_from_prometheus_names_the_lab_node_still_loading(procs: Procs, browser: Browser, tmp_path: Path) -> None:
    lab = procs.start([sys.executable, str(ROOT / "lab" / "run.py"), "tp2-one-rank-loading", "--hold", "600"], "lab",
                      env={"HANGWATCH_LAB_PYTHON": LAB_PYTHON})
    node0 = wait_until(lambda: _launched(procs, 0), 120, "node 0")
    node1 = wait_until(lambda: _launched(procs, 1), 120, "node 1")
    urls = [procs.agent(node0["node_pid"], "agent0", log=node0["log"]),
            procs.agent(node1["node_pid"], "agent1", log=node1["log"])]
    names = [u.removeprefix("http://") for u in urls]
    prometheus = Prometheus(tmp_path, names, scrape_s=1.0)
    try:
        # WHEN both agents have seen the hang
        def named() -> dict[str, Any] | None:
            assert lab.poll() is None, procs.output("lab")[-2000:]
            data = _fleet_json(prometheus.url)
            launch = (data["launches"] or [{}])[0]
            return data if len(data["stalled"]) == 2 and launch.get("apart") == [names[1]] else None

        data = wait_until(named, 400, "both nodes stalled and node 1 apart", every=2.0,
                          on_timeout=lambda: _fleet_json(prometheus.url)["launches"])
        # THEN one launch, named from SGLang's own arguments, of two nodes: node 1 apart by its agents' evidence
        (launch,) = data["launches"]
        assert launch["launch"].startswith("sglang:") and launch["launch"].endswith("/2") and launch["nnodes"] == "2"
        assert sorted(m["node_rank"] for m in launch["members"]) == ["0", "1"]
        # node 1 apart either from the phases Prometheus holds (node 0 logged its weights' end, node 1 did not)
        # or, where those tie, from the agents' own evidence (TP1 still loading)
        assert "furthest behind, in weight_load" in launch["why"] or (
            "agents' own evidence" in launch["why"] and "TP1" in launch["why"]), launch["why"]
        # and the page names node 1 first, with its agent's details
        port = free_port()
        procs.start([HANGWATCH, "fleet", "--prometheus", prometheus.url, "--serve", "--port", str(port)], "fleet")
        page = f"http://127.0.0.1:{port}"
        wait_until(lambda: get_json(page + "/healthz")["nodes"] == 2, 60, "the fleet page")
        browser.driver.get(page + "/")
        apart = wait_until(lambda: (t := browser.text("apart")) and names[1] in t and t, 60, "node 1 named on the page")
        assert apart.startswith(f"Node {names[1]} stands apart: launch {launch['launch']}"), apart
        assert browser.errors() == []
    finally:
        prometheus.close()
