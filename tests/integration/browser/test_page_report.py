"""The one-file report (`hangwatch diagnose BUNDLE --html FILE`, GET /report.html) opened from file://.

The bundle is a real hang recorded on 2x H200 (tests/fixtures/gpu/collective): TP1 runs a user hook
and skips an all-reduce while TP0 waits in it.
"""

from __future__ import annotations

import subprocess
import urllib.request
from pathlib import Path

from helpers.chrome import Browser, facts
from helpers.pageprocs import HANGWATCH, ROOT, Procs, start_test_server, wait_until

COLLECTIVE = ROOT / "tests" / "fixtures" / "gpu" / "collective" / "bundle"


def test_report_from_a_bundle_passes_the_page_checks_from_file_url(browser: Browser, tmp_path: Path) -> None:
    # GIVEN a report written from a bundle
    report = tmp_path / "report.html"
    done = subprocess.run([HANGWATCH, "diagnose", str(COLLECTIVE), "--html", str(report)], check=False,
                          capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "STALLED" in done.stdout  # the terminal report is printed as before
    # WHEN it is opened from disk, with no server anywhere
    browser.driver.get(report.as_uri())
    # THEN it shows the state, the cause, one row per rank, the rank apart, the GPUs
    page = wait_until(lambda: (f := facts(browser))["state"] and f, 10, "the report to draw")
    assert (page["state"], page["cause"]) == ("stalled", "patch_or_user_code")
    assert sorted(page["rows"]) == ["TP0", "TP1"]
    assert page["outliers"] == ["TP1"]
    assert "after_weights_loaded" in page["treeRanks"]
    assert browser.js("return document.querySelectorAll('#gpus .gpu').length") == 2
    assert browser.errors() == []
    # self-contained: nothing but the file itself was loaded
    loaded = browser.js("return performance.getEntries().filter((e) => e.entryType === 'resource').map((e) => e.name)")
    assert loaded == []


def test_live_report_html_is_the_same_page_with_the_data_inside(procs: Procs, browser: Browser, tmp_path: Path) -> None:
    # GIVEN an agent watching a stuck server
    server = start_test_server(procs, tmp_path, "fifo_rank")
    url = procs.agent(server.pid)
    wait_until(lambda: b'"stalled"' in urllib.request.urlopen(url + "/verdict", timeout=5).read(), 60, "a stall")
    # WHEN its /report.html is saved and opened later from disk, the agent gone
    report = tmp_path / "live-report.html"
    report.write_bytes(urllib.request.urlopen(url + "/report.html", timeout=10).read())
    procs.stop()
    browser.driver.get(report.as_uri())
    # THEN it shows what the live page showed
    page = wait_until(lambda: (f := facts(browser))["state"] and f, 10, "the report to draw")
    assert page["state"] == "stalled" and page["cause"]
    assert {"TP0", "TP1"} <= set(page["rows"])
    assert page["outliers"] == ["TP1"]
    assert browser.errors() == []
