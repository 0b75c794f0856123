"""GPU state through NVML (nvidia-ml-py, `import pynvml`); the only module that calls NVML.

    read_gpus() -> (GpuInfo, ...)              one sample of every GPU (sub-millisecond per tick)
    Nvml(lib)                                   nvmlInit once, keeps the handles; lib is pynvml or a
                                                RecordedNvml
    RecordedNvml(gpus_json)                     a simulation replaying a recorded gpus.json (CI has no GPU)
    record_gpus(nvml, n, interval)              record samples on a GPU machine (bundle.write.gpus_json writes them)

A field NVML refuses (NVMLError) is None; a lost GPU is a GpuInfo named "(GPU is lost)"; no
library or driver raises SourceUnavailable("gpus", ...).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from hangwatch.errors import SourceUnavailable, run_entry_point
from hangwatch.model import GpuInfo, GpuProcess, GpuSample

__all__ = ["LOST_NAME", "Nvml", "RecordedNvml", "read_gpus", "record_gpus"]

LOST_NAME = "(GPU is lost)"
_MIB = 2**20
_HINT = "run on a node with the NVIDIA driver; in containers use the NVIDIA container runtime"
_GPU_IS_LOST = 15  # NVML_ERROR_GPU_IS_LOST, also when the library object lacks the constant


class Nvml:
    """NVML through `lib` (pynvml, or anything with its function names): init once, handles kept."""

    def __init__(self, lib: Any = None):
        self.lib = lib if lib is not None else _import_pynvml()
        self._handles: list[Any] | None = None
        self._static: dict[int, dict[str, Any]] = {}  # name, uuid, capability, total: never change
        self._lock = threading.Lock()

    def handles(self) -> list[Any]:
        """One handle per GPU (None for a GPU lost before we got its handle); nvmlInit on first use."""
        with self._lock:
            if self._handles is None:
                self._handles = self._init()
            return self._handles

    def read(self) -> tuple[GpuInfo, ...]:
        return tuple(self._gpu(index, handle) for index, handle in enumerate(self.handles()))

    def shutdown(self) -> None:
        with self._lock:
            if self._handles is not None:
                self.field(self.lib.nvmlShutdown)
                self._handles = None

    def _init(self) -> list[Any]:
        try:
            self.lib.nvmlInit()
            count = self.lib.nvmlDeviceGetCount()
        except self.lib.NVMLError as exc:
            raise SourceUnavailable("gpus", f"NVML not available: {exc}", _HINT) from exc
        return [self.field(self.lib.nvmlDeviceGetHandleByIndex, index) for index in range(count)]

    def _gpu(self, index: int, handle: Any) -> GpuInfo:
        memory, error = self.try_field(self.lib.nvmlDeviceGetMemoryInfo, handle) if handle is not None else (None, None)
        if handle is None or error == getattr(self.lib, "NVML_ERROR_GPU_IS_LOST", _GPU_IS_LOST):
            return GpuInfo(index=index, name=LOST_NAME)  # fell off the bus (Xid 79): every call fails
        static = self._static_fields(index, handle)
        util = self.field(self.lib.nvmlDeviceGetUtilizationRates, handle)
        return GpuInfo(
            index=index,
            name=static["name"],
            uuid=static["uuid"],
            compute_capability=static["compute_capability"],
            memory_used_mib=None if memory is None else round(memory.used / _MIB, 1),
            memory_total_mib=None if memory is None else round(memory.total / _MIB, 1),
            utilization_pct=None if util is None else float(util.gpu),
            processes=self._processes(handle),
        )

    def _static_fields(self, index: int, handle: Any) -> dict[str, Any]:
        cached = self._static.get(index)
        if cached is not None:
            return cached
        capability = self.field(self.lib.nvmlDeviceGetCudaComputeCapability, handle)
        fields = {
            "name": _text(self.field(self.lib.nvmlDeviceGetName, handle)),
            "uuid": _text(self.field(self.lib.nvmlDeviceGetUUID, handle)),
            "compute_capability": None if capability is None else f"{capability[0]}.{capability[1]}",
        }
        if None not in fields.values():  # cache only a full answer; retry a refused field next tick
            self._static[index] = fields
        return fields

    def _processes(self, handle: Any) -> tuple[GpuProcess, ...]:
        procs = self.field(self.lib.nvmlDeviceGetComputeRunningProcesses, handle) or []
        return tuple(GpuProcess(pid=int(p.pid), used_mib=_mib(getattr(p, "usedGpuMemory", None))) for p in procs)

    def field(self, fn: Callable[..., Any], *args: Any) -> Any:
        """One NVML query's value, None when NVML refuses it (gputopo asks for links and P2P too)."""
        return self.try_field(fn, *args)[0]

    def try_field(self, fn: Callable[..., Any], *args: Any) -> tuple[Any, int | None]:
        """(value, None), or (None, NVML error code) when NVML refuses this one field."""
        try:
            return fn(*args), None
        except self.lib.NVMLError as exc:
            return None, getattr(exc, "value", -1)


def _import_pynvml() -> Any:
    try:
        import pynvml
    except ImportError as exc:
        raise SourceUnavailable("gpus", f"NVML not available: {exc}", "pip install nvidia-ml-py") from exc
    return pynvml


