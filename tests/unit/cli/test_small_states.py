"""Honest small states (issue 23): a command that writes a file says where; a bundle with nothing in it
is `unknown`, not `stalled`; no `python -m hangwatch…` entry point ends in a raw traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import hangwatch
from hangwatch import classify, load_rules, read_bundle
from hangwatch.model import State

PACKAGE = Path(hangwatch.__file__).parent
ENTRY_POINTS = ["hangwatch", *sorted(
    ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    for path in PACKAGE.rglob("*.py") if 'if __name__ == "__main__"' in path.read_text()
)]


def _meta_only(tmp_path: Path) -> Path:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "meta.json").write_text(json.dumps({"format": "hangwatch-bundle/1", "engine": "sglang"}))
    return bundle


def test_a_bundle_with_only_meta_json_is_unknown_with_what_to_collect(tmp_path: Path) -> None:
    verdict = classify(read_bundle(_meta_only(tmp_path)), load_rules())
    assert verdict.state is State.UNKNOWN and verdict.cause == "unknown" and verdict.evidence == ()
    assert "Not enough evidence" in (verdict.title or "") and {m.source for m in verdict.missing} >= {"log", "stacks"}
    assert "below" not in (verdict.remedy or "")  # nothing is below it


def test_diagnose_html_says_where_it_wrote_the_report(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    done = subprocess.run([sys.executable, "-m", "hangwatch", "diagnose", str(_meta_only(tmp_path)), "--html", str(out),
                           "--json"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and out.is_file()
    assert f"wrote the report to {out}" in done.stderr
    assert json.loads(done.stdout)["state"] == "unknown"  # stdout stays one JSON document


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_no_entry_point_prints_a_raw_traceback(module: str) -> None:
    assert len(ENTRY_POINTS) >= 3  # hangwatch, and the two GPU recorders
    done = subprocess.run([sys.executable, "-m", module], capture_output=True, text=True, timeout=120, check=False,
                          stdin=subprocess.DEVNULL)
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    if done.returncode != 0:
        assert (done.stdout + done.stderr).strip(), "a failure says why"
