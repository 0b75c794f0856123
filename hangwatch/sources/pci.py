"""PCI facts for peer-to-peer between GPUs: IOMMU translation and ACS redirect above each GPU.

    read_pci(sys_root) -> PciFacts          NVIDIA GPUs' addresses, IOMMU mode, bridges with ACS redirect

sysfs is read only; the config space past 64 bytes (where ACS lives) is readable by root only, so
without root `acs_redirect_bridges` is None ("not readable") rather than a guess.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hangwatch.parse.hostinfo import acs_redirect, iommu_mode

__all__ = ["PciFacts", "read_pci"]

_NVIDIA = "0x10de"
_DISPLAY_CLASSES = ("0x0300", "0x0302")  # VGA and 3D controllers


@dataclass(frozen=True)
class PciFacts:
    gpus: tuple[str, ...]  # PCI addresses of NVIDIA GPUs
    iommu: str | None  # off / passthrough / translated; None without GPUs
    acs_redirect_bridges: tuple[str, ...] | None  # None: config space not readable
    why_unreadable: str | None = None


def _text(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _gpus(devices: str) -> list[str]:
    found = []
    for name in sorted(os.listdir(devices)):
        folder = os.path.join(devices, name)
        if _text(f"{folder}/vendor") == _NVIDIA and _text(f"{folder}/class").startswith(_DISPLAY_CLASSES):
            found.append(name)
    return found


def _bridges(devices: str, gpu: str) -> list[str]:
    """The PCI devices between the root complex and the GPU: the path components of its sysfs link."""
    real = os.path.realpath(os.path.join(devices, gpu))
    parts = real.split(os.sep)
    return [p for p in parts if p.count(":") == 2 and "." in p and p != gpu]


def read_pci(sys_root: str = "/sys") -> PciFacts:
    devices = f"{sys_root}/bus/pci/devices"
    if not os.path.isdir(devices):
        return PciFacts((), None, None, f"{devices} not readable")
    gpus = _gpus(devices)
    if not gpus:
        return PciFacts((), None, None, "no NVIDIA GPU on the PCI bus")
    groups = os.path.isdir(f"{sys_root}/kernel/iommu_groups") and bool(os.listdir(f"{sys_root}/kernel/iommu_groups"))
    group_type = _text(f"{devices}/{gpus[0]}/iommu_group/type") or None
    mode = iommu_mode(_text("/proc/cmdline"), group_type, groups)
    redirect, why = _acs(devices, gpus)
    return PciFacts(tuple(gpus), mode, redirect, why)


def _acs(devices: str, gpus: list[str]) -> tuple[tuple[str, ...] | None, str | None]:
    bridges = sorted({b for gpu in gpus for b in _bridges(devices, gpu)})
    redirecting = []
    for bridge in bridges:
        try:
            with open(f"{devices}/{bridge}/config", "rb") as fh:
                config = fh.read(4096)
        except OSError as exc:
            return None, f"cannot read {bridge}'s PCI config: {exc.strerror}"
        state = acs_redirect(config)
        if state is None:
            return None, "the PCI extended config space is readable by root only"
        if state:
            redirecting.append(bridge)
    return tuple(redirecting), None
