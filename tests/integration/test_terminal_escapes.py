"""Escapes from the watched side never reach a terminal (issue 24): a real rank whose running
function is named with an OSC title/clipboard sequence, a CSI clear, a bidi override and a
zero-width space is watched by `hangwatch attach` in a real pty (the live view, with py-spy's
stacks); a preflight of a command whose path holds the same; `fleet --once` of a hostile agent.
The bytes the terminal receives are read from the pty's master side."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from helpers.livetools import HANGWATCH

HOSTILE = "evil\x1b]0;PWNED\x07\x1b]52;c;ZXZpbA==\x07\x1b[2J\u202e\u200bname\x9b31m"
SEEN = "evilname"  # what is left of it once sanitised: proof the string was shown at all
FORBIDDEN = ["\x1b]0;", "\x1b]52;", "PWNED", "\x1b[2J", "\u202e", "\u200b", "\x9b"]

RANK = f"""
import os, sys, time
from setproctitle import setproctitle
setproctitle("sglang::scheduler_TP0")
sys.stdout.write("[2026-12-01 10:00:00 TP0] Init torch distributed begin.\\n"); sys.stdout.flush()
def wait():
    while True:
        time.sleep(0.2)
code = wait.__code__.replace(co_name={HOSTILE!r}, co_qualname={HOSTILE!r})
wait = type(wait)(code, globals())
wait()
"""
LAUNCHER = """
import os, subprocess, sys, time
rank = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "rank.py")])
rank.wait()
"""


def in_pty(argv: list[str], seconds: float, *, stop_when: str | None = None) -> bytes:
    """Run argv on a real pty for up to `seconds`; every byte the terminal got."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "50"}
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
                if stop_when and stop_when.encode() in out:
                    break
            elif proc.poll() is not None:
                break
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        os.close(master)
    return out


def assert_clean(out: bytes) -> None:
    text = out.decode("utf-8", "replace")
    assert [bad for bad in FORBIDDEN if bad in text] == [], text[-2000:]


def test_a_ranks_function_name_in_the_live_attach_view(tmp_path: Path) -> None:
    pkg = tmp_path / "sglang"
    pkg.mkdir()
    (pkg / "rank.py").write_text(RANK)
    (pkg / "launch_server.py").write_text(LAUNCHER)
    log = tmp_path / "server.log"
    with log.open("wb") as fh:
        server = subprocess.Popen([sys.executable, str(pkg / "launch_server.py"), "--port", "1", "--tp-size", "1"],
                                  stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out = in_pty([*HANGWATCH, "attach", str(server.pid), "--log", str(log), "--timeout", "60"], 60, stop_when=SEEN)
    finally:
        os.killpg(server.pid, 9)
        server.wait(timeout=10)
    assert SEEN in out.decode("utf-8", "replace"), out.decode("utf-8", "replace")[-3000:]
    assert_clean(out)


def test_a_path_in_preflight(tmp_path: Path) -> None:
    model = tmp_path / f"model{HOSTILE}"
    out = in_pty([*HANGWATCH, "preflight", "--", "python", "-m", "sglang.launch_server", "--model-path", str(model),
                  "--tp-size", "4", "--api-key", "sk-preflightSECRET123"], 120)
    assert b"preflight:" in out
    assert_clean(out)
    assert b"sk-preflightSECRET123" not in out
    json_out = subprocess.run([*HANGWATCH, "preflight", "--json", "--", "python", "-m", "sglang.launch_server",
                               "--model-path", str(model), "--api-key", "sk-preflightSECRET123"],
                              capture_output=True, timeout=120, check=False).stdout
    assert_clean(json_out) and b"sk-preflightSECRET123" not in json_out


class _Hostile(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        node = {"verdict": {"state": "stalled", "cause": HOSTILE, "ranks": [HOSTILE], "phases": {HOSTILE: HOSTILE}},
                "timeline": None, "stacks": None}
        body = json.dumps({"nodes": [node]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hostile_agent() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_agent_strings_in_fleet_output(hostile_agent: str) -> None:
    out = in_pty([*HANGWATCH, "fleet", hostile_agent, "--once"], 60)
    assert SEEN in out.decode("utf-8", "replace")
    assert_clean(out)
