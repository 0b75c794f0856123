"""Live evidence that a report pastes into its log, read back into the same model data.

A reporter pastes `nvidia-smi`, `nvidia-smi -L`, a test harness's device list, `dmesg` lines with
Xids, `ps`/`top` rows and `df /dev/shm` next to the server log. A monitor on the box would have read
the same facts from NVML, /proc and the kernel; these readers turn the pasted text into those
facts (`GpuInfo`, kernel lines, `ProcessRecord`, a size), so that one set of rules reads both.
Pure functions over text lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hangwatch.model import GpuInfo, ProcessRecord

__all__ = [
    "PastedProcess",
    "compute_capability",
    "gpus_in",
    "kernel_lines_in",
    "processes_in",
    "ranks_in",
    "shm_size_mib_in",
]

# GPU model -> compute capability (NVIDIA's CUDA GPUs table). Ordered: the first match wins, so
# specific names come before the families that contain them.
_CC: tuple[tuple[str, str], ...] = (
    (r"GB300|B300", "10.3"), (r"GB200|B200|B100", "10.0"), (r"GB10\b|DGX Spark", "12.1"),
    (r"RTX PRO \d+|RTX 50\d0|RTX 5090|RTX 5080|RTX 5070|RTX 5060|Blackwell", "12.0"),
    (r"GH200|H200|H100|H800|H20\b|H10\b", "9.0"),
    (r"L40S?|L4\b|L20\b|RTX 40\d0|RTX 4090|RTX 4080|RTX 4070|RTX 4060|RTX 6000 Ada|RTX [2-5]000 Ada|Ada", "8.9"),
    (r"A100|A800|A30\b", "8.0"),
    (r"A10G?\b|A16\b|A2\b|A40\b|A[2-6]000\b|RTX A\d+|RTX 30\d0|RTX 3090|RTX 3080|RTX 3070|RTX 3060", "8.6"),
    (r"AGX Orin|Jetson Orin", "8.7"),
    (r"T4\b|RTX 20\d0|TITAN RTX|Quadro RTX", "7.5"),
    (r"V100|TITAN V", "7.0"),
    (r"P100", "6.0"), (r"GTX 10\d0|P40\b|P4\b|TITAN Xp?|P6000", "6.1"),
)  # fmt: skip
_CC_RE = tuple((re.compile(rf"(?i){rx}"), cc) for rx, cc in _CC)


def compute_capability(name: str | None) -> str | None:
    """The compute capability of a GPU model name; None when the name is unknown."""
    if not name:
        return None
    for pattern, cc in _CC_RE:
        if pattern.search(name):
            return cc
    return None


# `|   0  NVIDIA GeForce RTX 4090        Off |   00000000:01:00.0 Off |                  N/A |`
_SMI_ROW = re.compile(
    r"^\|\s+(?P<idx>\d+)\s+(?P<name>(?:NVIDIA|Tesla|Quadro|GeForce|RTX|TITAN|A\d|H\d|L\d)[^|]*?)\s+(?:On|Off)\s*\|"
)
# `| 30%   35C    P8    20W / 450W |      1MiB / 24564MiB |      0%      Default |`
_SMI_USE = re.compile(r"\|\s*(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB\s*\|\s*(?P<util>\d+)%")
# `GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)`
_SMI_L = re.compile(r"^GPU (?P<idx>\d+): (?P<name>[^(]+?)\s*\(UUID: (?P<uuid>[^)]+)\)")
# nccl-tests: `#  Rank  0 Group  0 Pid  15833 on host device  0 [0x02] GeForce GTX 1080 Ti`
_HARNESS = re.compile(r"^#?\s*Rank\s+(?P<rank>\d+)\s.*?\bdevice\s+(?P<idx>\d+)\s+\[[^\]]*\]\s+(?P<name>.+?)\s*$")
# `--query-gpu=index,name,compute_cap,...` CSV rows: `0, NVIDIA H100 80GB HBM3, 9.0, ...`
_CSV = re.compile(r"^(?P<idx>\d+),\s*(?P<name>[^,]*(?:NVIDIA|Tesla|GeForce|RTX|Quadro)[^,]*),\s*(?P<cc>\d+\.\d+)\b")


def gpus_in(lines: Iterable[str]) -> tuple[GpuInfo, ...]:
    """GPUs listed by a pasted `nvidia-smi` table, `nvidia-smi -L`, a CSV query or a harness's
    device list, by index, with the compute capability of their model."""
    found: dict[int, GpuInfo] = {}
    last: int | None = None
    for text in lines:
        text = text.strip()
        m = _SMI_ROW.match(text) or _SMI_L.match(text) or _HARNESS.match(text)
        if m:
            idx, name = int(m["idx"]), m["name"].strip()
            uuid = m.groupdict().get("uuid")
            found.setdefault(idx, GpuInfo(idx, name, uuid, compute_capability(name)))
            last = idx if _SMI_ROW.match(text) else None
            continue
        m = _CSV.match(text)
        if m:
            idx = int(m["idx"])
            found.setdefault(idx, GpuInfo(idx, m["name"].strip(), None, m["cc"]))
            continue
        m = _SMI_USE.search(text)
        if m and last is not None and last in found:
            gpu = found[last]
            found[last] = GpuInfo(gpu.index, gpu.name, gpu.uuid, gpu.compute_capability, float(m["used"]),
                                  float(m["total"]), float(m["util"]))  # fmt: skip
            last = None
    return tuple(found[i] for i in sorted(found))


# The kernel's NVIDIA driver messages (`NVRM: Xid (PCI:0000:3b:00): 79, ...`), OOM kills, hung tasks
_KERNEL = re.compile(
    r"NVRM: |\bXid\b.*\d|Out of memory: Kill|oom-kill:|Killed process \d+|blocked for more than \d+ seconds|"
    r"DMAR: \[?DMA|AMD-Vi: .*(?:IO_PAGE_FAULT|Event logged)|pcieport .*AER|fallen off the bus"
)


def kernel_lines_in(lines: Iterable[str]) -> tuple[str, ...]:
    """Kernel messages pasted into a log, as `dmesg` would show them."""
    return tuple(text.strip() for text in lines if _KERNEL.search(text))


@dataclass(frozen=True)
class PastedProcess:
    pid: int
    state: str | None
    cpu_percent: float | None
    command: str


# `ps aux`: USER PID %CPU %MEM VSZ RSS TTY STAT START TIME COMMAND
_PS_AUX = re.compile(
    r"^\S+\s+(?P<pid>\d+)\s+(?P<cpu>[\d.]+)\s+[\d.]+\s+\d+\s+\d+\s+\S+\s+(?P<stat>[RSDZTtIWX][\w<+sl]*)\s+\S+\s+\S+\s+(?P<cmd>.+)$"
)
# `top`: PID USER PR NI VIRT RES SHR S %CPU %MEM TIME+ COMMAND
_TOP = re.compile(
    r"^\s*(?P<pid>\d+)\s+\S+\s+(?:\d+|rt)\s+-?\d+\s+\S+\s+\S+\s+\S+\s+(?P<stat>[RSDZTI])\s+(?P<cpu>[\d.]+)\s+[\d.]+\s+\S+\s+(?P<cmd>.+)$"
)


def processes_in(lines: Iterable[str]) -> tuple[PastedProcess, ...]:
    """Rows of a pasted `ps aux` or `top` listing."""
    out = []
    for text in lines:
        m = _PS_AUX.match(text) or _TOP.match(text)
        if m:
            out.append(PastedProcess(int(m["pid"]), m["stat"][0], float(m["cpu"]), m["cmd"].strip()))
    return tuple(out)


_COMPILER = re.compile(r"(?:^|/)(?:nvcc|cicc|ptxas|ninja|cc1plus|c\+\+|g\+\+|gcc|clang\+*|fatbinary|nvlink)\b")


def as_records(procs: Sequence[PastedProcess]) -> tuple[ProcessRecord, ...]:
    """Compilers as compilers (a JIT build in progress); anything else as `other`."""
    return tuple(
        ProcessRecord(p.pid, None, p.command, "compiler" if _COMPILER.search(p.command.split(" ")[0]) else "other",
                      state=p.state, cpu_percent=p.cpu_percent)  # fmt: skip
        for p in procs
    )


# `df -h /dev/shm`: `shm   64M   0   64M   0% /dev/shm`
_DF_SHM = re.compile(r"^\S+\s+(?P<size>[\d.]+)(?P<unit>[KMGT])i?B?\s+\S+\s+\S+\s+\d+%\s+/dev/shm\s*$")
_UNIT = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 * 1024}


def shm_size_mib_in(lines: Iterable[str]) -> float | None:
    """The size of /dev/shm from a pasted `df` row; None when none."""
    for text in lines:
        m = _DF_SHM.match(text.strip())
        if m:
            return float(m["size"]) * _UNIT[m["unit"]]
    return None


_NRANKS = re.compile(r"\bn[Rr]anks\s+(?P<n>\d+)|\bnranks (?P<n2>\d+)")


def ranks_in(lines: Iterable[str]) -> int | None:
    """How many ranks a pasted harness or NCCL init names (`nranks 4`, a `Rank N ... device` list)."""
    best = 0
    harness = set()
    for text in lines:
        m = _NRANKS.search(text)
        if m:
            best = max(best, int(m["n"] or m["n2"]))
        h = _HARNESS.match(text.strip())
        if h:
            harness.add(int(h["rank"]))
    best = max(best, len(harness))
    return best or None
