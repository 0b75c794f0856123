"""NVML facts the preflight needs beyond a sample: NVLink state, PCI address, P2P support.

    read_topology(lib=None) -> (gpus, links, p2p)   lib: pynvml, or a recording (RecordedTopology)
    RecordedTopology(doc)                           a recorded host (`python -m hangwatch.sources.gputopo`)

A recording holds NVML's answers (and the PCI facts of sources/pci.py) as JSON; tests replay it
where there is no GPU. It is a recording of a machine, not NVML.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from hangwatch.errors import run_entry_point
from hangwatch.model import GpuInfo, GpuProcess
from hangwatch.parse.hostinfo import GpuLink
from hangwatch.sources.gpus import Nvml

__all__ = ["RecordedTopology", "read_topology", "record"]

_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS
_P2P_OK = 0  # NVML_P2P_STATUS_OK
_P2P_STATUS = {0: "ok", 1: "chipset_not_supported", 2: "gpu_not_supported", 3: "iohub_topology_not_supported",
               4: "disabled_by_regkey", 5: "not_supported", 6: "unknown"}  # fmt: skip


def read_topology(lib: Any = None) -> tuple[tuple[GpuInfo, ...], tuple[GpuLink, ...], dict[str, str]]:
    """Every GPU, its active NVLinks and PCI address, and P2P read support between each pair."""
    if isinstance(lib, RecordedTopology):
        return lib.gpus, lib.links, dict(lib.p2p)
    nvml = Nvml(lib)
    gpus = nvml.read()  # raises SourceUnavailable without NVML
    handles = nvml.handles()
    links = tuple(GpuLink(i, _nvlinks(nvml, h), _bus_id(nvml, h)) for i, h in enumerate(handles))
    return gpus, links, _p2p(nvml, handles)


def _nvlinks(nvml: Nvml, handle: Any) -> int | None:
    if handle is None:
        return None
    active, answered = 0, False
    for link in range(_MAX_LINKS):
        state, error = nvml.try_field(nvml.lib.nvmlDeviceGetNvLinkState, handle, link)
        if error is not None:
            break  # past the last link, or NVLink not supported at all
        answered = True
        active += int(bool(state))
    return active if answered else 0


def _bus_id(nvml: Nvml, handle: Any) -> str | None:
    info = nvml.field(nvml.lib.nvmlDeviceGetPciInfo, handle) if handle is not None else None
    if info is None:
        return None
    bus = info.busId.decode() if isinstance(info.busId, bytes) else str(info.busId)
    return bus.lower()[-12:] if len(bus) > 12 else bus.lower()


def _p2p(nvml: Nvml, handles: list[Any]) -> dict[str, str]:
    index = getattr(nvml.lib, "NVML_P2P_CAPS_INDEX_READ", 0)
    index = index[0] if isinstance(index, tuple) else index  # pynvml defines it as (0,)
    out = {}
    for i, a in enumerate(handles):
        for j in range(i + 1, len(handles)):
            status = nvml.field(nvml.lib.nvmlDeviceGetP2PStatus, a, handles[j], index) if a is not None else None
            out[f"{i}-{j}"] = "unknown" if status is None else _P2P_STATUS.get(int(status), str(status))
    return out


class RecordedTopology:
    """A recorded machine's GPUs, links, P2P and PCI facts (JSON), replayed instead of NVML and sysfs."""

    def __init__(self, doc: Mapping[str, Any]):
        self.doc = doc
        self.gpus = tuple(_gpu(g) for g in doc.get("gpus") or ())
        self.links = tuple(GpuLink(int(link["index"]), link.get("nvlinks_active"), link.get("pci_bus_id"))
                           for link in doc.get("links") or ())  # fmt: skip
        self.p2p: Mapping[str, str] = dict(doc.get("p2p") or {})
        pci = doc.get("pci") or {}
        self.iommu: str | None = pci.get("iommu")
        bridges = pci.get("acs_redirect_bridges")
        self.acs_redirect_bridges = None if bridges is None else tuple(bridges)
        self.why_unreadable: str | None = pci.get("why_unreadable")
        self.name: str = str(doc.get("recording", "a recording"))


def _gpu(raw: Mapping[str, Any]) -> GpuInfo:
    procs = tuple(GpuProcess(int(p["pid"]), p.get("used_mib")) for p in raw.get("processes") or ())
    fields = {k: raw.get(k) for k in ("name", "uuid", "compute_capability", "memory_used_mib",
                                      "memory_total_mib", "utilization_pct")}  # fmt: skip
    return GpuInfo(index=int(raw["index"]), processes=procs, **fields)


def record(note: str) -> dict[str, Any]:
    """This machine's topology as a recording document (run on a GPU machine)."""
    from hangwatch.sources.pci import read_pci

    gpus, links, p2p = read_topology()
    pci = read_pci()
    return {
        "recording": note,
        "gpus": [{**asdict(g), "processes": [asdict(p) for p in g.processes]} for g in gpus],
        "links": [asdict(link) for link in links],
        "p2p": p2p,
        "pci": {"iommu": pci.iommu, "acs_redirect_bridges": None if pci.acs_redirect_bridges is None
                else list(pci.acs_redirect_bridges), "why_unreadable": pci.why_unreadable, "gpus": list(pci.gpus)},
    }  # fmt: skip


def main() -> None:
    """`python -m hangwatch.sources.gputopo NOTE > topology.json`: record on a GPU machine."""
    json.dump(record(" ".join(sys.argv[1:]) or "recorded with python -m hangwatch.sources.gputopo"), sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    run_entry_point(main)
