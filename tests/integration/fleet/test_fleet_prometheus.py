"""`hangwatch fleet --prometheus` against a real Prometheus scraping 16 real agents on loopback.

Four small real test servers (tests/integration/programs): three start and are ready, one stalls
in its rendezvous (rank 1 never comes). Sixteen `hangwatch attach --serve` agents watch them, in
four launches of four nodes (`--launch-label`); the stalled server's agent is one node of launch
"stuck". A real Prometheus scrapes all sixteen every 0.5 s; the fleet reads it, not the agents.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from helpers.pageprocs import HANGWATCH, PROGRAMS, ROOT, Procs, free_port, get_json, wait_until
from helpers.promserver import PROMETHEUS, Prometheus

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(PROMETHEUS is None, reason="prometheus not installed (apt-get install prometheus)")]

AGENTS = 16  # with --launch-label; and one more whose launch comes from its server's arguments
RENDEZVOUS = f"127.0.0.1:{free_port()}"
MULTI_NODE = ("--nnodes", "2", "--node-rank", "1", "--dist-init-addr", RENDEZVOUS)


def _agent(pid: int, launch: str | None) -> list[str]:
    label = ["--launch-label", launch] if launch else []
    return [HANGWATCH, "attach", str(pid), "--serve", "--no-native", "--no-learn", *label]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("fleet")
    procs = Procs(tmp)
    prometheus = None
    try:
        stuck_server = _server(procs, "stuck", "tcpstore")
        healthy = [_server(procs, f"healthy{i}", "healthy") for i in range(2)]
        # node 1 of a two-node start, as its launcher's own arguments say
        healthy.append(_server(procs, "healthy2", "healthy", *MULTI_NODE))
        argvs = {f"agent{i}": _agent(stuck_server.pid if i == 0 else healthy[i % 3].pid, "stuck" if i < 4 else f"launch-{i // 4}")
                 for i in range(AGENTS)}
        # one more agent with no --launch-label: its launch comes from the server's --dist-init-addr/--nnodes
        argvs["from-args"] = _agent(healthy[2].pid, None)
        started = {name: procs.start_on_free_port(argv, name) for name, argv in argvs.items()}  # all at once
        agents = {name: procs.serve(argvs[name], name, 90, started[name]).removeprefix("http://") for name in argvs}
        # a scrape every second, with as long to answer: 17 agents on 2 shared cores can be slow
        prometheus = Prometheus(tmp, list(agents.values()), scrape_s=1.0,
                                rule_files=[ROOT / "dashboards" / "alerts.yml"])
        yield {"procs": procs, "prometheus": prometheus, "stuck": agents["agent0"], "from_args": agents["from-args"],
               "addresses": list(agents.values())}
    finally:
        if prometheus is not None:
            prometheus.close()
        procs.stop()


def _server(procs: Procs, name: str, mode: str, *extra: str) -> subprocess.Popen[bytes]:
    """The small real test server (programs/) in `mode`; its output (the log its agents read) in NAME.out."""
    argv = [sys.executable, str(PROGRAMS / "sglang" / "launch_server.py"), "--model-path", "/models/tiny",
            "--tp-size", "2", "--port", str(free_port()), *extra]
    return procs.start(argv, name, env={"HW_MODE": mode})


def _fleet_json(url: str, *extra: str) -> dict[str, Any]:
    out = subprocess.run([HANGWATCH, "fleet", "--prometheus", url, "--json", *extra], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_fleet_from_prometheus_counts_every_agent_and_names_the_stalled_one(fleet: dict[str, Any]) -> None:
    prometheus: Prometheus = fleet["prometheus"]

    # WHEN Prometheus has scraped every agent and the stalled server's agent has said so
    def settled() -> dict[str, Any] | None:
        data = _fleet_json(prometheus.url, "--selector", '{job="hangwatch"}')
        ready = data["states"].get("ready", 0)
        return data if data["nodes"] == AGENTS + 1 and data["stalled"] and ready == AGENTS else None

    data = wait_until(settled, 90, "17 nodes, one stalled, the rest ready", every=1.0,
                      on_timeout=lambda: _fleet_json(prometheus.url)["states"])
    # THEN the fleet counts all seventeen and names exactly the stalled one, with its cause and phase
    assert data["nodes"] == AGENTS + 1
    assert [s["instance"] for s in data["stalled"]] == [fleet["stuck"]]
    stalled = data["stalled"][0]
    assert (stalled["state"], stalled["phase"], stalled["launch"]) == ("stalled", "dist_init", "stuck")
    assert stalled["cause"] and stalled["since_s"] is not None and stalled["since_s"] > 0
    assert data["unreachable"] == []
    # and groups the nodes by launch: the stuck launch first, its node apart named; the others calm
    launches = data["launches"]
    assert [g["launch"] for g in launches][0] == "stuck"
    from_args = f"sglang:{RENDEZVOUS}/2"
    assert sorted(g["launch"] for g in launches) == sorted(["launch-1", "launch-2", "launch-3", "stuck", from_args])
    assert launches[0]["apart"] == [fleet["stuck"]] and launches[0]["nodes"] == 4
    assert all(g["apart"] == [] and g["state"] == "ready" for g in launches[1:])
    # the launch named from the engine's own arguments: node rank 1 of 2, the other node not (yet) seen
    (multi,) = [g for g in launches if g["launch"] == from_args]
    assert (multi["multi_node"], multi["nnodes"], [m["instance"] for m in multi["members"]]) == \
        (True, "2", [fleet["from_args"]])
    assert multi["members"][0]["node_rank"] == "1"
    # and the summary a terminal gets says the same in a few lines
    out = subprocess.run([HANGWATCH, "fleet", "--prometheus", prometheus.url], capture_output=True, text=True, timeout=60)
    lines = out.stdout.splitlines()
    assert lines[0] == f"{AGENTS + 1} nodes in 5 launches: 1 stalled, {AGENTS} ready", out.stdout + out.stderr
    assert lines[1].startswith(f"  stuck (4 nodes, STALLED): node {fleet['stuck']} stands apart: it alone is stalled")
    assert lines[2:] == ["  and 4 launches with no node apart"]


def test_a_selector_that_matches_no_agent_counts_none(fleet: dict[str, Any]) -> None:
    data = _fleet_json(fleet["prometheus"].url, "--selector", '{job="no-such-job"}')
    assert (data["nodes"], data["stalled"], data["launches"]) == (0, [], [])


def test_the_served_page_data_has_the_stalled_agents_details(fleet: dict[str, Any]) -> None:
    procs: Procs = fleet["procs"]
    port = free_port()
    proc = procs.start([HANGWATCH, "fleet", "--prometheus", fleet["prometheus"].url, "--serve", "--port", str(port),
                        "--interval", "1"], "fleet-serve")
    url = f"http://127.0.0.1:{port}"

    def named() -> dict[str, Any] | None:
        assert proc.poll() is None, procs.output("fleet-serve")[-2000:]
        data = get_json(url + "/snapshot")
        # (under load a scrape may time out: that agent is unreachable for a refresh, and apart too)
        return data if data["fleet"]["apart"] == [fleet["stuck"]] and len(data["nodes"]) == 1 else None

    data = wait_until(named, 90, "the stuck node named on the page's data", every=1.0)
    # only the node apart was asked for its details: its verdict, stacks and timeline came from its agent
    assert [n["name"] for n in data["nodes"]] == [fleet["stuck"]]
    node = data["nodes"][0]
    assert node["error"] is None and node["verdict"]["state"] == "stalled" and node["timeline"]
    assert "launch stuck" in data["fleet"]["why"]


def test_the_shipped_rules_name_the_stuck_launch_and_its_node_apart(fleet: dict[str, Any]) -> None:
    prometheus: Prometheus = fleet["prometheus"]
    # WHEN the shipped rules (dashboards/alerts.yml) run on the real agents' series
    launch = 'ALERTS{alertname="HangwatchLaunchStuck"}'
    alerts = wait_until(lambda: prometheus.query(launch), 90, "HangwatchLaunchStuck pending", every=1.0)
    # THEN one alert, for launch "stuck", carrying its node apart, phase and cause (pending during its `for`)
    assert len(alerts) == 1, alerts
    labels = alerts[0]["metric"]
    assert (labels["launch"], labels["instance"], labels["phase"]) == ("stuck", fleet["stuck"], "dist_init")
    assert labels["cause"] and labels["alertstate"] in ("pending", "firing")
    # and the stalled node's own alert carries the launch, so Alertmanager inhibits it under that page
    node = wait_until(lambda: prometheus.query('ALERTS{alertname="HangwatchServerStalled"}'), 30, "the node alert")
    assert [(a["metric"]["instance"], a["metric"].get("launch")) for a in node] == [(fleet["stuck"], "stuck")]
