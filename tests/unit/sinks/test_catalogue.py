"""docs/causes.md is the catalogue the package prints; `hangwatch causes` works."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hangwatch.classify import load_rules
from hangwatch.classify.catalogue import catalogue
from hangwatch.classify.causes import CAUSES
from hangwatch.classify.preflight.checks import load_checks
from hangwatch.sinks.catalogue import catalogue_markdown

ROOT = Path(__file__).resolve().parents[3]
HANGWATCH = [str(Path(sys.executable).parent / "hangwatch")]


def test_docs_causes_md_is_generated_from_the_package() -> None:
    expected = catalogue_markdown(catalogue(load_rules(), load_checks()))
    on_disk = (ROOT / "docs" / "causes.md").read_text()
    assert on_disk == expected, "docs/causes.md is out of date: run `hangwatch causes --markdown > docs/causes.md`"


def test_every_cause_a_rule_names_is_in_the_catalogue_and_every_cause_but_unknown_has_a_rule() -> None:
    entries = catalogue(load_rules(), load_checks())
    assert [e.cause.id for e in entries] == list(CAUSES)
    assert [e.cause.id for e in entries if not e.rules and not e.checks and e.cause.id != "unknown"] == []
    assert {r.cause for r in load_rules()} <= set(CAUSES)


def test_the_causes_command() -> None:
    text = subprocess.run([*HANGWATCH, "causes"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert text.startswith("nccl_init  (stalled)\n  what:     NCCL communicator creation")
    assert "\n  rules:    " in text
    listed = json.loads(subprocess.run([*HANGWATCH, "causes", "--json"], capture_output=True, text=True, timeout=60, check=True).stdout)
    assert [c["cause"] for c in listed] == list(CAUSES)
    weights = next(c for c in listed if c["cause"] == "weight_loading_io")
    assert {"stalled", "progressing"} <= set(weights["states"]) and weights["rules"]
