"""Bundles recorded on real H200s (lab/gpu, docs/gpu.md) replayed through `hangwatch diagnose`.

Each tests/fixtures/gpu/<scenario>/ holds the bundle `hangwatch collect` wrote while the lab's
real NCCL/CUDA hang was live, the verdict stream `hangwatch attach --json` printed then
(verdicts.jsonl) and what the scenario really is (expected.json: cause, state and, where the lab
knows it, the culprit). CPU only: the GPU evidence is in the files.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "gpu"
SCENARIOS = sorted(p.name for p in FIXTURES.iterdir() if (p / "expected.json").exists())
ONE_GPU = "-1gpu"
_SOURCE_DETAIL = re.compile(r"\((?P<label>[^()]+)\)$")  # `stacks/TP1.3.json (TP1)`


def _diagnose(bundle: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", "from hangwatch.cli.app import main; main()", "diagnose", str(bundle), "--json"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def _expected(scenario: str) -> dict:
    return json.loads((FIXTURES / scenario / "expected.json").read_text())


def _named(verdict: dict) -> list[str]:
    """The culprits a verdict names: its `ranks`, else the processes its evidence points at
    (a `ranks: any` stack atom quotes the rank it saw, e.g. `TP1: after_weights_loaded ...`)."""
    if verdict["ranks"]:
        return list(verdict["ranks"])
    found = (_SOURCE_DETAIL.search(fact["source"]) for fact in verdict["evidence"])
    return sorted({m["label"] for m in found if m})


def _gpus(scenario: str) -> int:
    """GPUs of the machine that recorded it: `-1gpu` fixtures come from one H200 (two ranks on
    it where the scenario needs a peer, lab_scheduler.share_gpus), the others from 2x H200."""
    return 1 if scenario.endswith(ONE_GPU) else 2


def test_every_lab_scenario_has_a_fixture() -> None:
    assert SCENARIOS == sorted([
        "collective", "dead-rank", "graph-capture", "kv-slow", "nccl-init", "spin-kernel",
        "collective-1gpu", "dead-rank-1gpu", "graph-capture-1gpu", "nccl-init-1gpu", "rendezvous-mismatch-1gpu",
    ])


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_diagnose_gives_what_the_scenario_is(scenario: str) -> None:
    expected = _expected(scenario)
    verdict = _diagnose(FIXTURES / scenario / "bundle")
    assert (verdict["state"], verdict["cause"]) == (expected["state"], expected["cause"]), verdict
    if "culprits" in expected:
        assert _named(verdict) == expected["culprits"], verdict


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_live_stream_reached_the_same_verdict(scenario: str) -> None:
    expected = _expected(scenario)
    lines = [json.loads(x) for x in (FIXTURES / scenario / "verdicts.jsonl").read_text().splitlines() if x.strip()]
    assert lines
    right = [v for v in lines if (v["state"], v["cause"]) == (expected["state"], expected["cause"])]
    assert right, [(v["state"], v["cause"]) for v in lines]
    assert all(v["state"] != "stalled" for v in lines[: lines.index(right[0])]), "stalled for another reason first"
    if expected["state"] == "progressing":
        assert all(v["state"] != "stalled" for v in lines)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_bundle_carries_the_real_nvml_samples(scenario: str) -> None:
    bundle = FIXTURES / scenario / "bundle"
    samples = json.loads((bundle / "gpus.json").read_text())["samples"]
    assert len(samples) >= 3
    for sample in samples:
        assert len(sample["gpus"]) == _gpus(scenario)
        for gpu in sample["gpus"]:
            assert gpu["name"] == "NVIDIA H200"
            assert gpu["compute_capability"] == "9.0"
            assert gpu["uuid"].startswith("GPU-")
            assert gpu["memory_total_mib"] > 140_000
            assert 0 < gpu["memory_used_mib"] < gpu["memory_total_mib"]
            assert 0 <= gpu["utilization_pct"] <= 100
    meta = json.loads((bundle / "meta.json").read_text())
    assert (meta["gpu_model"], meta["compute_capability"]) == ("NVIDIA H200", "9.0")


@pytest.mark.parametrize(
    ("scenario", "busy"),
    [("collective", {0}), ("dead-rank", {0}), ("graph-capture", {1}), ("spin-kernel", {0, 1}), ("nccl-init", set()),
     # one GPU shared by both ranks: busy while either waits in an NCCL kernel
     ("collective-1gpu", {0}), ("dead-rank-1gpu", {0}), ("graph-capture-1gpu", {0}), ("nccl-init-1gpu", set()),
     ("rendezvous-mismatch-1gpu", set())],
)
def test_gpu_utilisation_shows_which_gpu_spins(scenario: str, busy: set[int]) -> None:
    # a rank waiting in an NCCL kernel or a spinning kernel keeps its GPU at 100 %; a rank in
    # NCCL bootstrap, a gloo barrier or user code leaves its GPU idle
    last = json.loads((FIXTURES / scenario / "bundle" / "gpus.json").read_text())["samples"][-1]
    assert {g["index"] for g in last["gpus"] if g["utilization_pct"] >= 90} == busy


def test_kv_pool_memory_rises_in_the_bundle() -> None:
    samples = json.loads((FIXTURES / "kv-slow" / "bundle" / "gpus.json").read_text())["samples"]
    used = [s["gpus"][0]["memory_used_mib"] for s in samples]
    assert used == sorted(used) and used[-1] - used[0] > 2048


def test_a_rendezvous_the_users_code_called_is_a_wait_on_the_peers() -> None:
    # issue 26: both ranks block in torch's TCPStore under the user's own join_process_group
    # (user_hooks.py); the wait is on the peers, so user code is no candidate at all
    bundle = FIXTURES / "rendezvous-mismatch-1gpu" / "bundle"
    frames = [f["name"] for t in json.loads((bundle / "stacks" / "TP1.3.json").read_text())
              for f in t["frames"]]
    assert "join_process_group" in frames and "init_process_group" in frames
    verdict = _diagnose(bundle)
    assert (verdict["state"], verdict["cause"]) == ("stalled", "nccl_init")
    others = [c["cause"] for c in verdict["candidates"]] + [r["cause"] for r in verdict["runners_up"]]
    assert "patch_or_user_code" not in others, others
