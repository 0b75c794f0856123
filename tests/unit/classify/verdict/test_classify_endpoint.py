"""Ready from the engine's own endpoint when no log is readable, and never from an open port alone."""

from __future__ import annotations

from hangwatch.bundle import evidence_from_files
from hangwatch.classify import classify
from hangwatch.model import EndpointAnswer, Evidence, ListeningSocket, State


def _evidence(endpoint: EndpointAnswer | None) -> Evidence:
    return Evidence(engine="sglang", ports=(ListeningSocket("127.0.0.1", 30000, pid=None),), server_port=30000,
                    observed_for_s=5.0, since_last_progress_s=1.0, log_quiet_s=5.0, endpoint=endpoint)


def test_a_real_ready_answer_is_ready_and_says_where_it_came_from() -> None:
    answer = EndpointAnswer("http://127.0.0.1:30000/ready", 200, True, "200 OK")
    verdict = classify(_evidence(answer), [])
    assert verdict.state is State.READY
    assert [f.text for f in verdict.evidence] == ["GET http://127.0.0.1:30000/ready answered 200 OK"]


def test_an_open_port_or_a_503_is_not_ready() -> None:
    for answer in (None, EndpointAnswer("http://127.0.0.1:30000/ready", 503, False, "503 Service Unavailable")):
        assert classify(_evidence(answer), []).state is not State.READY


def test_the_answer_travels_in_a_bundle() -> None:
    meta = (b'{"format": "hangwatch-bundle/1", "engine": "sglang", "endpoint": '
            b'{"url": "http://127.0.0.1:30000/ready", "status": 200, "ready": true, "detail": "200 OK"}}')
    evidence = evidence_from_files({"meta.json": meta})
    assert evidence.endpoint == EndpointAnswer("http://127.0.0.1:30000/ready", 200, True, "200 OK")
    assert classify(evidence, []).state is State.READY
