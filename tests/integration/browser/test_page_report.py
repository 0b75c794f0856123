"""The one-file report (`hangwatch diagnose BUNDLE --html FILE`, GET /report.html) opened from file://.

The bundle is a real hang recorded on 2x H200 (tests/fixtures/gpu/collective): TP1 runs a user hook
and skips an all-reduce while TP0 waits in it.
"""

from __future__ import annotations

import copy
import subprocess
import time
import urllib.request
from pathlib import Path

from hangwatch.bundle.archive import read_bundle_files
from hangwatch.bundle.read import evidence_from_files
from hangwatch.classify import classify, load_rules
from hangwatch.sinks.web import page_data, render_page
from hangwatch.sinks.web.report import bundle_node
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


def test_two_nodes_on_one_host_name_the_rank_apart_under_the_node_whose_log_it_writes(browser: Browser, tmp_path: Path) -> None:
    # GIVEN two nodes' data as the fleet page gets it, from the recorded H200 hang: node 0 runs TP0
    # (its log) and, on one host, also sampled TP1's stack as a peer; node 1 runs TP1
    files = read_bundle_files(COLLECTIVE)
    evidence = evidence_from_files(files)
    whole = bundle_node(files, evidence, classify(evidence, load_rules()), name="x")
    assert whole["verdict"]["ranks"] == ["TP1"]
    nodes = []
    for name, own in (("node0", "TP0"), ("node1", "TP1")):
        node = copy.deepcopy(whole)
        node["name"] = name
        node["timeline"]["ranks"] = {own: whole["timeline"]["ranks"][own]}
        node["stacks"].pop("tree", None)
        if own == "TP1":
            node["stacks"]["stacks"] = {"TP1": whole["stacks"]["stacks"]["TP1"]}
        nodes.append(node)
    html, _ = render_page("report", title="two nodes", data=page_data("report", "two nodes", nodes, generated_at=time.time()))
    report = tmp_path / "fleet.html"
    report.write_text(html, encoding="utf-8")
    # WHEN it is drawn
    browser.driver.get(report.as_uri())
    page = wait_until(lambda: (f := facts(browser))["state"] and f["outliers"] and f, 10, "the page to draw")
    # THEN TP1 stands apart once, under node 1, not also under the agent that sampled it as a peer
    assert page["outliers"] == ["node1/TP1"], page["outliers"]
    assert browser.errors() == []
