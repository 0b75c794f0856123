"""A real Prometheus (Debian's `prometheus` binary) for the tests: a generated config, a free loopback
port, a short scrape interval, its data in a temporary directory; stopped by `close()`."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PROMETHEUS = shutil.which("prometheus")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Prometheus:
    """`prometheus` scraping `targets` (host:port) as job "hangwatch" every `scrape_s` seconds."""

    def __init__(self, tmp: Path, targets: Sequence[str], *, scrape_s: float = 0.5,
                 rule_files: Sequence[Path] = (), extra: Sequence[str] = (), data: Path | None = None) -> None:
        """`data`: an existing TSDB directory (backfilled with promtool) instead of a fresh one."""
        if PROMETHEUS is None:
            raise RuntimeError("prometheus not installed (apt-get install prometheus)")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = tmp / "prometheus.yml"
        interval = f"{int(scrape_s * 1000)}ms"
        config.write_text(json.dumps({  # JSON is YAML
            "global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [{"job_name": "hangwatch", "static_configs": [{"targets": list(targets)}]}],
        }))
        self.log = tmp / "prometheus.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={data or tmp / 'prom-data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn", *extra],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        self.close()
        raise RuntimeError(f"prometheus did not become ready: {self.log.read_text(errors='replace')[-2000:]}")

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]["result"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
