"""Which node stands apart (pure), the token file, and the fleet read over real HTTP from real agents' apps."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from hangwatch.model import State
from hangwatch.redact import redacted_verdict
from hangwatch.sinks.api import create_app, serve_in_thread
from hangwatch.sinks.web.fleet import Fleet, FleetError, apart, fetch_node, read_tokens, summary_lines
from helpers.serve_fixtures import make_verdict, make_view


def _node(name, state="stalled", cause="weight_loading_io", ranks=(), timeline=None, stacks=None):
    verdict = None if state is None else {"state": state, "cause": cause, "ranks": list(ranks), "phases": {}}
    return {"name": name, "url": f"http://{name}", "error": None if verdict else "connection refused",
            "verdict": verdict, "timeline": {"ranks": timeline or {}}, "stacks": {"stacks": stacks or {}}}


def _span(phase, end=None):
    return {"phase": phase, "at": 0.0, "end": end}


def test_a_node_whose_agent_does_not_answer_stands_apart():
    out = apart([_node("n0:9464", ranks=()), _node("n1:9464", state=None)])
    assert out["apart"] == ["n1:9464"] and "does not answer" in out["why"]


def test_the_node_running_the_ranks_the_verdicts_name_stands_apart():
    # node 0's verdict names TP1, which runs on node 1
    n0 = _node("n0", ranks=["TP1"], timeline={"TP0": [_span("weight_load", 3.0)]})
    n1 = _node("n1", cause=None, state="starting", timeline={"TP1": [_span("weight_load")]})
    assert apart([n0, n1])["apart"] == ["n1"]


def test_a_rank_belongs_to_the_node_whose_log_it_writes_not_to_an_agent_that_samples_it_as_a_peer():
    # on one host node 0's agent also samples node 1's TP1 (stacks, no log lines); TP1 logs on node 1
    n0 = _node("n0", ranks=["TP1"], timeline={"TP0": [_span("weight_load", 3.0)]}, stacks={"TP0": [], "TP1": []})
    n1 = _node("n1", ranks=["TP1"], timeline={"TP1": [_span("weight_load")]}, stacks={"TP1": []})
    out = apart([n0, n1])
    assert out["apart"] == ["n1"] and "TP1" in out["why"]


def test_the_node_furthest_behind_stands_apart():
    n0 = _node("n0", timeline={"TP0": [_span("dist_init", 1.0), _span("weight_load", 3.0)]})
    n1 = _node("n1", timeline={"TP1": [_span("dist_init", 1.0), _span("weight_load")]})
    out = apart([n0, n1])
    assert out["apart"] == ["n1"] and "TP1" in out["why"] and "weight_load" in out["why"]


def test_a_node_whose_ranks_logged_nothing_yet_stands_apart():
    n0 = _node("n0", timeline={"TP0": [_span("dist_init")]})
    n1 = _node("n1", state="starting", cause=None, timeline={})
    out = apart([n0, n1])
    assert out["apart"] == ["n1"] and "no startup phase" in out["why"]


def test_nodes_at_different_points_of_a_healthy_start_have_none_apart():
    n0 = _node("n0", state="progressing", cause=None, timeline={"TP0": [_span("weight_load", 2.0)]})
    n1 = _node("n1", state="starting", cause=None, timeline={})
    assert apart([n0, n1])["apart"] == []


def test_nodes_alike_have_none_apart():
    n0 = _node("n0", state="ready", cause=None, timeline={"TP0": [_span("ready")]})
    n1 = _node("n1", state="ready", cause=None, timeline={"TP1": [_span("ready")]})
    assert apart([n0, n1]) == {"apart": [], "why": "No node stands apart: 2 nodes, ready."}


def test_the_only_stalled_node_stands_apart():
    out = apart([_node("n0", state="progressing", cause=None), _node("n1", state="stalled", cause="dead_rank")])
    assert out["apart"] == ["n1"] and "dead_rank" in out["why"]


def test_token_file_one_token_or_per_url(tmp_path):
    urls = ["http://a:1", "http://b:2"]
    one = tmp_path / "one"
    one.write_text("tok\n")
    assert read_tokens(one, urls) == {"http://a:1": "tok", "http://b:2": "tok"}
    per = tmp_path / "per"
    per.write_text("# comment\nhttp://a:1 ta\nhttp://b:2/ tb\n")
    assert read_tokens(per, urls) == {"http://a:1": "ta", "http://b:2": "tb"}
    bad = tmp_path / "bad"
    bad.write_text("http://c:3 tc\nhttp://a:1 ta\n")
    with pytest.raises(FleetError, match="URL TOKEN"):
        read_tokens(bad, urls)
    with pytest.raises(FleetError, match="cannot read"):
        read_tokens(tmp_path / "missing", urls)


def test_fleet_reads_real_agents_over_http_with_their_tokens():
    stalled = make_verdict(ranks=("TP1",))
    a = serve_in_thread(create_app(make_view(stalled), token="ta", rate=None), "127.0.0.1", 0)
    b = serve_in_thread(create_app(make_view(make_verdict(State.PROGRESSING, None)), token="tb", rate=None), "127.0.0.1", 0)
    try:
        fleet = Fleet([a.url, b.url, "http://127.0.0.1:1"], {a.url: "ta", b.url: "wrong"})
        data = fleet.poll_once()
        fleet.stop()
        first, second, third = data["nodes"]
        assert first["verdict"] == redacted_verdict(stalled) and first["error"] is None
        assert second["verdict"] is None and "token was refused" in second["error"]
        assert third["verdict"] is None and third["error"]
        assert data["mode"] == "fleet" and set(data["fleet"]["apart"]) == {second["name"], third["name"]}
        assert summary_lines(data)[0].startswith("node ")
        assert fetch_node(a.url, None)["error"] == "the token was refused (--token-file)"
    finally:
        a.stop()
        b.stop()


def test_fleet_refuses_what_is_not_an_http_url():
    with pytest.raises(FleetError, match="not an http"):
        Fleet(["file:///etc/passwd"], {})
    with pytest.raises(FleetError, match="at least one"):
        Fleet([], {})


def test_fleet_once_exits_1_when_no_node_answers() -> None:
    with socket.socket() as s1, socket.socket() as s2:  # two ports bound but not listening: refused at once
        s1.bind(("127.0.0.1", 0))
        s2.bind(("127.0.0.1", 0))
        urls = [f"http://127.0.0.1:{s.getsockname()[1]}" for s in (s1, s2)]
        done = subprocess.run([sys.executable, "-m", "hangwatch", "fleet", *urls, "--once"], capture_output=True,
                              text=True, timeout=120, check=False)
    assert done.returncode == 1 and "none of the 2 nodes answered" in done.stderr
    assert "unreachable" in done.stdout  # the summary is still printed
