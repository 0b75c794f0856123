import io
import json
import tarfile
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient as _TestClient

from hangwatch.model import State
from hangwatch.redact import redacted_verdict
from hangwatch.sinks.api import VerdictModel, create_app
from hangwatch.sinks.store import HistoryStore
from helpers.serve_fixtures import SECRET, make_verdict, make_view


def TestClient(app: object, **kw: object) -> _TestClient:
    """A client that names loopback in its Host header, as curl to 127.0.0.1 does (tokenless APIs check it)."""
    return _TestClient(app, base_url="http://127.0.0.1:9464", **kw)  # type: ignore[arg-type]

PATHS = ["/verdict", "/healthz", "/metrics", "/stacks", "/timeline", "/bundle", "/history", "/startupz"]


@pytest.fixture
def client(view):
    return TestClient(create_app(view, rate=None))


def test_verdict_is_the_diagnose_json_shape_redacted(client, stalled):
    body = client.get("/verdict").json()
    assert body == redacted_verdict(stalled)
    assert body.keys() == stalled.to_dict().keys()
    VerdictModel.model_validate(body)
    assert SECRET not in json.dumps(body)


def test_verdict_follows_the_view(view):
    client = TestClient(create_app(view, rate=None))
    view.publish(replace(view.latest(), verdict=make_verdict(State.READY, None)))
    assert client.get("/verdict").json()["state"] == "ready"


def test_no_verdict_yet_is_503():
    response = TestClient(create_app(make_view(None))).get("/verdict")
    assert response.status_code == 503 and response.json() == {"detail": "no verdict yet"}


def test_healthz(client):
    assert client.get("/healthz").json() == {"status": "ok", "ticks": 1, "state": "stalled"}


def test_stacks_and_timeline_redacted(client):
    stacks = client.get("/stacks").json()
    assert stacks["stacks"]["TP0"][0]["frames"][0]["function"] == "ncclCommInitRankConfig"
    assert SECRET not in json.dumps(stacks)
    timeline = client.get("/timeline").json()
    assert timeline["ranks"]["TP0"][1] == {"phase": "dist_init", "at": 2.0, "end": None}


