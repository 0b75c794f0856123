"""Host facts for the preflight, as plain data, and the pure parsers of the kernel files they come from.

    parse_mountinfo(text) -> [Mount]          /proc/self/mountinfo
    filesystem_of(path, mounts) -> Mount      the mount a path lives on (longest mount point)
    parse_cpu_max(text) -> cores | None       cgroup v2 cpu.max ("200000 100000" -> 2.0)
    parse_limit_bytes(text) -> bytes | None   cgroup memory.max / memory.limit_in_bytes
    parse_proc_locks(text) -> {(dev, inode)}  /proc/locks: files someone holds a lock on
    acs_redirect(config) -> bool | None       a PCIe config space: ACS P2P redirect enabled?
    iommu_mode(kernel_cmdline, group_type)    "off" / "passthrough" / "translated" / None

`HostSnapshot` is what `sources.host.gather()` read; `classify.hostfacts` turns it, with the launch
command, into the named facts the preflight rules compare. Nothing here touches the machine.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hangwatch.model import GpuInfo, ListeningSocket

__all__ = [
    "NETWORK_FS", "GpuLink", "HostSnapshot", "LockFile", "Mount", "PathProbe", "ProbePlan",
    "acs_redirect", "filesystem_of", "iommu_mode", "parse_cpu_max", "parse_limit_bytes",
    "parse_mountinfo", "parse_proc_locks",
]  # fmt: skip

# Filesystems whose reads go over the network (or through a userspace daemon that may): a weight
# load or a file lock there can stall for minutes or forever when the server or link hangs.
NETWORK_FS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "lustre", "gpfs", "ceph", "glusterfs", "beegfs",
    "ocfs2", "afs", "virtiofs", "fuse.sshfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.goofys", "fuse.rclone",
    "fuse.juicefs", "fuse.mountpoint-s3", "fuse.blobfuse2", "fuse.alluxio-fuse", "fuse.geesefs",
})  # fmt: skip


@dataclass(frozen=True)
class Mount:
    mount_point: str
    fstype: str
    source: str = ""

    @property
    def network(self) -> bool:
        return self.fstype in NETWORK_FS or (self.fstype.startswith("fuse.") and self.fstype != "fuse.lxcfs")


@dataclass(frozen=True)
class PathProbe:
    """What `stat` (never `open`: a FIFO or a hung mount would block) said about one path."""

    path: str
    role: str  # "weights" / "cache"
    exists: bool = False
    kind: str | None = None  # "file", "dir", "fifo", "socket", "char", "block"
    hung: bool = False  # stat did not return within the probe's timeout
    fifos: tuple[str, ...] = ()  # FIFOs among the weight files of a directory
    size_bytes: int | None = None  # weight files' total size
    error: str | None = None


@dataclass(frozen=True)
class LockFile:
    path: str
    pid: int | None = None  # the pid written in it (SoftFileLock, FileBaton-style writers)
    pid_alive: bool | None = None
    held: bool = False  # a kernel lock on it (/proc/locks) or a process has it open
    existence_lock: bool = False  # the file's existence is the lock (torch FileBaton `lock`)

    @property
    def stale(self) -> bool:
        """Nothing holds it and its writer is gone (or it is a build baton no build holds)."""
        return not self.held and (self.pid_alive is False or (self.existence_lock and self.pid is None))


@dataclass(frozen=True)
class GpuLink:
    """NVML facts beyond a `GpuInfo` sample: links and the PCI path."""

    index: int
    nvlinks_active: int | None = None
    pci_bus_id: str | None = None  # "0000:19:00.0"


@dataclass(frozen=True)
class ProbePlan:
    """What to look at, worked out from the launch command (classify.hostfacts.probe_plan)."""

    weights: tuple[str, ...] = ()  # candidate model folders, the first that exists is probed
    caches: tuple[str, ...] = ()  # JIT / hub cache directories
    hostnames: tuple[str, ...] = ()  # to resolve (--dist-init-addr's host)


@dataclass(frozen=True)
class HostSnapshot:
    """Everything the preflight read from the host; None / absent: not readable (see `unknown`)."""

    listening: tuple[ListeningSocket, ...] | None = None
    shm_bytes: int | None = None
    shm_fstype: str | None = None
    cpus_affinity: int | None = None  # CPUs this process may run on
    cpu_quota: float | None = None  # cgroup CPU limit in cores; None: no limit (or unreadable)
    memory_limit_bytes: int | None = None
    mounts: tuple[Mount, ...] | None = None
    paths: tuple[PathProbe, ...] = ()
    locks: tuple[LockFile, ...] | None = None
    iommu: str | None = None  # off / passthrough / translated
    acs_redirect_bridges: tuple[str, ...] | None = None  # PCI bridges above a GPU with ACS redirect on
    gpus: tuple[GpuInfo, ...] | None = None
    process_names: Mapping[int, str] = field(default_factory=dict)  # pid -> name, for GPU holders
    links: tuple[GpuLink, ...] = ()
    p2p: Mapping[str, str] = field(default_factory=dict)  # "0-1" -> "ok" / "not_supported" / ...
    packages: Mapping[str, str] | None = None  # distribution -> version, in the launch's interpreter
    cuda_toolkit: str | None = None  # nvcc's CUDA version ("12.8") where a toolkit is found
    resolved: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # host name -> addresses
    local_addresses: tuple[str, ...] = ()
    unknown: Mapping[str, str] = field(default_factory=dict)  # what could not be read -> why


# ---------------------------------------------------------------- mounts


def _unescape(text: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (\\040)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def parse_mountinfo(text: str) -> list[Mount]:
    """`36 35 98:0 /mnt1 /mnt/parent rw - nfs4 server:/export rw` -> Mount("/mnt/parent", "nfs4", ...)."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or not tail:
            continue
        mounts.append(Mount(_unescape(fields[4]), tail[0], _unescape(tail[1]) if len(tail) > 1 else ""))
    return mounts


