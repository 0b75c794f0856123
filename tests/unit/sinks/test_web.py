"""The page's renderer and its endpoints: GET /, /snapshot, /report.html, /gpus, /timeline's clock."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient as _TestClient

from hangwatch.classify import RULES_DIR, load_rules
from hangwatch.model import GpuInfo, GpuSample
from hangwatch.sinks.api import create_app, gpu_history
from hangwatch.sinks.web import render_page
from hangwatch.sinks.web.report import write_report
from hangwatch.watch.published import LatestView, Published
from helpers.paths import FIXTURES
from helpers.serve_fixtures import SECRET, make_verdict, make_view


def TestClient(app: object, **kw: object) -> _TestClient:  # noqa: N802 - stands in for the class
    """A client that names loopback in its Host header, as a browser on 127.0.0.1 does (tokenless APIs check it)."""
    return _TestClient(app, base_url="http://127.0.0.1:9464", **kw)  # type: ignore[arg-type]

COLLECTIVE = FIXTURES / "gpu" / "collective" / "bundle"


def _inline(html: str, tag: str) -> str:
    return re.search(rf"<{tag}>(.*?)</{tag}>", html, re.DOTALL).group(1)  # type: ignore[union-attr]


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_policy_allows_exactly_the_inline_script_and_style_and_no_other_origin():
    html, policy = render_page("report", data={"nodes": []})
    assert f"script-src {_hash(_inline(html, 'script'))};" in policy
    assert f"style-src {_hash(_inline(html, 'style'))};" in policy
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy
    assert "http" not in policy  # no CDN, no other host
    assert policy.replace("'", "&#x27;") in html or policy in html.replace("&quot;", '"')


def test_data_cannot_close_the_script_it_is_embedded_in():
    hostile = "</script><script>alert(1)</script><!--"
    html, _ = render_page("report", data={"nodes": [{"name": hostile}]})
    assert html.count("</script>") == 1 and "<!--" not in html
    embedded = _inline(html, "script").split("\n", 1)[0]
    assert json.loads(embedded.removeprefix("window.HW_CONFIG=").removesuffix(";"))["data"]["nodes"][0]["name"] == hostile


def test_the_page_is_open_but_its_data_needs_the_token(view):
    client = TestClient(create_app(view, token="tok", rate=None))
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert '"auth":true' in page.text  # the page asks for the token before its first fetch
    assert SECRET not in page.text and "ncclCommInitRankConfig" not in page.text  # no data in the page
    for path in ("/snapshot", "/report.html", "/gpus"):
        assert client.get(path).status_code == 401
        assert client.get(path, headers={"Authorization": "Bearer tok"}).status_code == 200


def test_snapshot_is_the_endpoints_bodies_redacted(view, stalled):
    client = TestClient(create_app(view, rate=None))
    body = client.get("/snapshot").json()
    assert body["mode"] == "live" and len(body["nodes"]) == 1
    node = body["nodes"][0]
    for key in ("verdict", "timeline", "stacks", "history"):
        assert node[key] == client.get("/" + key).json(), key
    assert node["preflight"] is None or node["preflight"] == client.get("/preflight").json()
    assert node["gpus"]["samples"][0]["gpus"][0]["memory_used_mib"] == 1024.0
    assert SECRET not in json.dumps(body)


def test_report_html_embeds_the_snapshot(view, stalled):
    client = TestClient(create_app(view, rate=None))
    response = client.get("/report.html")
    assert response.status_code == 200 and "filename=" in response.headers["content-disposition"]
    assert '"mode":"report"' in response.text and stalled.cause in response.text
    assert SECRET not in response.text


def test_timeline_and_gpus_carry_the_watch_clock():
    view = LatestView("s", started_at=1_000.0)
    view.publish(Published(timeline={"TP0": [{"phase": "launch", "at": 0.5, "end": None}]}, verdict=make_verdict()))
    client = TestClient(create_app(view, rate=None))
    timeline = client.get("/timeline").json()
    assert timeline["started_at"] == 1_000.0 and timeline["now"] > 0
    assert client.get("/gpus").json() == {"server": "s", "started_at": 1_000.0, "samples": []}


def test_gpu_history_keeps_the_newest_and_thins_the_rest():
    samples = [GpuSample(t=float(i), gpus=(GpuInfo(0, "H200", memory_used_mib=float(i)),)) for i in range(2_000)]
    out = gpu_history(samples, limit=600)
    assert len(out) <= 600 and out[-1]["t"] == 1_999.0
    assert [s["t"] for s in out] == sorted(s["t"] for s in out)
    assert gpu_history(samples[:10]) == gpu_history(samples[:10], limit=600) and len(gpu_history(samples[:10])) == 10


def test_bundle_report_redacts_and_embeds_the_verdict(tmp_path):
    bundle = tmp_path / "bundle"
    shutil.copytree(COLLECTIVE, bundle)
    with open(bundle / "server.log", "a") as log:
        log.write(f"HF_TOKEN={SECRET}\n")
    (bundle / "cmdline.txt").write_text(f"python -m sglang.launch_server --api-key {SECRET}\n")
    out = tmp_path / "r.html"
    verdict = write_report(bundle, out, load_rules([RULES_DIR]))
    html = out.read_text()
    assert verdict.cause == "patch_or_user_code" and '"cause":"patch_or_user_code"' in html
    assert SECRET not in html
    assert '"TP1"' in html and "after_weights_loaded" in html


def test_diagnose_html_to_an_unwritable_path_is_a_one_line_error(tmp_path):
    hangwatch = str(Path(sys.executable).parent / "hangwatch")
    done = subprocess.run([hangwatch, "diagnose", str(COLLECTIVE), "--html", str(tmp_path / "no" / "such" / "r.html")],
                          check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "cannot write" in done.stderr


@pytest.fixture
def view(stalled):
    return make_view(stalled)


@pytest.fixture
def stalled():
    return make_verdict()


def test_a_deep_merged_tree_survives_the_api_redaction():
    # a stuck rank's stack is often 40-100 frames: the tree nests two levels per frame
    tree: dict = {"frame": "<all>", "ranks": ["TP0"], "outliers": [], "children": []}
    node = tree
    for i in range(120):
        child = {"frame": f"f{i} (m.py:{i})", "ranks": ["TP0"], "children": []}
        node["children"].append(child)
        node = child
    from hangwatch.redact import redacted

    out = redacted({"tree": tree})["tree"]
    for _ in range(120):
        (out,) = out["children"]
        assert out["ranks"] == ["TP0"]
