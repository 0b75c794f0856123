"""The probe corpus (tests/probe_corpus, report-shaped bundles written from the mechanism) must not fall.

The probes cover every cause in the forms public reports take (log tails of SGLang 0.4/0.5 and vLLM
V0/V1, pasted py-spy dumps, command lines, env, dmesg) plus `healthy-*` live-loop cases that must
not be called stalled. Regenerate them with `python tests/probe_corpus/make_probes.py`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBES = ROOT / "tests" / "probe_corpus"

# Reached on 2026-11-30 (103/104 causes, 103/104 states); raise when the rules get better, never lower.
FLOORS = {"cause_accuracy": 0.99, "state_accuracy": 0.99}


def test_probe_corpus_score_does_not_fall() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from hangwatch.cli import main; main()", "eval", str(PROBES), "--json"],
        capture_output=True, text=True, timeout=300, check=True,
    )
    summary = json.loads(out.stdout)
    assert summary["cases"] >= 100, summary["cases"]
    for key, floor in FLOORS.items():
        assert summary[key] >= floor, (key, summary[key], summary["confusions"])


def test_healthy_live_starts_are_not_called_stalled() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from hangwatch.cli import main; main()", "eval", str(PROBES), "--json"],
        capture_output=True, text=True, timeout=300, check=True,
    )
    healthy = [r for r in json.loads(out.stdout)["results"] if Path(r["bundle"]).name.startswith("healthy-")]
    assert healthy
    assert [(Path(r["bundle"]).name, r["state"], r["cause"]) for r in healthy if r["state"] == "stalled" or r["cause"]] == []
