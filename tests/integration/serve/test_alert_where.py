"""A stall alert names the machine it comes from (issue 23): a real `hangwatch attach` of a stalled test
server posts to a real Slack receiver and a webhook receiver on loopback."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from helpers.livetools import Procs, _env, free_port, server_cmd, wait_for_text
from helpers.serve_support import Receiver


def _alerts_of_a_stall(tmp_path: Path, *extra: str, **location: str) -> tuple[list[dict], list[dict]]:
    procs, slack, hook = Procs(), Receiver(), Receiver()
    try:
        log = tmp_path / "server.log"
        with log.open("wb") as fh:
            server = procs.start(server_cmd(free_port()), stdout=fh, stderr=subprocess.STDOUT,
                                 env=_env(HW_MODE="tcpstore"))
        wait_for_text(log, "Init torch distributed begin")
        procs.hangwatch(["attach", str(server.pid), "--json", "--log", str(log), "--history", str(tmp_path / "h.db"),
                         "--public-url", "http://node7.example:9464", *extra],
                        env=_env(HANGWATCH_SLACK_WEBHOOK=slack.url, HANGWATCH_WEBHOOK=hook.url, **location))
        assert slack.wait_for(1, 90) and hook.wait_for(1, 30), "no alert arrived"
        return list(slack.bodies), list(hook.bodies)
    finally:
        procs.stop()
        slack.close()
        hook.close()


def test_a_stall_alert_names_the_host_and_links_the_page(tmp_path: Path) -> None:
    slack, hook = _alerts_of_a_stall(tmp_path)
    header = slack[0]["blocks"][0]["text"]["text"]
    assert socket.gethostname() in header and "STALLED" in header
    assert socket.gethostname() in slack[0]["text"]  # the notification's fallback text too
    assert socket.gethostname() in hook[0]["where"]
    buttons = [e for b in slack[0]["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert {"Page": "http://node7.example:9464/"}.items() <= {b["text"]["text"]: b["url"] for b in buttons}.items()


def test_in_kubernetes_the_alert_names_the_pod_its_namespace_node_and_launch(tmp_path: Path) -> None:
    # the variables deploy/k8s-sidecar.yaml sets from the downward API
    slack, hook = _alerts_of_a_stall(tmp_path, "--launch-label", "llama-405b-prod", POD_NAME="sglang-0",
                                     POD_NAMESPACE="llm", NODE_NAME="gpu-node-7", POD_IP="10.9.8.7")
    expected = "pod llm/sglang-0 on node gpu-node-7 (10.9.8.7) · launch llama-405b-prod"
    assert expected in slack[0]["blocks"][0]["text"]["text"] and hook[0]["where"] == expected
