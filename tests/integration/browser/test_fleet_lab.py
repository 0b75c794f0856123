"""`hangwatch fleet` on the real two-node CPU lab: two `--nnodes 2` SGLang launchers on one machine
(node 1's TP1 hangs opening its weights, node 0's TP0 waits for it), one agent per node on its own
port, the fleet page in a real Chromium: read from the agents, and from a real Prometheus scraping
them (the launch comes from SGLang's own `--dist-init-addr`/`--nnodes`/`--node-rank`; Prometheus sees
both nodes stalled alike in weight loading, so the agents' own evidence names node 1).

Both tests watch the held run of the scenario that test_lab.py watches too (tests/helpers/labrun.py,
HeldScenarios): it hangs for good, and a start of two launchers with two TP ranks each is the
costliest in the lab.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers.chrome import Browser, facts
from helpers.labrun import HELD_PREFIX, HeldScenarios
from helpers.pageprocs import HANGWATCH, ROOT, Procs, get_json, wait_until
from helpers.promserver import PROMETHEUS, Prometheus

LAB_PYTHON = os.environ.get("HANGWATCH_LAB_PYTHON") or str(ROOT / ".lab-venv" / "bin" / "python")

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(LAB_PYTHON).exists(), reason="no lab venv (lab/install.sh, or set HANGWATCH_LAB_PYTHON)"),
]


SCENARIO = "tp2-one-rank-loading"
# on the worker that holds the run; each test also asks for `held_lab`, which stops the run after the
# last test that asks for it
HELD = pytest.mark.xdist_group(HELD_PREFIX + SCENARIO)


@dataclass(frozen=True)
class TwoNodes:
    procs: Procs  # the two agents ("agent0", "agent1")
    held: HeldScenarios
    urls: list[str]  # the agents'

    @property
    def names(self) -> list[str]:
        return [url.removeprefix("http://") for url in self.urls]

    def running(self) -> None:
        assert self.held.alive(SCENARIO), f"the held {SCENARIO} run has exited"


@pytest.fixture(scope="module")
def two_nodes(_held_lab_runs: HeldScenarios, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoNodes]:
    """One agent per node of the held run, attached once its hang began (TP0 loaded and waiting, TP1
    in its weights' open()): before it, under load, node 1 may stand apart only for starting later."""
    _held_lab_runs.stuck(SCENARIO)
    events = _held_lab_runs.events(SCENARIO)
    node0, node1 = (_launched(events, node) for node in (0, 1))
    procs = Procs(tmp_path_factory.mktemp("two-nodes"))
    try:
        urls = [procs.agent(node0["node_pid"], "agent0", log=node0["log"]),
                procs.agent(node1["node_pid"], "agent1", log=node1["log"])]
        yield TwoNodes(procs, _held_lab_runs, urls)
    finally:
        procs.stop()


def _launched(events: list[dict[str, Any]], node: int) -> dict[str, Any]:
    """The lab's `launched` event of the node (lab/run.py prints one JSON line per event)."""
    found = [e for e in events if e.get("event") == "launched" and e.get("node") == node]
    assert found, events
    return found[0]


def _fleet_json(url: str) -> dict[str, Any]:
    out = subprocess.run([HANGWATCH, "fleet", "--prometheus", url, "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]




@HELD
def test_fleet_names_the_node_whose_rank_is_still_loading(two_nodes: TwoNodes, held_lab: HeldScenarios, procs: Procs,
                                                          browser: Browser) -> None:
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


@HELD
@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus not installed (apt-get install prometheus)")
def test_fleet_from_prometheus_names_the_lab_node_still_loading(two_nodes: TwoNodes, held_lab: HeldScenarios, procs: Procs,
                                                               browser: Browser, tmp_path: Path) -> None:
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
