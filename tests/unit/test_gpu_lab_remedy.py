"""The GPU lab's graph-capture launch is changed by `run --remedy` exactly as an SGLang launch is, and
the lab acts on the change: the flag the remedy data adds for `cuda_graph_capture` is the one that
turns the lab's capture off (lab/gpu/engine/sglang/launch_server.py -> lab/gpu/run.py ->
lab_scheduler.RankOptions). If remedies.yaml changes SGLang's flag, or the lab stops taking it, this
fails — so the device figures in docs/gpu.md ("run --remedy on one H200") stay about the same change.

No torch needed: the lab's argument handling only (the hang itself: test_gpu_lab_cpu.py, -m lab).
"""

from __future__ import annotations

import importlib.util
import json
import shlex
from pathlib import Path
from types import ModuleType

from hangwatch.model import Fact, State, Verdict
from hangwatch.sources.discover import launcher_engine
from hangwatch.watch.relaunch import Plan, plan_relaunch, protected_flags
from hangwatch.watch.remedies import shipped_remedies
from helpers.paths import ROOT
from helpers.recorded_host import RecordedHost

GPU_LAB = ROOT / "lab" / "gpu"
FIXTURE = ROOT / "tests" / "fixtures" / "gpu" / "remedy-graph-capture-1gpu"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LAUNCH = _load("gpu_lab_launch_server", GPU_LAB / "engine" / "sglang" / "launch_server.py")
RUN = _load("gpu_lab_run", GPU_LAB / "run.py")


def launch(*extra: str) -> list[str]:
    """The launch device_run.py --remedy gives `hangwatch run`."""
    return ["python3", str(GPU_LAB / "engine" / "sglang" / "launch_server.py"), "--lab-scenario", "graph-capture",
            "--model-path", "lab/gpu-tiny", "--tp-size", "2", "--host", "127.0.0.1", "--port", "30100",
            "--nccl-port", "29700", "--onset-file", "/tmp/onset", *extra]


def lab_args(argv: list[str]):  # the lab's own view of a launch: what the ranks and the launcher act on
    return RUN.parse_args(LAUNCH.run_argv(argv[2:]))


def stalled_in_capture() -> Verdict:
    return Verdict(State.STALLED, "cuda_graph_capture", 0.72,
                   evidence=(Fact("TP0: capture_one_batch_size (lab_scheduler.py:202)", "stacks/TP0.json"),))


def test_hangwatch_reads_the_lab_launch_as_an_sglang_launcher() -> None:
    assert launcher_engine(shlex.join(launch())) == "sglang"


def test_the_remedys_change_is_the_flag_that_turns_the_labs_capture_off() -> None:
    argv = launch()
    found = plan_relaunch(stalled_in_capture(), launcher_engine(shlex.join(argv)), argv, {}, shipped_remedies(),
                          RecordedHost())
    assert isinstance(found, Plan) and found.change.id == "sglang-disable-cuda-graph"
    assert protected_flags(found.argv) == protected_flags(argv)  # model, TP, host, serving port kept
    before, after = lab_args(argv), lab_args(list(found.argv))
    assert (before.scenario, before.disable_cuda_graph) == ("graph-capture", False)  # captures: the real hang
    assert after.disable_cuda_graph is True
    # everything else the lab acts on is the same launch
    assert {k: v for k, v in vars(after).items() if k != "disable_cuda_graph"} == \
           {k: v for k, v in vars(before).items() if k != "disable_cuda_graph"}


def test_sglangs_flag_spellings_reach_the_lab_where_sglang_uses_them() -> None:
    args = lab_args(launch())
    # --port is the serving (HTTP) port, --nccl-port the TCPStore's, as in SGLang
    assert (args.http_port, args.http_host, args.port) == (30100, "127.0.0.1", 29700)
    assert (args.tp_size, args.model_path, args.log, args.onset_file) == (2, "lab/gpu-tiny", "-", "/tmp/onset")


def test_the_recorded_device_relaunches_are_todays_plan() -> None:
    """Each run of the H200 fixture whose first verdict was the capture hang was relaunched with
    exactly the argv today's planner makes from that verdict."""
    runs = sorted(FIXTURE.glob("run*/"))
    assert len(runs) >= 3
    checked = 0
    for path in runs:
        lines = [json.loads(x) for x in (path / "verdicts.jsonl").read_text().splitlines() if x.strip()]
        stalled = next(x for x in lines if x.get("state") == "stalled")
        relaunch = next(x["relaunch"] for x in lines if "relaunch" in x)
        if stalled["cause"] != "cuda_graph_capture":
            continue  # run4: another cause came first (docs/gpu.md says which and why)
        before = json.loads((path / "result.json").read_text())["argv"]  # the launch as device_run gave it
        verdict = Verdict(State.STALLED, stalled["cause"], stalled["confidence"],
                          evidence=tuple(Fact(e["text"], e["source"]) for e in stalled["evidence"]))
        found = plan_relaunch(verdict, "sglang", before, {}, shipped_remedies(), RecordedHost())
        assert isinstance(found, Plan) and list(found.argv) == relaunch["argv"], path
        assert lines[-1]["state"] == "ready" and "--disable-cuda-graph" in lines[-1]["remedy"]
        assert lab_args(before).disable_cuda_graph is False and lab_args(relaunch["argv"]).disable_cuda_graph is True
        checked += 1
    assert checked >= 3
