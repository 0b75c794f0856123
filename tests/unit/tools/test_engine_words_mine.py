"""tools/engine_words/mine.py: the generator of the engine words index (docs/engine-words.md).

Same inputs give the same bytes; the templates it writes are the ones the package matches with."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from hangwatch.parse.engine_words import INDEX_FILE, EngineWords, template_regex

ROOT = Path(__file__).resolve().parents[3]
MINE = ROOT / "tools" / "engine_words" / "mine.py"

ENGINE_V1 = '''
import logging
logger = logging.getLogger(__name__)
GiB = 1 << 30


class Worker:
    def request_memory(self, free, wanted, util):
        if free < wanted:
            raise ValueError(
                f"Free memory on device ({free / GiB:.2f}/{wanted / GiB:.2f} GiB) on startup is less "
                f"than desired GPU memory utilization ({util}, {wanted / GiB:.2f} GiB)."
            )
        logger.info("Available KV cache memory: %.2f GiB", free / GiB)


def bind(port):
    msg = "Port %d is already in use" % port
    raise OSError(msg)


def check(max_len, blocks):
    assert blocks > 0, "No available memory for the cache blocks. Try increasing `gpu_memory_utilization`."
    raise ValueError("max_model_len ({}) is larger than the KV cache holds ({} tokens)".format(max_len, blocks))


def grow(frac):
    msg = "Not enough memory. Please try to increase it."
    msg += f" Current: {frac}"
    raise ValueError(msg)


def wrapped(length):
    msg = f"User-specified max_model_len ({length}) is greater than the derived one."
    raise ValueError(f"{msg} To allow overriding this maximum, set the env var.")


def branches(n):
    estimated = ""
    if n > 0:
        estimated = f"Based on the memory, {n} tokens fit. "
    raise ValueError(f"Not enough KV cache. {estimated}Try increasing the memory.")


def grows_in_a_branch(frac):
    msg = "Not enough memory for the pool."
    if frac is not None:
        msg += f" Current value: {frac}"
    raise RuntimeError(msg)


def ambiguous(flag):
    message = "first text of several words"
    if flag:
        message = "second text of several words"
    raise RuntimeError(message)
'''
ENGINE_V2 = ENGINE_V1.replace("Port %d is already in use", "Port %d is already taken by another process")


def _load_miner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("engine_words_mine", MINE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def mine() -> ModuleType:
    return _load_miner()


def _trees(tmp_path: Path) -> list[str]:
    specs = []
    for version, text in (("1.0", ENGINE_V1), ("1.1", ENGINE_V2)):
        pkg = tmp_path / version / "toyengine"
        (pkg / "worker").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "worker" / "utils.py").write_text(text)
        (pkg / "tests").mkdir()
        (pkg / "tests" / "test_x.py").write_text("raise ValueError('a test module is never mined, never')\n")
        specs.append(f"toyengine={version}={pkg}")
    return specs


def _build(mine: ModuleType, specs: list[str], out: Path) -> bytes:
    args = ["build", "--out", str(out)]
    for spec in specs:
        args += ["--tree", spec]
    assert mine.main(args) == 0
    return out.read_bytes()


def test_same_inputs_same_bytes(mine: ModuleType, tmp_path: Path) -> None:
    specs = _trees(tmp_path)
    first = _build(mine, specs, tmp_path / "a.json.gz")
    mine._SEEN.clear()
    second = _build(mine, specs, tmp_path / "b.json.gz")
    assert first == second
    assert gzip.decompress(first)  # a plain gzip stream, mtime 0
    assert first[4:8] == b"\0\0\0\0"


def test_sites_templates_and_version_ranges(mine: ModuleType, tmp_path: Path) -> None:
    doc = json.loads(gzip.decompress(_build(mine, _trees(tmp_path), tmp_path / "i.json.gz")))
    assert doc["versions"] == {"toyengine": ["1.0", "1.1"]}
    rows = {(r[2], r[4], r[5], r[6]): r[7] for r in doc["sites"]}
    fstring = ("Worker.request_memory", "raise", "ValueError",
               "Free memory on device ({float:free}/{float:wanted} GiB) on startup is less than desired GPU memory "
               "utilization ({float:util}, {float:wanted} GiB).")  # fmt: skip
    assert rows[fstring] == 0b11  # in both releases
    assert rows[("Worker.request_memory", "log", "info", "Available KV cache memory: {float:free} GiB")] == 0b11
    assert rows[("bind", "raise", "OSError", "Port {int:port} is already in use")] == 0b01  # 1.0 only
    assert rows[("bind", "raise", "OSError", "Port {int:port} is already taken by another process")] == 0b10
    assert ("check", "raise", "AssertionError",
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization`.") in rows  # fmt: skip
    assert ("check", "raise", "ValueError",
            "max_model_len ({float:max_len}) is larger than the KV cache holds ({float:blocks} tokens)") in rows  # fmt: skip
    # a name a block may change holds either text after it: a hole, not one branch's guess
    assert not any(key[3] in ("first text of several words", "second text of several words") for key in rows)
    assert ("branches", "raise", "ValueError", "Not enough KV cache. {any:estimated}Try increasing the memory.") in rows
    assert ("grows_in_a_branch", "raise", "RuntimeError", "Not enough memory for the pool.{any:more}") in rows
    assert ("wrapped", "raise", "ValueError", "User-specified max_model_len ({float:length}) is greater than the derived "
            "one. To allow overriding this maximum, set the env var.") in rows  # fmt: skip
    # msg += "...": the text so far, then the rest
    assert ("grow", "raise", "ValueError", "Not enough memory. Please try to increase it. Current: {any:frac}") in rows
    assert not any("test module" in key[3] for key in rows)
    assert all(r[1] == "toyengine/worker/utils.py" for r in doc["sites"])


def test_mined_templates_match_what_the_code_prints(mine: ModuleType, tmp_path: Path) -> None:
    index = EngineWords.from_bytes(_build(mine, _trees(tmp_path), tmp_path / "i.json.gz"))
    free, wanted, util = 10.5 * (1 << 30), 71.25 * (1 << 30), 0.9
    text = (f"Free memory on device ({free / (1 << 30):.2f}/{wanted / (1 << 30):.2f} GiB) on startup is less "
            f"than desired GPU memory utilization ({util}, {wanted / (1 << 30):.2f} GiB).")  # fmt: skip
    found = index.match(f"ValueError: {text}")
    assert found is not None and found.exact
    assert found.site.where == "toyengine/worker/utils.py:Worker.request_memory"
    assert dict(found.holes) == {"free": "10.50", "wanted": "71.25", "util": "0.9"}
    assert template_regex(found.site.template).search(text)


def test_a_pin_names_its_artifact_and_digest(mine: ModuleType) -> None:
    pins = mine.read_pins()
    assert {pin.name for pin in pins} >= {"sglang", "vllm", "torch"}
    assert all(len(pin.sha256) == 64 and pin.roots for pin in pins)
    assert len({(pin.name, pin.version) for pin in pins}) == len(pins)


# the venv, not what its python links to
LAB_SITE = Path(os.environ.get("HANGWATCH_LAB_PYTHON", "/nonexistent")).parent.parent
VLLM_SITE = Path(os.environ.get("HANGWATCH_VLLM_PYTHON", "/nonexistent")).parent.parent


SAMPLE_EVERY = 4


def _every_nth_module(package_dir: Path, out: Path, n: int) -> Path:
    """A tree of links to every `n`-th module of `package_dir` (sorted, so the same ones each run),
    at the same paths: the miner names each site by its module path."""
    for path in sorted(package_dir.rglob("*.py"))[::n]:
        link = out / package_dir.name / path.relative_to(package_dir)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(path)
    return out / package_dir.name


def _site_packages(venv: Path, package: str) -> Path | None:
    found = sorted(venv.glob(f"lib/python3*/site-packages/{package}"))
    return found[0] if found else None


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("HANGWATCH_LAB_PYTHON") or not os.environ.get("HANGWATCH_VLLM_PYTHON"),
    reason="needs the SGLang and vLLM labs: set HANGWATCH_LAB_PYTHON and HANGWATCH_VLLM_PYTHON",
)
@pytest.mark.parametrize(("package", "version", "venv"), [("sglang", "0.5.23", LAB_SITE), ("vllm", "0.32.0", VLLM_SITE)])
def test_the_installed_engine_is_in_the_shipped_index(mine: ModuleType, tmp_path: Path, package: str, version: str, venv: Path) -> None:
    # every SAMPLE_EVERY-th module of the installed tree, mined once: a whole engine twice cost CI
    # 150 s (that the miner gives the same bytes twice is test_same_inputs_same_bytes's)
    source = _site_packages(venv, package)
    assert source is not None, f"{package} is not installed in {venv}"
    first = _build(mine, [f"{package}={version}={_every_nth_module(source, tmp_path / 'sample', SAMPLE_EVERY)}"], tmp_path / "a.json.gz")
    mined = json.loads(gzip.decompress(first))["sites"]
    shipped = json.loads(gzip.decompress(INDEX_FILE.read_bytes()))
    bit = shipped["versions"][package].index(version)
    have = {tuple(r[:3] + r[4:7]) for r in shipped["sites"] if r[7] >> bit & 1}
    missing = [r for r in mined if tuple(r[:3] + r[4:7]) not in have]
    assert len(mined) > 1000
    assert not missing, f"{len(missing)} of {len(mined)} sites of the installed {package} are not in the index: {missing[:3]}"


SIZE_BUDGET = 2 * 1024 * 1024  # docs/engine-words.md


def test_the_shipped_index_fits_its_budget_and_holds_every_pinned_release(mine: ModuleType) -> None:
    data = INDEX_FILE.read_bytes()
    assert len(data) <= SIZE_BUDGET
    doc = json.loads(gzip.decompress(data))
    pinned = {(pin.name, pin.version) for pin in mine.read_pins()}
    shipped = {(package, version) for package, versions in doc["versions"].items() for version in versions}
    assert shipped == pinned
