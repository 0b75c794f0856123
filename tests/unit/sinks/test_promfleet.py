"""The fleet read from Prometheus: joining the queries' series, launches, the node apart (pure parts).

The queries themselves run against a real Prometheus in tests/integration/fleet."""

from __future__ import annotations

import os

import pytest

from hangwatch.sinks.launchid import launch_of
from hangwatch.sinks.web.fleet import FleetError
from hangwatch.sinks.web.promfleet import (
    FleetNode,
    fleet_summary,
    group_launches,
    launch_apart,
    nodes_from_samples,
    summary_text,
    token_map,
)
from hangwatch.sources.prometheus import PrometheusClient, PrometheusError, Sample, selector_matchers


def node(instance: str, state: str = "ready", *, launch: str = "L", rank: str = "", nnodes: str = "", phase: str = "ready",
         cause: str = "", since: float | None = None) -> FleetNode:
    return FleetNode(instance=instance, job="hangwatch", host=instance.split(":")[0], server="s", url=f"http://{instance}",
                     launch=launch, node_rank=rank, nnodes=nnodes, state=state, phase=phase, cause=cause, since_s=since,
                     blocker="")


def test_launch_from_sglang_and_vllm_arguments_and_from_a_label() -> None:
    sglang = {"dist-init-addr": "10.0.0.1:5000", "nnodes": "2", "node-rank": "1"}
    assert launch_of("sglang", sglang).__dict__ == {"launch": "sglang:10.0.0.1:5000/2", "node_rank": "1", "nnodes": "2"}
    vllm = {"master-addr": "10.0.0.9", "master-port": "29500", "nnodes": "4", "node-rank": "3"}
    assert launch_of("vllm", vllm).launch == "vllm:10.0.0.9:29500/4"
    assert launch_of("sglang", {"tp": "8"}).launch == ""  # one node: no launch
    assert launch_of(None, {}, "run-42").launch == "run-42"
    assert launch_of("sglang", sglang, "run-42").__dict__ == {"launch": "run-42", "node_rank": "1", "nnodes": "2"}


def test_selector_matchers_are_checked() -> None:
    assert selector_matchers('{job="hangwatch", cluster=~"a|b"}') == 'job="hangwatch", cluster=~"a|b"'
    assert selector_matchers("") == ""
    for bad in ('job="x"', '{job=x}', '{job="x"} or up', '{job="x" host="y"}'):
        with pytest.raises(PrometheusError):
            selector_matchers(bad)


def test_prometheus_url_must_be_http() -> None:
    with pytest.raises(PrometheusError, match="http"):
        PrometheusClient("prometheus:9090")


def test_the_queries_join_on_job_and_instance() -> None:
    a = {"job": "hangwatch", "instance": "n1:9464"}
    b = {"job": "hangwatch", "instance": "n2:9464"}
    c = {"job": "hangwatch", "instance": "n3:9464"}
    nodes = nodes_from_samples(
        agents=[Sample({**a, "url": "http://0.0.0.0:9464", "launch": "L", "node_rank": "0"}, 1),
                Sample({**b, "url": "http://n2.example:9464", "launch": "L", "node_rank": "1"}, 1),
                Sample({**c, "url": "", "launch": "L", "node_rank": "2"}, 1)],
        verdicts=[Sample({**a, "state": "stalled", "phase": "dist_init", "cause": "multinode_rendezvous"}, 1),
                  Sample({**b, "state": "progressing", "phase": "weight_load", "cause": ""}, 1)],
        since=[Sample(a, 42.0)], blockers=[Sample({**a, "rank": "TP0", "waits_on": "TCPStore"}, 1)],
        up=[Sample(a, 1), Sample(b, 1), Sample(c, 0)])
    by = {n.instance: n for n in nodes}
    assert by["n1:9464"].url == "http://n1:9464"  # bound to 0.0.0.0: reached as Prometheus reaches it
    assert by["n2:9464"].url == "http://n2.example:9464"
    assert (by["n1:9464"].state, by["n1:9464"].since_s, by["n1:9464"].blocker) == ("stalled", 42.0, "TP0 waits on TCPStore")
    assert by["n3:9464"].state == "unreachable"


def test_the_only_stalled_node_stands_apart() -> None:
    nodes = [node("a:1", "stalled", phase="dist_init", cause="x", since=30), node("b:1"), node("c:1")]
    names, why = launch_apart(nodes)
    assert names == ["a:1"] and "alone is stalled: x" in why


