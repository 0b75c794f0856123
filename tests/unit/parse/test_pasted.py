"""Pasted live evidence read back into model data: nvidia-smi, harness device lists, dmesg, ps, df."""

from __future__ import annotations

import pytest

from hangwatch.classify.verdict.pasted import with_pasted
from hangwatch.model import Evidence, LogLine
from hangwatch.parse.pasted import (
    compute_capability,
    gpus_in,
    kernel_lines_in,
    processes_in,
    ranks_in,
    shm_size_mib_in,
)

SMI = """\
+-----------------------------------------------------------------------------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
|=========================================+========================+======================|
|   0  NVIDIA GeForce RTX 5090        Off |   00000000:01:00.0 Off |                  N/A |
| 30%   35C    P8             20W /  575W |   31000MiB /  32607MiB |     100%      Default |
|   1  NVIDIA GeForce RTX 5090        Off |   00000000:02:00.0 Off |                  N/A |
| 30%   33C    P8             18W /  575W |       1MiB /  32607MiB |       0%      Default |
""".splitlines()


@pytest.mark.parametrize(
    ("name", "cc"),
    [("NVIDIA GeForce RTX 5090", "12.0"), ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "12.0"),
     ("NVIDIA H100 80GB HBM3", "9.0"), ("NVIDIA H20", "9.0"), ("NVIDIA B200", "10.0"), ("NVIDIA L40S", "8.9"),
     ("NVIDIA GeForce RTX 4090", "8.9"), ("NVIDIA A100-SXM4-80GB", "8.0"), ("NVIDIA A10G", "8.6"),
     ("GeForce GTX 1080 Ti", "6.1"), ("Tesla V100-SXM2-32GB", "7.0"), ("Apple M2", None), (None, None)],
)  # fmt: skip
def test_model_names_give_their_architecture(name: str | None, cc: str | None) -> None:
    assert compute_capability(name) == cc


def test_nvidia_smi_table_gives_gpus_with_memory_and_utilisation() -> None:
    gpus = gpus_in(SMI)
    assert [(g.index, g.compute_capability, g.memory_used_mib, g.utilization_pct) for g in gpus] == [
        (0, "12.0", 31000.0, 100.0), (1, "12.0", 1.0, 0.0)
    ]


def test_smi_list_and_harness_device_list() -> None:
    assert gpus_in(["GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1234)"])[0].uuid == "GPU-1234"
    harness = ["#   Rank  0 Pid  15833 on host device  0 [0x02] GeForce GTX 1080 Ti",
               "#   Rank  1 Pid  15833 on host device  1 [0x03] GeForce GTX 1080 Ti"]  # fmt: skip
    assert [g.compute_capability for g in gpus_in(harness)] == ["6.1", "6.1"]
    assert ranks_in(harness) == 2
    assert ranks_in(["host:1:2 [0] NCCL INFO comm 0x5 rank 0 nranks 8 cudaDev 0 busId 1000"]) == 8


def test_kernel_lines_processes_and_shm_size() -> None:
    log = ["[ 12.3] NVRM: Xid (PCI:0000:3b:00): 79, pid=123, GPU has fallen off the bus.", "INFO normal line"]
    assert kernel_lines_in(log) == (log[0].strip(),)
    ps = ["root  4242 98.0  0.1 123 456 ?  R  10:00  0:42 /usr/local/cuda/bin/nvcc -c kernel.cu",
          "root  4100  0.0  1.0 123 456 ?  Dl 10:00  0:01 python -m sglang.launch_server"]  # fmt: skip
    rows = processes_in(ps)
    assert [(p.pid, p.state) for p in rows] == [(4242, "R"), (4100, "D")]
    assert shm_size_mib_in(["shm              64M     0   64M   0% /dev/shm"]) == 64.0


def test_with_pasted_fills_only_what_was_not_measured() -> None:
    lines = tuple(LogLine(i, text, message=text) for i, text in enumerate([*SMI, "shm 64M 0 64M 0% /dev/shm"], 1))
    filled = with_pasted(Evidence(log=lines))
    assert filled.gpus and filled.gpus[0].gpus[0].compute_capability == "12.0"
    assert filled.meta["shm_size_mib"] == 64.0
    assert with_pasted(Evidence()) == Evidence()