def _text(value: Any) -> str | None:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value  # old pynvml: bytes


def _mib(value: Any) -> float | None:
    # usedGpuMemory is None (NVML_VALUE_NOT_AVAILABLE) without per-process accounting, e.g. in
    # containers without the host pid namespace
    return None if value is None else round(value / _MIB, 1)


_default: Nvml | None = None
_default_lock = threading.Lock()


def read_gpus(nvml: Nvml | Any = None) -> tuple[GpuInfo, ...]:
    """Every GPU now. `nvml`: an Nvml, a pynvml-like library (RecordedNvml), or None for the
    process-wide Nvml over pynvml (NVML itself is process-wide, so it is initialised once)."""
    return _as_nvml(nvml).read()


def _as_nvml(nvml: Nvml | Any) -> Nvml:
    global _default
    if isinstance(nvml, Nvml):
        return nvml
    if nvml is not None:
        return Nvml(nvml)
    with _default_lock:
        if _default is None:
            _default = Nvml()
        return _default


# ---------------------------------------------------------------- recording and replay


def record_gpus(nvml: Nvml | Any, n: int, interval: float) -> list[GpuSample]:
    """`n` samples `interval` seconds apart, `t` counted from the first (run on a GPU machine)."""
    source = nvml if isinstance(nvml, Nvml) else Nvml(nvml)
    start = time.monotonic()
    samples = []
    for i in range(n):
        if i:
            time.sleep(interval)
        samples.append(GpuSample(t=round(time.monotonic() - start, 3), gpus=source.read()))
    return samples


class _ProcessInfo(SimpleNamespace):
    pid: int
    usedGpuMemory: int | None


class RecordedNvml:
    """A simulation of pynvml, replaying a recorded gpus.json — not a GPU, not NVML.

    It has the pynvml names `Nvml` calls, so CI exercises the NVML code path without a GPU.
    Handles are GPU indices. A query asked twice for the same GPU moves to the next sample (so
    each `Nvml.read()` sees the next one; the last repeats). A null field in the recording raises
    NVMLError(NOT_SUPPORTED); a GPU recorded with the name "(GPU is lost)" raises GPU_IS_LOST.
    """

    def __init__(self, recording: Mapping[str, Any], *, fail_init: int | None = None):
        import pynvml  # only for its error classes and codes; needs no driver

        self.NVMLError = pynvml.NVMLError
        self.NVML_ERROR_GPU_IS_LOST = pynvml.NVML_ERROR_GPU_IS_LOST
        self._not_supported = pynvml.NVML_ERROR_NOT_SUPPORTED
        self._samples = list(recording.get("samples") or [])
        self._fail_init = fail_init
        self._step = 0
        self._asked: set[tuple[str, int]] = set()
        self.init_calls = 0

    def nvmlInit(self) -> None:
        self.init_calls += 1
        if self._fail_init is not None:
            raise self.NVMLError(self._fail_init)

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return max((len(s.get("gpus", [])) for s in self._samples), default=0)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:
        return self._field(handle, "name")

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return self._field(handle, "uuid")

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        major, minor = str(self._field(handle, "compute_capability")).split(".")
        return int(major), int(minor)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        self._tick("memory", handle)
        used, total = self._field(handle, "memory_used_mib"), self._field(handle, "memory_total_mib")
        return SimpleNamespace(used=int(used * _MIB), total=int(total * _MIB), free=int((total - used) * _MIB))

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=self._field(handle, "utilization_pct"), memory=0)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[_ProcessInfo]:
        procs = self._gpu(handle).get("processes") or []
        return [_ProcessInfo(pid=p["pid"], usedGpuMemory=_bytes(p.get("used_mib"))) for p in procs]

    def _tick(self, query: str, handle: int) -> None:
        if (query, handle) in self._asked and self._step + 1 < len(self._samples):
            self._step += 1
            self._asked.clear()
        self._asked.add((query, handle))

    def _gpu(self, handle: int) -> Mapping[str, Any]:
        gpus = self._samples[self._step].get("gpus", []) if self._samples else []
        gpu = next((g for g in gpus if g.get("index", -1) == handle), None)
        if gpu is None or gpu.get("name") == LOST_NAME:
            raise self.NVMLError(self.NVML_ERROR_GPU_IS_LOST)
        return gpu

    def _field(self, handle: int, key: str) -> Any:
        value = self._gpu(handle).get(key)
        if value is None:
            raise self.NVMLError(self._not_supported)
        return value


def _bytes(mib: float | None) -> int | None:
    return None if mib is None else int(mib * _MIB)


def main(argv: Sequence[str] = sys.argv[1:]) -> None:
    """`python -m hangwatch.sources.gpus N INTERVAL > gpus.json`: record on a GPU machine."""
    n, interval = (int(argv[0]), float(argv[1])) if len(argv) == 2 else (5, 1.0)
    from hangwatch.bundle.write import gpus_json  # the one gpus.json writer

    json.dump(gpus_json(record_gpus(Nvml(), n, interval)), sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    run_entry_point(main)