def filesystem_of(path: str, mounts: Iterable[Mount]) -> Mount | None:
    """The mount holding `path` (absolute, normalised): the last-mounted longest matching mount point."""
    path = os.path.normpath(path)
    best: Mount | None = None
    for mount in mounts:
        point = mount.mount_point.rstrip("/") or "/"
        inside = path == point or path.startswith(point + "/") or point == "/"
        if inside and (best is None or len(point) >= len(best.mount_point.rstrip("/") or "/")):
            best = mount
    return best


# ---------------------------------------------------------------- cgroups


def parse_cpu_max(text: str) -> float | None:
    """cgroup v2 `cpu.max`: "max 100000" -> None (no limit); "150000 100000" -> 1.5 cores."""
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def parse_cfs_quota(quota_text: str, period_text: str) -> float | None:
    """cgroup v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us` ("-1": no limit)."""
    try:
        quota, period = int(quota_text.strip()), int(period_text.strip())
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


# v1 prints "no limit" as a page-rounded LONG_MAX; anything this large is no limit
_NO_LIMIT = 1 << 60


def parse_limit_bytes(text: str) -> int | None:
    """`memory.max` ("max" or bytes) / `memory.limit_in_bytes`; None when unlimited."""
    value = text.strip()
    if not value.isdigit():
        return None
    number = int(value)
    return None if number >= _NO_LIMIT else number


# ---------------------------------------------------------------- locks


def parse_proc_locks(text: str) -> set[tuple[str, int]]:
    """`1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF` -> {("08:01", 5678)}: locked (device, inode).

    The device is printed as hex major:minor; blocked waiters (`->` lines) are locks too.
    """
    held = set()
    for line in text.splitlines():
        for token in line.split():
            parts = token.split(":")
            if len(parts) == 3 and all(re.fullmatch(r"[0-9a-fA-F]+", p) for p in parts[:2]) and parts[2].isdigit():
                held.add((f"{int(parts[0], 16):02x}:{int(parts[1], 16):02x}", int(parts[2])))
                break
    return held


def device_key(st_dev: int) -> str:
    """The (major:minor) spelling /proc/locks uses for a stat's st_dev."""
    return f"{os.major(st_dev):02x}:{os.minor(st_dev):02x}"


# ---------------------------------------------------------------- PCI


_EXTENDED_START = 0x100
_ACS_ID = 0x000D
_ACS_REDIRECT = 0b1100  # ACS control: P2P Request Redirect (bit 2), P2P Completion Redirect (bit 3)


def acs_redirect(config: bytes) -> bool | None:
    """Whether a device's ACS capability redirects peer-to-peer requests or completions upstream.

    `config` is the device's PCI config space (/sys/bus/pci/devices/X/config; only root reads past
    the first 64 bytes). None when the extended space is not there; False when there is no ACS.
    """
    if len(config) < _EXTENDED_START + 4:
        return None
    offset, seen = _EXTENDED_START, set()
    while offset and offset + 8 <= len(config) and offset not in seen:
        seen.add(offset)
        header = int.from_bytes(config[offset : offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return False
        if header & 0xFFFF == _ACS_ID:
            control = int.from_bytes(config[offset + 6 : offset + 8], "little")
            return bool(control & _ACS_REDIRECT)
        offset = (header >> 20) & 0xFFC
    return False


def iommu_mode(kernel_cmdline: str, group_type: str | None, groups_present: bool) -> str:
    """How DMA from a GPU is translated: "off", "passthrough" (identity) or "translated".

    The GPU's IOMMU group type says it directly ("identity" / "DMA" / "DMA-FQ"); without it, the
    kernel command line and whether any IOMMU group exists decide.
    """
    if group_type:
        return "passthrough" if group_type.strip() == "identity" else "translated"
    if not groups_present:
        return "off"
    args = set(kernel_cmdline.split())
    return "passthrough" if {"iommu=pt", "iommu.passthrough=1"} & args else "translated"


def snapshot_dict(snapshot: HostSnapshot) -> dict[str, Any]:
    """A JSON-able view of a snapshot (recordings and `--json` debugging)."""
    from dataclasses import asdict

    return asdict(snapshot)
