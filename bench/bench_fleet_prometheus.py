"""`hangwatch fleet --prometheus` at fleet scale: N nodes' series in a real Prometheus.

    python bench/bench_fleet_prometheus.py [--nodes 100,1000] [--per-launch 8] [--repeat 5] [--no-browser]

For each size, the agents' series (tests/helpers/fleet_series.py: launches of --per-launch nodes,
all ready but one launch, whose node 3 is stuck in distributed init and the rest wait on it) are
backfilled into a fresh TSDB with `promtool tsdb create-blocks-from openmetrics`, and Debian's
`prometheus` serves them on a loopback port. Measured:

  refresh   one PromFleet.poll_once(): the five PromQL queries, the join, launches, the node apart,
            and the node apart's details (its agent's address is a closed loopback port: refused)
  command   `hangwatch fleet --prometheus URL --json`, wall clock, and `hangwatch --version` beside it
            (the interpreter and the CLI's imports, which every hangwatch command pays)
  snapshot  GET /snapshot of `hangwatch fleet --prometheus URL --serve` (the page's data), and its size
  page      real Chromium: from navigation to the node apart named in #apart (--no-browser skips it)

and each divided by the node count (the cost per node). Target: refresh and page <= 1 s at 1,000
nodes. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from hangwatch.sinks.web.promfleet import PromFleet  # noqa: E402
from hangwatch.sources.prometheus import PrometheusClient  # noqa: E402
from helpers.fleet_series import backfill, instance, openmetrics  # noqa: E402
from helpers.pageprocs import free_port  # noqa: E402
from helpers.promserver import Prometheus  # noqa: E402

HANGWATCH = str(Path(sys.executable).parent / "hangwatch")
STUCK = 3


def _median_ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:7.1f} ms (max {max(samples) * 1000:.1f})"


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read()


def bench(nodes: int, per_launch: int, repeat: int, browser: bool) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="hangwatch-bench-fleet-"))
    closed = f"http://127.0.0.1:{free_port()}"  # the stuck node's agent: nothing listens there
    started = time.perf_counter()
    text = openmetrics(nodes, per_launch=per_launch, stuck=STUCK, now=time.time() - 5, dead_url=closed)
    data = backfill(text, tmp)
    backfilled = time.perf_counter() - started
    prometheus = Prometheus(tmp, [], data=data)
    try:
        series = int(float(prometheus.query("count({__name__=~'hangwatch_.*|up'})")[0]["value"][1]))
        print(f"\n{nodes} nodes ({nodes // per_launch} launches of {per_launch}): {series} series, "
              f"{len(text) / 1e6:.1f} MB of OpenMetrics backfilled in {backfilled:.1f} s")
        client = PrometheusClient(prometheus.url)
        fleet = PromFleet(client)
        refresh = []
        for _ in range(repeat):
            t = time.perf_counter()
            result = fleet.poll_once()
            refresh.append(time.perf_counter() - t)
        fleet.stop()
        summary = result["fleet"]
        assert summary["nodes"] == nodes and summary["apart"] == [instance(STUCK)], summary["apart"]
        queries = client.queries // repeat
        print(f"  refresh   {_median_ms(refresh)}  {queries} queries, {fleet.fetched} agent asked for details; "
              f"{statistics.median(refresh) / nodes * 1e6:.0f} us per node")
        command = []
        for _ in range(max(1, repeat // 2)):
            t = time.perf_counter()
            out = subprocess.run([HANGWATCH, "fleet", "--prometheus", prometheus.url, "--json"], capture_output=True,
                                 text=True, timeout=120, check=True)
            command.append(time.perf_counter() - t)
        assert json.loads(out.stdout)["nodes"] == nodes
        start = []
        for _ in range(max(1, repeat // 2)):
            t = time.perf_counter()
            subprocess.run([HANGWATCH, "--version"], capture_output=True, timeout=120, check=True)
            start.append(time.perf_counter() - t)
        print(f"  command   {_median_ms(command)}  hangwatch fleet --prometheus --json; of which the CLI's own start "
              f"(hangwatch --version) {statistics.median(start) * 1000:.0f} ms")
        _page(prometheus.url, nodes, repeat, browser)
    finally:
        prometheus.close()


def _page(prometheus_url: str, nodes: int, repeat: int, browser: bool) -> None:
    port = free_port()
    proc = subprocess.Popen([HANGWATCH, "fleet", "--prometheus", prometheus_url, "--serve", "--port", str(port),
                             "--interval", "5"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _fetch(url + "/healthz")
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the fleet page did not come up") from None
                time.sleep(0.2)
        snap, size = [], 0
        for _ in range(repeat):
            t = time.perf_counter()
            size = len(_fetch(url + "/snapshot"))
            snap.append(time.perf_counter() - t)
        print(f"  snapshot  {_median_ms(snap)}  {size / 1024:.0f} KiB ({size / nodes:.0f} B per node)")
        if browser:
            _chromium(url, nodes, repeat)
    finally:
        proc.terminate()
        proc.wait(10)


def _chromium(url: str, nodes: int, repeat: int) -> None:
    from helpers.chrome import Browser, chromium_paths

    if chromium_paths() is None:
        print("  page      skipped: chromium/chromedriver not installed")
        return
    b = Browser()
    loads = []
    try:
        want = instance(STUCK)
        for _ in range(repeat):
            b.driver.get("about:blank")
            t = time.perf_counter()
            b.driver.get(url + "/")
            while want not in (b.js("const e = document.getElementById('apart'); return e ? e.textContent : ''") or ""):
                if time.perf_counter() - t > 30:
                    raise RuntimeError("the page never named the node apart")
                time.sleep(0.01)
            loads.append(time.perf_counter() - t)
        rows = b.js("return document.querySelectorAll('#fleet tr').length")
        print(f"  page      {_median_ms(loads)}  navigation to the node apart named, real Chromium; "
              f"{rows} table rows drawn for {nodes} nodes")
    finally:
        b.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", default="100,1000", help="comma-separated fleet sizes")
    parser.add_argument("--per-launch", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    for n in (int(x) for x in args.nodes.split(",")):
        bench(n, args.per_launch, args.repeat, not args.no_browser)


if __name__ == "__main__":
    main()
