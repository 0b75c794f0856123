"""The page's screenshots in docs/, taken of real lab servers in a headless Chromium.

    .venv/bin/python lab/screenshots.py [stalled progressing ready fleet]

stalled: hs-dump-patch (a user's patch blocks the warm-up forward); progressing: the report of a slow
KV-cache allocation recorded on 2x H200 (tests/fixtures/gpu/kv-slow); ready: healthy; fleet: tp2-one-rank-loading, one agent per node and
`hangwatch fleet` over both. Needs the lab (lab/install.sh) and chromium + chromedriver.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from helpers.chrome import Browser, facts  # noqa: E402
from helpers.pageprocs import HANGWATCH, Procs, free_port, get_json, wait_until  # noqa: E402

DOCS = ROOT / "docs"


def _lab(procs: Procs, scenario: str) -> dict[str, Any]:
    procs.start([sys.executable, str(ROOT / "lab" / "run.py"), scenario, "--hold", "600"], "lab")
    return json.loads(wait_until(lambda: procs.output("lab").splitlines()[:1], 60, "the lab")[0])


def _launched(procs: Procs, node: int) -> dict[str, Any] | None:
    for line in procs.output("lab").splitlines():
        event = json.loads(line) if line.startswith("{") else {}
        if event.get("event") == "launched" and event.get("node") == node:
            return event
    return None


def _shoot(browser: Browser, url: str, state: str, out: Path, settle: float, timeout: float = 400) -> None:
    browser.driver.get(url)
    wait_until(lambda: facts(browser)["state"] == state, timeout, f"the page to show {state}", every=0.2)
    time.sleep(settle)
    browser.screenshot(out)
    errors = browser.errors()
    print(f"{out.relative_to(ROOT)}: {facts(browser)['state']}, console errors: {errors}")


def shot(name: str, procs: Procs, browser: Browser) -> None:
    out = DOCS / f"page-{name}.png"
    if name == "fleet":
        _lab(procs, "tp2-one-rank-loading")
        nodes = [wait_until(lambda n=n: _launched(procs, n), 60, f"node {n}") for n in (0, 1)]
        urls = [procs.agent(node["node_pid"], f"agent{i}", log=node["log"]) for i, node in enumerate(nodes)]
        port = free_port()
        procs.start([HANGWATCH, "fleet", *urls, "--port", str(port)], "fleet")
        fleet = f"http://127.0.0.1:{port}"
        node1 = urls[1].removeprefix("http://")

        def steady() -> bool:  # past the start, where a node may stand apart for a while for other reasons
            data = get_json(fleet + "/snapshot")
            return data["fleet"]["apart"] == [node1] and "furthest behind" in data["fleet"]["why"] and all(
                n["verdict"] and n["verdict"]["state"] == "stalled" for n in data["nodes"])

        wait_until(steady, 400, "both nodes stalled, node 1 apart", every=1.0)
        _shoot(browser, fleet + "/", "stalled", out, settle=2)
        return
    if name == "progressing":
        # On CPU the lab's slow phases (kv-slow) end within hangwatch's 30 s "slow, not stuck" window, so
        # this one is the report of a real slow KV-cache allocation recorded on 2x H200 (GPU memory rising).
        report = procs.tmp / "kv-slow.html"
        subprocess.run([HANGWATCH, "diagnose", str(ROOT / "tests/fixtures/gpu/kv-slow/bundle"), "--html", str(report)],
                       check=True, capture_output=True, timeout=120)
        _shoot(browser, report.as_uri(), "progressing", out, settle=1)
        return
    scenario, state, settle = {"stalled": ("hs-dump-patch", "stalled", 8), "ready": ("healthy", "ready", 2)}[name]
    info = _lab(procs, scenario)
    url = procs.agent(info["pid"], log=info["log"])
    _shoot(browser, url + "/", state, out, settle)


def main(names: list[str]) -> None:
    import tempfile

    for name in names or ["stalled", "progressing", "ready", "fleet"]:
        with tempfile.TemporaryDirectory(prefix="hangwatch-shots-") as tmp:
            procs, browser = Procs(Path(tmp)), Browser()
            try:
                shot(name, procs, browser)
            finally:
                browser.close()
                procs.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
