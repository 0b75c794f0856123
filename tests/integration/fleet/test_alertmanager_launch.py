"""The shipped Alertmanager config (dashboards/alertmanager.yml) in a real Alertmanager (Debian's
prometheus-alertmanager): a stuck four-node launch pages once, naming the node apart and its cause,
and the launch's per-node alerts are inhibited; a single-node server's stall still pages.

Only the receivers are swapped for a webhook to a local HTTP receiver, and the waits shortened: the
routes, grouping and inhibition are the shipped ones. The rules that raise these alerts are tested
with promtool (dashboards/alerts_test.yml, the HangwatchLaunchStuck case).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.paths import ROOT
from helpers.serve_support import Receiver, free_port

ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
pytestmark = pytest.mark.skipif(ALERTMANAGER is None, reason="apt-get install prometheus-alertmanager")

LAUNCH = "sglang:n11:5000/4"


def _config(receiver: Receiver) -> dict[str, Any]:
    config = yaml.safe_load((ROOT / "dashboards" / "alertmanager.yml").read_text())
    for r in config["receivers"]:
        r.pop("slack_configs", None)
        r["webhook_configs"] = [{"url": receiver.url, "send_resolved": False}]
    config["route"].update(group_wait="1s", group_interval="1s")
    return config


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[tuple[str, Receiver]]:
    receiver = Receiver()
    (tmp_path / "am.yml").write_text(yaml.safe_dump(_config(receiver)))
    port = free_port()
    assert ALERTMANAGER is not None
    with open(tmp_path / "am.log", "wb") as log:
        proc = subprocess.Popen([ALERTMANAGER, f"--config.file={tmp_path / 'am.yml'}", f"--storage.path={tmp_path / 'am'}",
                                 f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=", "--log.level=warn"],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=1):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "am.log").read_text()
                time.sleep(0.2)
        yield url, receiver
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        receiver.close()


def _alert(name: str, instance: str, **labels: str) -> dict[str, Any]:
    host = instance.split(":")[0]
    return {"labels": {"alertname": name, "severity": "page", "job": "hangwatch", "instance": instance, "host": host,
                       "server": "sglang", **labels},
            "annotations": {"summary": f"{name} {instance}"}}


def _post(url: str, alerts: list[dict[str, Any]]) -> None:
    request = urllib.request.Request(f"{url}/api/v2/alerts", data=json.dumps(alerts).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def test_a_stuck_launch_pages_once_and_its_nodes_alerts_are_inhibited(alertmanager: tuple[str, Receiver]) -> None:
    url, receiver = alertmanager
    # GIVEN what the rules raise for a stuck four-node launch (n14 apart) and a stalled single-node server
    stuck = _alert("HangwatchLaunchStuck", "n14:9464", launch=LAUNCH, state="stalled", phase="dist_init",
                   cause="nccl_init", node_rank="3")
    nodes = [_alert("HangwatchServerStalled", f"n{i}:9464", launch=LAUNCH, hangwatch_state="stalled") for i in (11, 12, 13, 14)]
    alone = _alert("HangwatchServerStalled", "n19:9464", hangwatch_state="stalled", server="vllm")
    _post(url, [stuck, *nodes, alone])
    # WHEN Alertmanager has grouped and sent them
    assert receiver.wait_for(2, timeout=30), receiver.bodies
    time.sleep(3)  # several group intervals: anything not inhibited would have been sent by now
    # THEN two notifications: the launch's one page, carrying the node apart and its cause, and the lone server's
    groups = sorted(receiver.bodies, key=lambda b: b["commonLabels"]["alertname"])
    assert [b["commonLabels"]["alertname"] for b in groups] == ["HangwatchLaunchStuck", "HangwatchServerStalled"], groups
    page = groups[0]
    assert page["groupLabels"] == {"launch": LAUNCH}
    assert [(a["labels"]["instance"], a["labels"]["cause"], a["labels"]["node_rank"]) for a in page["alerts"]] == \
        [("n14:9464", "nccl_init", "3")]
    assert [a["labels"]["instance"] for a in groups[1]["alerts"]] == ["n19:9464"]
    # and the launch's four node alerts are held, inhibited by the launch's page
    held = [a for a in _get(f"{url}/api/v2/alerts") if a["labels"].get("launch") == LAUNCH
            and a["labels"]["alertname"] == "HangwatchServerStalled"]
    assert sorted(a["labels"]["instance"] for a in held) == [f"n{i}:9464" for i in (11, 12, 13, 14)]
    assert all(a["status"]["state"] == "suppressed" and a["status"]["inhibitedBy"] for a in held), held


def test_a_second_stuck_launch_is_a_second_page(alertmanager: tuple[str, Receiver]) -> None:
    url, receiver = alertmanager
    _post(url, [_alert("HangwatchLaunchStuck", "a3:9464", launch="run-a", cause="weights_missing"),
                _alert("HangwatchLaunchStuck", "b1:9464", launch="run-b", cause="nccl_init")])
    assert receiver.wait_for(2, timeout=30), receiver.bodies
    time.sleep(2)
    assert sorted(b["groupLabels"]["launch"] for b in receiver.bodies) == ["run-a", "run-b"]
