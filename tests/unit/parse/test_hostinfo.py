"""Pure parsers of the preflight's host files: mountinfo, cgroup limits, /proc/locks, PCI ACS."""

from __future__ import annotations

import os
import struct

from hangwatch.parse.hostinfo import (
    Mount,
    acs_redirect,
    device_key,
    filesystem_of,
    iommu_mode,
    parse_cfs_quota,
    parse_cpu_max,
    parse_limit_bytes,
    parse_mountinfo,
    parse_proc_locks,
)

MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:26 / /dev/shm rw,nosuid,nodev - tmpfs shm rw,size=65536k
41 22 0:40 / /models rw,relatime - nfs4 fs1:/export/models rw,vers=4.2
42 41 0:41 / /models/local\\040copy rw - ext4 /dev/nvme0n1 rw
43 22 0:42 / /cache rw - fuse.gcsfuse bucket rw
"""


def test_mountinfo_longest_mount_point_wins() -> None:
    mounts = parse_mountinfo(MOUNTINFO)

    def fs(path: str) -> Mount:
        found = filesystem_of(path, mounts)
        assert found is not None
        return found

    assert [m.fstype for m in mounts] == ["ext4", "tmpfs", "nfs4", "ext4", "fuse.gcsfuse"]
    assert fs("/models/llama/model.safetensors").fstype == "nfs4"
    assert fs("/models/local copy/x").fstype == "ext4"  # \040 is a space
    assert fs("/modelsX/y").mount_point == "/"
    assert fs("/models").network
    assert fs("/cache/flashinfer").network
    assert not fs("/dev/shm").network


def test_cgroup_cpu_and_memory_limits() -> None:
    assert parse_cpu_max("max 100000\n") is None
    assert parse_cpu_max("200000 100000\n") == 2.0
    assert parse_cfs_quota("-1", "100000") is None
    assert parse_cfs_quota("50000\n", "100000\n") == 0.5
    assert parse_limit_bytes("max\n") is None
    assert parse_limit_bytes("8589934592\n") == 8 << 30
    assert parse_limit_bytes("9223372036854771712") is None  # v1's "no limit"


def test_proc_locks_gives_device_and_inode() -> None:
    text = "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF\n2: POSIX  ADVISORY  WRITE 99 00:2a:77 0 EOF\n2: -> POSIX  ADVISORY  WRITE 100 00:2a:77 0 EOF\n"
    assert parse_proc_locks(text) == {("08:01", 5678), ("00:2a", 77)}
    st = os.stat("/")
    assert device_key(st.st_dev).count(":") == 1


def _config(acs_control: int | None) -> bytes:
    space = bytearray(4096)
    # extended capability list at 0x100: AER (id 1) -> next 0x140: ACS (id 0xD)
    struct.pack_into("<I", space, 0x100, 0x0001 | (1 << 16) | (0x140 << 20))
    if acs_control is not None:
        struct.pack_into("<IHH", space, 0x140, 0x000D | (1 << 16), 0x007F, acs_control)
    return bytes(space)


def test_acs_redirect_reads_the_control_register() -> None:
    assert acs_redirect(_config(0b0000_1101)) is True  # SrcValid + ReqRedir + CmpltRedir
    assert acs_redirect(_config(0b0000_0001)) is False  # SrcValid only
    assert acs_redirect(_config(None)) is False  # no ACS capability
    assert acs_redirect(bytes(64)) is None  # non-root: only the first 64 bytes


def test_iommu_mode() -> None:
    assert iommu_mode("quiet", "identity", True) == "passthrough"
    assert iommu_mode("quiet", "DMA-FQ", True) == "translated"
    assert iommu_mode("quiet", None, False) == "off"
    assert iommu_mode("intel_iommu=on iommu=pt", None, True) == "passthrough"