def test_bundle_is_a_redacted_tarball(client):
    response = client.get("/bundle")
    assert response.headers["content-type"] == "application/gzip"
    assert "attachment" in response.headers["content-disposition"]
    with tarfile.open(fileobj=io.BytesIO(response.content), mode="r:gz") as tar:
        contents = {m.name.split("/")[-1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    assert {"meta.json", "env.txt", "server.log"} <= contents.keys()
    assert all(SECRET.encode() not in data for data in contents.values())
    assert b"NCCL_DEBUG=INFO" in contents["env.txt"]
    json.loads(contents["meta.json"])  # redaction kept it JSON


def test_metrics_text(client):
    response = client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    assert 'hangwatch_state{hangwatch_state="stalled"' in response.text


def test_metrics_openmetrics_on_request(client):
    response = client.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert response.headers["content-type"].startswith("application/openmetrics-text")
    assert response.text.endswith("# EOF\n")


def test_history_without_and_with_a_store(view, tmp_path):
    assert TestClient(create_app(view)).get("/history").json() == {
        "enabled": False, "transitions": [], "alerts": [], "episodes": [], "refinements": []}
    store = HistoryStore(tmp_path / "h.db")
    store.start_episode(view.server_name, "stalled", "x", episode_id="e1")
    store.record_transition(view.server_name, "stalled", cause="x", episode_id="e1")
    store.record_alert("e1", "slack", "firing", "failed", attempts=3, detail=f"HTTP 500 HF_TOKEN={SECRET}")
    body = TestClient(create_app(view, store=store)).get("/history?limit=5").json()
    assert body["enabled"] and body["transitions"][0]["state"] == "stalled"
    assert body["alerts"][0]["status"] == "failed" and SECRET not in json.dumps(body)


def test_history_shows_this_servers_records_and_others_only_when_asked(view, tmp_path):
    # GIVEN one history file that another server's agent writes too
    store = HistoryStore(tmp_path / "h.db")
    for server, episode in ((view.server_name, "ours"), ("vllm pid 7 on 127.0.0.1:8000", "theirs")):
        store.start_episode(server, "stalled", "nccl_init", episode_id=episode, at=1.0)
        store.record_transition(server, "stalled", cause="nccl_init", episode_id=episode, at=1.0)
        store.refine_episode(episode, "dead_rank", 0.9, at=2.0)
        store.record_alert(episode, "slack", "firing", "sent", at=2.0)
    client = TestClient(create_app(view, store=store))
    # WHEN / THEN: its own by default, everything with ?all=1
    mine = client.get("/history").json()
    assert {e["id"] for e in mine["episodes"]} == {"ours"}
    assert {t["server"] for t in mine["transitions"]} == {view.server_name}
    assert {a["episode_id"] for a in mine["alerts"]} == {r["episode_id"] for r in mine["refinements"]} == {"ours"}
    every = client.get("/history?all=1").json()
    assert {e["id"] for e in every["episodes"]} == {"ours", "theirs"} and len(every["transitions"]) == 2


def test_openapi_documents_every_endpoint(client):
    spec = client.get("/openapi.json").json()
    assert set(PATHS) <= set(spec["paths"])
    verdict = spec["paths"]["/verdict"]["get"]["responses"]
    assert verdict["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/VerdictModel")
    assert {"401", "413", "429", "503"} <= verdict.keys()
    assert "application/gzip" in spec["paths"]["/bundle"]["get"]["responses"]["200"]["content"]
    assert client.get("/docs").status_code == 200


def test_unknown_path_is_json_404_and_writes_are_405(client):
    response = client.get("/nope")
    assert response.status_code == 404 and response.json() == {"detail": "Not Found"}
    assert client.post("/verdict").status_code == 405


def test_token_on_every_endpoint_but_healthz(view):
    client = TestClient(create_app(view, token="s3cret", rate=None))
    for path in PATHS + ["/docs", "/openapi.json", "/nope"]:
        if path in ("/healthz", "/startupz"):  # probes: kubelet cannot send a Secret as a header
            continue
        assert client.get(path).status_code == 401, path
        assert client.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401, path
    assert client.get("/healthz").status_code == 200
    assert set(client.get("/startupz").json()) == {"ready", "state", "phase", "elapsed_s", "eta", "cause"}
    response = client.get("/verdict", headers={"Authorization": "Bearer s3cret"})
    assert response.status_code == 200
    assert client.get("/verdict").headers["www-authenticate"] == "Bearer"


def test_body_too_large_is_413(view):
    client = TestClient(create_app(view, max_body=100))
    assert client.request("GET", "/verdict", content=b"x" * 101).status_code == 413
    assert client.request("GET", "/verdict", content=b"x" * 10).status_code == 200


def test_rate_bound_is_429_per_client(view):
    # burst 2, then one a second: 30 requests meet the bound unless each took over a second
    client = TestClient(create_app(view, rate=1.0))
    codes = [client.get("/healthz").status_code for _ in range(30)]
    assert codes[:2] == [200] * 2 and 429 in codes
    assert client.get("/healthz").headers.get("retry-after") == "1"


def test_startupz_is_503_until_ready_and_says_why(view):
    from hangwatch.model import Eta

    client = TestClient(create_app(view))
    response = client.get("/startupz")
    assert response.status_code == 503
    body = response.json()
    assert (body["ready"], body["state"], body["phase"], body["cause"]) == (False, "stalled", "dist_init", "nccl_peer_exited")
    view.publish(replace(view.latest(), verdict=make_verdict(State.STARTING, None, eta=Eta(100.0, 6, 45.0))))
    assert client.get("/startupz").json()["eta"] == {"ready_in_s": 100.0, "from_starts": 6, "budget_s": 45.0,
                                                  "overdue_s": None, "usual_s": None}
    view.publish(replace(view.latest(), verdict=make_verdict(State.READY, None)))
    assert client.get("/startupz").status_code == 200


def test_stacks_carry_the_merged_tree(view):
    tree = {"frame": "<all>", "ranks": ["TP0"], "outliers": [], "children": []}
    view.publish(replace(view.latest(), stack_tree=tree))
    assert TestClient(create_app(view)).get("/stacks").json()["tree"] == tree
