"""One alert per relaunch (`hangwatch run --remedy`): in the episode of the stall that caused it, as
a Slack message naming the change and as a webhook POST (a real HTTP receiver on loopback)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

from hangwatch.model import State
from hangwatch.sinks.alerts import Alert, AlertDispatcher, WebhookSink, slack_message
from hangwatch.sinks.store import HistoryStore
from helpers.serve_fixtures import make_verdict

RELAUNCH = {"cause": "cuda_graph_capture", "change": "sglang-disable-cuda-graph", "what": "added --disable-cuda-graph",
            "argv": ["python", "-m", "sglang.launch_server", "--disable-cuda-graph"], "env": {},
            "cost": "slower decode (no CUDA graphs)"}


class RecordingSink:
    def __init__(self, name: str = "rec") -> None:
        self.name, self.sent = name, []  # type: ignore[var-annotated]

    def send(self, alert: Alert) -> None:
        self.sent.append(alert)


def test_each_relaunch_is_one_message_in_the_stalls_episode(tmp_path: Path) -> None:
    sink = RecordingSink()
    dispatcher = AlertDispatcher([sink], HistoryStore(tmp_path / "h.db"))
    stalled = make_verdict(State.STALLED, "cuda_graph_capture")
    dispatcher.on_verdict(stalled, "srv")
    dispatcher.relaunch(stalled, "srv", RELAUNCH, 1)
    dispatcher.relaunch(stalled, "srv", RELAUNCH, 1)  # the same relaunch again: no second message
    dispatcher.relaunch(stalled, "srv", {**RELAUNCH, "what": "--nccl-port 1 -> 2"}, 2)
    assert dispatcher.flush(5)
    assert [a.kind for a in sink.sent] == ["firing", "relaunch:1", "relaunch:2"]
    assert len({a.episode_id for a in sink.sent}) == 1
    assert sink.sent[1].verdict["relaunch"]["what"] == "added --disable-cuda-graph"
    message = slack_message(sink.sent[1])
    text = json.dumps(message)
    assert "relaunching with added --disable-cuda-graph" in message["text"]
    assert "slower decode" in text and "sglang.launch_server --disable-cuda-graph" in text
    dispatcher.close()


def test_the_webhook_receives_a_relaunch_event(tmp_path: Path) -> None:
    received: list[dict[str, Any]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        dispatcher = AlertDispatcher([WebhookSink(f"http://127.0.0.1:{server.server_port}/hook")],
                                     HistoryStore(tmp_path / "h.db"))
        crashed = make_verdict(State.CRASHED, "port_in_use")
        dispatcher.on_verdict(crashed, "srv")
        dispatcher.relaunch(crashed, "srv", RELAUNCH, 1)
        assert dispatcher.flush(10)
        dispatcher.close()
    finally:
        server.shutdown()
        server.server_close()
    assert [body["event"] for body in received] == ["firing", "relaunch"]
    assert received[1]["verdict"]["relaunch"]["argv"][-1] == "--disable-cuda-graph"
