"""The model's identity for learned budgets: the path the server resolves, and its config."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch.sources.modelid import model_identity


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait(timeout=10)


def _model(root: Path, layers: int) -> Path:
    (root / "model").mkdir(parents=True)
    (root / "model" / "config.json").write_text(json.dumps({"num_hidden_layers": layers}))
    return root


def test_the_same_relative_text_in_two_directories_is_two_models(tmp_path: Path, sleepers: list) -> None:
    # GIVEN two servers started with `--model-path model`, each in its own working directory
    a, b = _model(tmp_path / "a", 2), _model(tmp_path / "b", 2)
    for cwd in (a, b):
        sleepers.append(subprocess.Popen(["sleep", "30"], cwd=cwd))
    key_a, key_b = (model_identity("model", proc.pid) for proc in sleepers)
    # THEN each is the path that server resolves, with its config's hash
    assert key_a.startswith(f"{a}/model#cfg:") and key_b.startswith(f"{b}/model#cfg:") and key_a != key_b
    assert model_identity(str(a / "model"), sleepers[0].pid) == key_a  # absolute or relative: one setup


def test_a_checkpoint_swapped_under_the_same_path_is_another_setup(tmp_path: Path, sleepers: list) -> None:
    root = _model(tmp_path, 2)
    sleepers.append(subprocess.Popen(["sleep", "30"], cwd=root))
    before = model_identity("model", sleepers[0].pid)
    (root / "model" / "config.json").write_text(json.dumps({"num_hidden_layers": 4}))
    assert model_identity("model", sleepers[0].pid) != before


def test_a_hub_id_is_its_own_identity_and_no_pid_keeps_the_text(tmp_path: Path, sleepers: list) -> None:
    sleepers.append(subprocess.Popen(["sleep", "30"], cwd=tmp_path))
    assert model_identity("Qwen/Qwen3-8B", sleepers[0].pid) == "Qwen/Qwen3-8B"
    assert model_identity("./missing", sleepers[0].pid) == f"{tmp_path}/missing"
    assert model_identity("model", None) == "model"
