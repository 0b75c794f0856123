"""The NVML code path, replayed from real recordings by RecordedNvml (CI has no GPU)."""

from __future__ import annotations

import json

import pynvml
import pytest

from hangwatch.bundle.write import gpus_json
from hangwatch.errors import SourceUnavailable
from hangwatch.model import GpuInfo, GpuProcess, GpuSample
from hangwatch.sources.gpus import (
    LOST_NAME,
    Nvml,
    RecordedNvml,
    read_gpus,
    record_gpus,
)
from helpers.paths import DATA

GPUS = DATA / "gpus"


def recording(name: str) -> dict:
    return json.loads((GPUS / name).read_text())


def gpu(index: int = 0, **fields) -> dict:
    base = {"index": index, "name": "NVIDIA H200", "uuid": f"GPU-{index}", "compute_capability": "9.0",
            "memory_used_mib": 1000.0, "memory_total_mib": 143771.0, "utilization_pct": 0.0, "processes": []}
    return {**base, **fields}


def test_a_real_recording_reads_back_as_recorded() -> None:
    doc = recording("h200_alloc.json")
    (h200,) = read_gpus(RecordedNvml(doc))
    assert h200 == GpuInfo(
        index=0, name="NVIDIA H200", uuid="GPU-5fcc8910-ca2c-9d8b-444b-ad9d475b047e", compute_capability="9.0",
        memory_used_mib=3189.9, memory_total_mib=143771.0, utilization_pct=0.0,
        processes=(GpuProcess(pid=417, used_mib=2566.0),),
    )


@pytest.mark.parametrize("name", ["h200_alloc.json", "h200_idle.json"])
def test_record_and_gpus_json_round_trip_a_recording(name: str) -> None:
    doc = recording(name)
    samples = record_gpus(RecordedNvml(doc), len(doc["samples"]), 0)
    replayed = gpus_json(samples)
    assert [s["gpus"] for s in replayed["samples"]] == [s["gpus"] for s in doc["samples"]]


def test_each_read_steps_to_the_next_sample_then_stays_on_the_last() -> None:
    doc = {"samples": [{"t": t, "gpus": [gpu(memory_used_mib=m)]} for t, m in [(0, 100.0), (1, 200.0), (2, 300.0)]]}
    nvml = Nvml(RecordedNvml(doc))
    assert [nvml.read()[0].memory_used_mib for _ in range(4)] == [100.0, 200.0, 300.0, 300.0]


def test_nvml_is_initialised_once() -> None:
    lib = RecordedNvml({"samples": [{"t": 0, "gpus": [gpu()]}]})
    nvml = Nvml(lib)
    nvml.read(), nvml.read(), nvml.read()
    assert lib.init_calls == 1


def test_a_refused_field_is_none_and_the_rest_is_read() -> None:
    doc = {"samples": [{"t": 0, "gpus": [gpu(utilization_pct=None, uuid=None, processes=[{"pid": 9, "used_mib": None}])]}]}
    (info,) = read_gpus(RecordedNvml(doc))
    assert info.utilization_pct is None and info.uuid is None
    assert info.memory_used_mib == 1000.0 and info.name == "NVIDIA H200"
    assert info.processes == (GpuProcess(pid=9, used_mib=None),)  # usedGpuMemory None: no accounting


def test_a_lost_gpu_is_named_so_and_the_others_are_read() -> None:
    doc = {"samples": [{"t": 0, "gpus": [gpu(0), {"index": 1, "name": LOST_NAME}, gpu(2)]}]}
    infos = read_gpus(RecordedNvml(doc))
    assert [i.name for i in infos] == ["NVIDIA H200", LOST_NAME, "NVIDIA H200"]
    assert infos[1] == GpuInfo(index=1, name=LOST_NAME)


def test_a_gpu_lost_later_is_reported_lost_from_then_on() -> None:
    doc = {"samples": [{"t": 0, "gpus": [gpu(0)]}, {"t": 1, "gpus": [{"index": 0, "name": LOST_NAME}]}]}
    nvml = Nvml(RecordedNvml(doc))
    assert nvml.read()[0].name == "NVIDIA H200"
    assert nvml.read()[0] == GpuInfo(index=0, name=LOST_NAME)


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, pynvml.NVML_ERROR_DRIVER_NOT_LOADED])
def test_no_library_or_driver_is_source_unavailable(code: int) -> None:
    with pytest.raises(SourceUnavailable) as err:
        read_gpus(RecordedNvml({"samples": []}, fail_init=code))
    assert err.value.source == "gpus" and err.value.reason.startswith("NVML not available: ")
    assert "NVIDIA container runtime" in (err.value.hint or "")


def test_the_real_library_without_a_driver_is_source_unavailable() -> None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("NVML works here (see test_gpus_real.py)")
    with pytest.raises(SourceUnavailable, match="NVML not available"):
        read_gpus(Nvml())


def test_gpus_json_has_the_bundle_shape() -> None:
    sample = GpuSample(t=1.5, gpus=(GpuInfo(index=0, name="NVIDIA RTX PRO 6000", compute_capability="12.0",
                                             processes=(GpuProcess(7, 10.0),)),))
    assert gpus_json([sample]) == {"samples": [{"t": 1.5, "gpus": [{
        "index": 0, "name": "NVIDIA RTX PRO 6000", "uuid": None, "compute_capability": "12.0",
        "memory_used_mib": None, "memory_total_mib": None, "utilization_pct": None,
        "processes": [{"pid": 7, "used_mib": 10.0}]}]}]}
