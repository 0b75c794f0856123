"""The metrics, rules and dashboard against the real Prometheus tools (Debian's `prometheus` package)."""

import json
import shutil
import subprocess
import time

import httpx
import pytest

from hangwatch.model import State
from hangwatch.sinks.api import create_app, serve_in_thread
from hangwatch.sinks.metrics import make_registry
from helpers.paths import ROOT
from helpers.serve_support import free_port, make_verdict, make_view

DASHBOARDS = ROOT / "dashboards"
PROMTOOL, PROMETHEUS, AMTOOL = (shutil.which(name) for name in ("promtool", "prometheus", "amtool"))
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)")


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], input=stdin, capture_output=True, text=True, timeout=60)


@pytest.fixture
def two_agents():
    """Two hangwatch APIs on loopback: node-a progressing, node-b stalled."""
    handles = []
    for host, verdict in (("node-a", make_verdict(State.PROGRESSING, None)), ("node-b", make_verdict())):
        view = make_view(verdict)
        registry = make_registry(view, host=host)
        handles.append(serve_in_thread(create_app(view, registry=registry, rate=None), "127.0.0.1", 0))
    yield handles
    for handle in handles:
        handle.stop()


@needs_promtool
def test_promtool_check_metrics_on_real_metrics(two_agents):
    for handle in two_agents:
        text = httpx.get(f"{handle.url}/metrics").text
        result = promtool("check", "metrics", stdin=text)
        assert result.returncode == 0 and not (result.stdout + result.stderr).strip(), result.stdout + result.stderr


@needs_promtool
def test_promtool_check_and_test_rules():
    checked = promtool("check", "rules", str(DASHBOARDS / "alerts.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", str(DASHBOARDS / "alerts_test.yml"))
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


@pytest.mark.skipif(AMTOOL is None, reason="amtool not installed (apt-get install prometheus-alertmanager)")
def test_amtool_check_config():
    result = subprocess.run([AMTOOL, "check-config", str(DASHBOARDS / "alertmanager.yml")], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def prometheus(two_agents, tmp_path):
    if PROMETHEUS is None:
        pytest.skip("prometheus server not installed (apt-get install prometheus)")
    port = free_port()
    targets = [h.url.removeprefix("http://") for h in two_agents]
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": "500ms", "scrape_timeout": "400ms", "evaluation_interval": "500ms"},
        "rule_files": [str(DASHBOARDS / "alerts.yml")],
        "scrape_configs": [{"job_name": "hangwatch", "static_configs": [{"targets": targets}]}],
    }))
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_for(lambda: httpx.get(f"{url}/-/ready", timeout=1).status_code == 200, 30), "prometheus not ready"
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def wait_for(check, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    return False


def query(url: str, expr: str) -> list[dict]:
    body = httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=5).json()
    assert body["status"] == "success", body
    return body["data"]["result"]


@pytest.mark.slow
def test_prometheus_scrapes_two_agents_and_sees_the_stall(prometheus):
    # WHEN Prometheus has scraped both agents
    stalled = 'hangwatch_state{hangwatch_state="stalled"} == 1'
    assert wait_for(lambda: len(query(prometheus, "up == 1")) == 2, 30), query(prometheus, "up")
    assert wait_for(lambda: query(prometheus, stalled), 30)
    # THEN the stall is on node-b only, with its cause, and the rule is pending there
    assert {r["metric"]["host"] for r in query(prometheus, stalled)} == {"node-b"}
    progressing = query(prometheus, 'hangwatch_state{hangwatch_state="progressing"} == 1')
    assert {r["metric"]["host"] for r in progressing} == {"node-a"}
    causes = query(prometheus, "hangwatch_cause_info")
    assert [(r["metric"]["host"], r["metric"]["cause"]) for r in causes] == [("node-b", "nccl_peer_exited")]
    alerts = 'ALERTS{alertname="HangwatchServerStalled"}'
    assert wait_for(lambda: query(prometheus, alerts), 30)
    alert = query(prometheus, alerts)[0]["metric"]
    assert (alert["host"], alert["alertstate"], alert["cause"]) == ("node-b", "pending", "nccl_peer_exited")


@pytest.mark.slow
def test_every_dashboard_query_runs_on_real_prometheus(prometheus):
    # rate() needs two scrapes of every series
    assert wait_for(lambda: len(query(prometheus, "rate(hangwatch_ticks_total[1m])")) == 2, 30)
    dashboard = json.loads((DASHBOARDS / "hangwatch.json").read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"].replace("$host", ".*").replace("$server", ".*")
            assert query(prometheus, expr), f"panel {panel['title']!r}: no data for {expr}"
