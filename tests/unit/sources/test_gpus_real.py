"""read_gpus against the real NVML (skipped where NVML does not initialise, e.g. CI without GPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from hangwatch.bundle.write import gpus_json
from hangwatch.errors import SourceUnavailable
from hangwatch.sources.gpus import Nvml, read_gpus, record_gpus


def _nvml_works() -> bool:
    try:
        Nvml().handles()
    except SourceUnavailable:
        return False
    return True


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _nvml_works(), reason="NVML does not initialise here")]


def test_every_gpu_has_its_fields() -> None:
    gpus = read_gpus()
    assert gpus
    for gpu in gpus:
        assert gpu.name and gpu.name.startswith("NVIDIA")
        assert gpu.uuid and gpu.uuid.startswith("GPU-")
        assert gpu.compute_capability and gpu.compute_capability.count(".") == 1
        assert gpu.memory_total_mib and gpu.memory_total_mib > 1000
        assert gpu.memory_used_mib is not None and 0 <= gpu.memory_used_mib <= gpu.memory_total_mib
        assert gpu.utilization_pct is not None and 0 <= gpu.utilization_pct <= 100


def test_a_sample_is_cheap_after_init() -> None:
    nvml = Nvml()
    nvml.read()
    started = time.perf_counter()
    for _ in range(20):
        nvml.read()
    assert (time.perf_counter() - started) / 20 < 0.05


def test_a_process_holding_gpu_memory_is_listed(tmp_path) -> None:
    # a child that allocates device memory through the CUDA driver API (libcuda), no torch needed
    code = (
        "import ctypes, sys, time\n"
        "cuda = ctypes.CDLL('libcuda.so.1')\n"
        "assert cuda.cuInit(0) == 0\n"
        "dev = ctypes.c_int(); assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0\n"
        "ctx = ctypes.c_void_p(); assert cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev) == 0\n"
        "ptr = ctypes.c_uint64(); assert cuda.cuMemAlloc_v2(ctypes.byref(ptr), 1 << 30) == 0\n"
        "print('ready', flush=True); time.sleep(30)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            procs = {p.pid: p for p in read_gpus()[0].processes}
            if child.pid in procs:
                break
            time.sleep(0.2)
        used = procs[child.pid].used_mib
        # without the host pid namespace NVML may not report per-process memory: None is allowed
        assert used is None or used >= 1024
    finally:
        child.kill()
        child.wait(timeout=10)


def test_record_writes_the_bundle_shape(tmp_path) -> None:
    samples = record_gpus(Nvml(), 2, 0.05)
    doc = json.loads(json.dumps(gpus_json(samples)))
    assert [s["t"] for s in doc["samples"]][0] == 0
    assert set(doc["samples"][0]["gpus"][0]) == {
        "index", "name", "uuid", "compute_capability", "memory_used_mib", "memory_total_mib", "utilization_pct", "processes"}
    out = os.environ.get("HANGWATCH_RECORD_GPUS")
    if out:  # how tests/data/gpus/*.json was recorded
        with open(out, "w") as fh:
            json.dump(gpus_json(record_gpus(Nvml(), 3, 0.5)), fh, indent=1)
