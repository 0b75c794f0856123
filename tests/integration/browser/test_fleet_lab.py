"""`hangwatch fleet` on the real two-node CPU lab: two `--nnodes 2` SGLang launchers on one machine
(node 1's TP1 hangs opening its weights, node 0's TP0 waits for it), one agent per node on its own
port, the fleet page in a real Chromium: read from the agents, and from a real Prometheus scraping
them (the launch comes from SGLang's own `--dist-init-addr`/`--nnodes`/`--node-rank`; Prometheus sees
both nodes stalled alike in weight loading, so the agents' own evidence names node 1).

Both tests watch one lab start (the module's `two_nodes`): it hangs for good, and a start of two
launchers with two TP ranks each is the costliest in the lab.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers.chrome import Browser, facts
from helpers.labrun import TWO_NODE_TP2_GROUP
from helpers.pageprocs import HANGWATCH, ROOT, Procs, get_json, wait_until
from helpers.promserver import PROMETHEUS, Prometheus

LAB_PYTHON = os.environ.get("HANGWATCH_LAB_PYTHON") or str(ROOT / ".lab-venv" / "bin" / "python")

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(LAB_PYTHON).exists(), reason="no lab venv (lab/install.sh, or set HANGWATCH_LAB_PYTHON)"),
]


@dataclass(frozen=True)
class TwoNodes:
    procs: Procs  # the lab and the two agents ("lab", "agent0", "agent1")
    lab: subprocess.Popen[bytes]
    urls: list[str]  # the agents'

    @property
    def names(self) -> list[str]:
        return [url.removeprefix("http://") for url in self.urls]

    def running(self) -> None:
        assert self.lab.poll() is None, self.procs.output("lab")[-2000:]


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoNodes]:
    procs = Procs(tmp_path_factory.mktemp("two-nodes"))
    try:
        lab = procs.start([sys.executable, str(ROOT / "lab" / "run.py"), "tp2-one-rank-loading", "--hold", "900"], "lab",
                          env={"HANGWATCH_LAB_PYTHON": LAB_PYTHON})
        node0 = wait_until(lambda: _launched(procs, 0), 120, "node 0")
        node1 = wait_until(lambda: _launched(procs, 1), 120, "node 1")
        urls = [procs.agent(node0["node_pid"], "agent0", log=node0["log"]),
                procs.agent(node1["node_pid"], "agent1", log=node1["log"])]
        # the hang itself (TP0 loaded and waiting, TP1 in its weights' open()): before it, under load,
        # node 1 may stand apart only for starting later, and node 0 a moment after
        wait_until(lambda: _event(procs, "onset"), 600, "the lab's onset", on_timeout=lambda: procs.output("lab")[-2000:])
        yield TwoNodes(procs, lab, urls)
    finally:
        procs.stop()


def _launched(procs: Procs, node: int) -> dict[str, Any] | None:
    return _event(procs, "launched", node=node)


def _event(procs: Procs, name: str, **fields: Any) -> dict[str, Any] | None:
    """The lab's first `name` event with these fields (lab/run.py prints one JSON line per event)."""
    for line in procs.output("lab").splitlines():
        event = json.loads(line) if line.startswith("{") else {}
        if event.get("event") == name and all(event.get(k) == v for k, v in fields.items()):
            return event
    return None


def _fleet_json(url: str) -> dict[str, Any]:
    out = subprocess.run([HANGWATCH, "fleet", "--prometheus", url, "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]




@pytest.mark.xdist_group(TWO_NODE_TP2_GROUP)
def test_fleet_names_the_node_whose_rank_is_still_loading(two_nodes: TwoNodes, procs: Procs, browser: Browser) -> None:
    # GIVEN two nodes of one TP=2 server: node 1's TP1 hangs opening its weights, node 0's TP0 waits for it
    urls, (node0_name, node1_name) = two_nodes.urls, two_nodes.names
    fleet = procs.serve([HANGWATCH, "fleet", *urls], "fleet", 120)  # a python start beside two lab nodes on 2 busy cores
    browser.driver.get(fleet + "/")
    # WHEN both agents have seen the hang
    def stalled_and_apart() -> dict[str, Any] | None:
        two_nodes.running()
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
    assert {f"{node0_name}/TP0", f"{node1_name}/TP1"} <= set(page["rows"]), page["rows"]
    # (on one host node 0's agent samples node 1's ranks too, as peers: TP1 may be drawn from either agent)
    assert [name.rsplit("/", 1)[1] for name in page["outliers"]] == ["TP1"], page
    apart_text = browser.text("apart")
    assert node1_name in apart_text and "stands apart" in apart_text
    assert browser.errors() == []
    # the same answer in a terminal, once
    once = subprocess.run([HANGWATCH, "fleet", *urls, "--once"], check=False, capture_output=True, text=True, timeout=60)
    assert once.returncode == 0 and once.stdout.startswith(f"node {node1_name} stands apart"), once.stdout + once.stderr


@pytest.mark.xdist_group(TWO_NODE_TP2_GROUP)
@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus not installed (apt-get install prometheus)")
def test_fleet_from_prometheus_names_the_lab_node_still_loading(two_nodes: TwoNodes, procs: Procs, browser: Browser,
                                                               tmp_path: Path) -> None:
    names = two_nodes.names
    prometheus = Prometheus(tmp_path, names, scrape_s=1.0)
    try:
        # WHEN Prometheus has both agents' verdicts of the hang
        def named() -> dict[str, Any] | None:
            two_nodes.running()
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
        page = procs.serve([HANGWATCH, "fleet", "--prometheus", prometheus.url, "--serve"], "fleet")
        wait_until(lambda: get_json(page + "/healthz")["nodes"] == 2, 60, "the fleet page")
        browser.driver.get(page + "/")
        apart = wait_until(lambda: (t := browser.text("apart")) and names[1] in t and t, 60, "node 1 named on the page")
        assert apart.startswith(f"Node {names[1]} stands apart: launch {launch['launch']}"), apart
        assert browser.errors() == []
    finally:
        prometheus.close()
