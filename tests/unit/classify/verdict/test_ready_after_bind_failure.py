"""A ready line after the server's own port failed to bind is not ready (issue 19, item 3).

The bundle is a real SGLang 0.5.23 start on CPU (lab) asked to serve on a port another socket held:
uvicorn logs `[Errno 98] error while attempting to bind on address ('127.0.0.1', 31632)`, SGLang's
warm-up thread times out against the other socket, and SGLang still logs `The server is fired up and
ready to roll!` before it tears itself down. A watch that took the ready line at its word stopped
with `ready` (tests/integration/test_engine_words_lab.py::test_sglang_api_port_already_taken)."""

from __future__ import annotations

import shutil
from pathlib import Path

from hangwatch.bundle.read import read_bundle
from hangwatch.classify import classify, load_rules
from hangwatch.model import Phase, State
from helpers.paths import FIXTURES

BUNDLE = FIXTURES / "bundles" / "sglang-0523-port-taken"


def copy_with(tmp_path: Path, *, log_until: str | None = None, port: str | None = None) -> Path:
    root = tmp_path / "b"
    shutil.copytree(BUNDLE, root)
    if log_until is not None:  # the log as a live watch reads it the moment that line is written
        text = (root / "server.log").read_text(encoding="utf-8")
        (root / "server.log").write_text(text[: text.index(log_until) + len(log_until)] + "\n", encoding="utf-8")
    if port is not None:
        cmdline = (root / "cmdline.txt").read_text(encoding="utf-8")
        (root / "cmdline.txt").write_text(cmdline.replace("--port 31632", f"--port {port}"), encoding="utf-8")
    return root


def test_the_whole_log_is_a_crash_on_the_taken_port() -> None:
    verdict = classify(read_bundle(BUNDLE), load_rules())
    assert (verdict.state, verdict.cause) == (State.CRASHED, "port_in_use")
    assert any("31632" in fact.text and "Errno 98" in fact.text for fact in verdict.evidence)


def test_the_moment_the_ready_line_is_written_is_not_ready(tmp_path: Path) -> None:
    # GIVEN the log up to SGLang's ready line, the server still alive (no teardown yet)
    evidence = read_bundle(copy_with(tmp_path, log_until="The server is fired up and ready to roll!"))
    assert evidence.phases[-1].phase is Phase.READY  # the line is read as the ready line
    # WHEN it is classified
    verdict = classify(evidence, load_rules())
    # THEN not ready: the bind of its own port failed before it
    assert verdict.state is not State.READY
    assert verdict.cause == "port_in_use"


def test_a_bind_failure_of_another_port_leaves_the_ready_line_ready(tmp_path: Path) -> None:
    # the same log for a server on another port: whatever failed to bind, it was not this server's port
    evidence = read_bundle(copy_with(tmp_path, log_until="The server is fired up and ready to roll!", port="30000"))
    assert classify(evidence, load_rules()).state is State.READY