def test_a_dead_agent_stands_apart_before_anything_else() -> None:
    nodes = [node("a:1", "stalled", cause="x"), node("b:1", "unreachable"), node("c:1", "stalled", cause="x")]
    assert launch_apart(nodes)[0] == ["b:1"]


def test_the_node_furthest_behind_stands_apart_when_all_are_stalled() -> None:
    nodes = [node("a:1", "stalled", phase="dist_init", cause="w"), node("b:1", "stalled", phase="weight_load", cause="w"),
             node("c:1", "stalled", phase="dist_init", cause="w"), node("d:1", "stalled", phase="launch", cause="w")]
    names, why = launch_apart(nodes)
    assert names == ["d:1"] and "furthest behind, in launch" in why


def test_stalled_alike_names_none() -> None:
    nodes = [node(f"n{i}:1", "stalled", phase="dist_init", cause="w") for i in range(3)]
    assert launch_apart(nodes)[0] == []


def test_a_node_rank_with_no_agent_is_reported() -> None:
    nodes = [node(f"n{i}:1", "stalled", rank=str(i), nnodes="4", phase="dist_init", cause="w") for i in (0, 1, 3)]
    names, why = launch_apart(nodes)
    assert names == [] and "node rank 2 of 4 never showed up" in why


def test_launches_most_urgent_first_and_the_summary() -> None:
    nodes = [node("a:1", launch="ok"), node("b:1", launch="ok"),
             node("c:1", "stalled", launch="bad", phase="kv_cache", cause="oom", since=99), node("d:1", launch="bad"),
             node("e:1", "progressing", launch="", phase="weight_load")]
    launches = group_launches(nodes)
    assert [g["launch"] for g in launches] == ["bad", "e:1", "ok"]
    assert launches[0]["apart"] == ["c:1"] and launches[0]["members"][0]["instance"] == "c:1"
    summary = fleet_summary(nodes, launches)
    assert summary["nodes"] == 5
    assert summary["stalled"] == [{"instance": "c:1", "state": "stalled", "cause": "oom", "phase": "kv_cache",
                                   "since_s": 99.0, "launch": "bad", "node_rank": None, "url": "http://c:1"}]
    text = summary_text(summary)
    assert text[0] == "5 nodes in 3 launches: 1 stalled, 1 progressing, 3 ready"
    assert text[1].startswith("  bad (2 nodes, STALLED): node c:1 stands apart")
    assert text[-1] == "  and 2 launches with no node apart"


def test_the_shared_token_goes_only_to_the_address_prometheus_scrapes(tmp_path) -> None:
    from hangwatch.sinks.web.promfleet import PromFleet, token_map

    lines = tmp_path / "tokens"
    lines.write_text("http://n2.example:9464 own-token\n")
    one = tmp_path / "token"
    one.write_text("shared\n")
    fleet = PromFleet(PrometheusClient("http://127.0.0.1:9"), tokens={**token_map(one), **token_map(lines)})
    here, elsewhere = node("n1:9464"), FleetNode(**{**node("n2:9464").__dict__, "url": "http://n2.example:9464"})
    stranger = FleetNode(**{**node("n3:9464").__dict__, "url": "http://attacker.example/"})
    assert [fleet._token(n) for n in (here, elsewhere, stranger)] == ["shared", "own-token", None]
    fleet.stop()


def test_an_agents_older_label_set_does_not_count_twice() -> None:
    # before its first tick an agent exports no launch yet, before binding no URL; a gone agent's
    # series are all old, and last_over_time returns each label set it had
    a = {"job": "hangwatch", "instance": "n1:9464"}
    nodes = nodes_from_samples(
        agents=[Sample({**a, "url": "", "launch": ""}, 1),
                Sample({**a, "url": "http://n1:9464", "launch": "sglang:n0:5000/2", "node_rank": "1", "nnodes": "2"}, 1)],
        verdicts=[], since=[], blockers=[], up=[Sample(a, 0)])
    assert [(n.instance, n.launch, n.state) for n in nodes] == [("n1:9464", "sglang:n0:5000/2", "unreachable")]


def test_a_token_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path) -> None:
    fifo = tmp_path / "tokens"
    os.mkfifo(fifo)  # nobody writes it: a plain open would block for ever
    with pytest.raises(FleetError, match="cannot read the token file"):
        token_map(fifo)
