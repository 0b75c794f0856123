"""The page reads right (issue 23): timeline labels never overlap bars or each other, at 1280 and 1920
wide, with 2 and 64 ranks; "where it's stuck" leads with a frame a person reads; the evidence of two
nodes is one list. Drawn by a real Chromium from reports `hangwatch diagnose --html` writes."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from hangwatch.bundle.archive import read_bundle_files
from hangwatch.bundle.read import evidence_from_files
from hangwatch.classify import classify, load_rules
from hangwatch.model import Verdict
from hangwatch.sinks.web import page_data, render_page
from hangwatch.sinks.web.report import bundle_node
from helpers.chrome import Browser
from helpers.pageprocs import HANGWATCH, ROOT, wait_until

COLLECTIVE = ROOT / "tests" / "fixtures" / "gpu" / "collective" / "bundle"

# each rank: dist init 0-2 s, weights from 2 s; rank r ends weights at 2 + r % 7 s (some bars too short
# for their label), the last rank never does (the stall)
GEOMETRY = """
const svg = document.getElementById("gantt"); const box = svg.getBoundingClientRect();
const rect = (e) => { const b = e.getBoundingClientRect(); return {l: b.left - box.left, r: b.right - box.left, t: b.top - box.top, b: b.bottom - box.top}; };
const meets = (a, b) => a.l < b.r - 0.5 && b.l < a.r - 0.5 && a.t < b.b - 0.5 && b.t < a.b - 0.5;
const problems = [];
for (const row of svg.querySelectorAll("g.rank-row")) {
  const label = rect(row.querySelector("text.rowlabel"));
  const shapes = Array.from(row.querySelectorAll("rect.bar, rect.between"));
  for (const s of shapes) if (meets(label, rect(s))) problems.push("row label over a bar: " + row.dataset.rank);
  for (const text of row.querySelectorAll("text.barlabel")) {
    const t = rect(text), under = shapes.filter((s) => meets(t, rect(s)));
    if (!under.some((s) => { const r = rect(s); return t.l >= r.l - 0.5 && t.r <= r.r + 0.5; })) problems.push("bar label outside its bar: " + row.dataset.rank + " " + text.textContent);
  }
}
const now = document.getElementById("now-label"), eta = document.getElementById("eta-label");
if (now && eta && meets(rect(now), rect(eta))) problems.push("now and ETA labels overlap");
for (const text of svg.querySelectorAll("text")) { const t = rect(text); if (t.l < -0.5 || t.r > box.width + 0.5) problems.push("text outside the chart: " + text.textContent); }
return {problems: problems, rows: svg.querySelectorAll("g.rank-row").length, labels: svg.querySelectorAll("text.barlabel").length};
"""


def _bundle(tmp_path: Path, ranks: int) -> Path:
    bundle = tmp_path / f"b{ranks}"
    bundle.mkdir()
    (bundle / "meta.json").write_text(json.dumps({"format": "hangwatch-bundle/1", "engine": "sglang", "tp": ranks,
                                                  "captured_at": "2026-12-01T10:01:30Z", "observed_for_s": 90,
                                                  "since_last_progress_s": 80, "log_quiet_s": 80}))
    lines = []
    for r in range(ranks):
        lines += [(0, r, "Init torch distributed begin."), (2, r, "Init torch distributed ends. mem usage=0.50 GB"),
                  (2, r, "Load weight begin. avail mem=138.37 GB")]
        if r != ranks - 1:
            lines.append((2 + r % 7, r, "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=118.37 GB, mem usage=20.00 GB."))
    lines.sort()
    (bundle / "server.log").write_text("".join(f"[2026-12-01 10:00:{t:02d} TP{r}] {text}\n" for t, r, text in lines))
    return bundle


@pytest.mark.parametrize("ranks", [2, 64])
@pytest.mark.parametrize("width", [1280, 1920])
def test_timeline_labels_never_overlap(tmp_path: Path, ranks: int, width: int) -> None:
    report = tmp_path / "r.html"
    done = subprocess.run([HANGWATCH, "diagnose", str(_bundle(tmp_path, ranks)), "--html", str(report)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    browser = Browser(width=width)
    try:
        browser.driver.get(report.as_uri())
        drawn = wait_until(lambda: browser.js("return document.getElementById('gantt') ? 1 : 0") and browser.js(GEOMETRY),
                           15, "the timeline")
        assert drawn["rows"] >= ranks and drawn["labels"] >= 1  # something was labelled, and checked
        assert drawn["problems"] == [], drawn["problems"][:10]
        assert browser.errors() == []
    finally:
        browser.close()


def _two_nodes(tmp_path: Path, bundle: Path, names: tuple[str, str], native: bool = False) -> tuple[Path, Verdict]:
    files = read_bundle_files(bundle)
    evidence = evidence_from_files(files)
    verdict = classify(evidence, load_rules())
    nodes = [bundle_node(files, evidence, verdict, name=name) for name in names]
    for node in nodes if native else ():
        # a native dump: a raw libc address innermost, then a symbolised frame, then the Python ones
        for thread in node["stacks"]["stacks"]["TP1"]:
            thread["frames"][:0] = [
                {"function": "0x7f79a92a3f16", "qualname": None, "file": None, "line": None, "origin": "native", "library": "libc.so.6"},
                {"function": "pthread_cond_wait", "qualname": None, "file": None, "line": None, "origin": "native", "library": "libc.so.6"}]
    html, _ = render_page("report", title="two nodes", data=page_data("report", "two nodes", nodes, generated_at=time.time()))
    report = tmp_path / "fleet.html"
    report.write_text(html, encoding="utf-8")
    return report, verdict


@pytest.mark.parametrize("width", [1280, 1920])
def test_long_node_names_of_a_fleet_keep_their_labels_off_the_bars(tmp_path: Path, width: int) -> None:
    report, _ = _two_nodes(tmp_path, _bundle(tmp_path, 4), ("h200-node-0017.cluster.example", "h200-node-0018.cluster.example"))
    browser = Browser(width=width)
    try:
        browser.driver.get(report.as_uri())
        drawn = wait_until(lambda: browser.js("return document.getElementById('gantt') ? 1 : 0") and browser.js(GEOMETRY),
                           15, "the timeline")
        assert drawn["rows"] == 8 and drawn["problems"] == [], drawn["problems"][:10]
        assert browser.errors() == []
    finally:
        browser.close()


def test_two_nodes_reporting_the_same_evidence_show_it_once_and_where_leads_with_a_named_frame(
        tmp_path: Path, browser: Browser) -> None:
    # the H200 hang (TP1 in a user hook) as two agents that both sampled both ranks report it
    report, verdict = _two_nodes(tmp_path, COLLECTIVE, ("node0", "node1"), native=True)
    browser.driver.get(report.as_uri())
    items = wait_until(lambda: browser.js(
        "return Array.from(document.querySelectorAll('#evidence-list li')).map((li) => li.textContent)"), 10, "evidence")
    assert len(items) == len(set(items)) == len(verdict.evidence) >= 1
    assert all("node0, node1: " in item for item in items)
    where = browser.js("return document.querySelector('#why .blocker').textContent")
    assert where.startswith("TP1") and " ," not in where and "0x7f" not in where
    assert "at after_weights_loaded (user_hooks.py:18)" in where, where
    assert browser.errors() == []
