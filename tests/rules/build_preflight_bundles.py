"""Regenerate the fires/quiet bundles of the live rules that lean on a preflight
(hangwatch/rules/preflight.yaml `rules:`): a bundle's preflight.json holds what `hangwatch run`'s
preflight found before the launch (an extension of docs/bundle-format.md).

    python tests/rules/build_preflight_bundles.py
"""

import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
META = {"format": "hangwatch-bundle/1", "engine": "sglang", "engine_version": "0.5.23", "gpu_model": "NVIDIA H200",
        "compute_capability": "9.0", "nnodes": 1, "tp": 2}
CMD = "python -m sglang.launch_server --model-path /models/m --tp 2"
START = """[2026-11-30 10:00:00] server_args=ServerArgs(model_path='/models/m', tp_size=2)
[2026-11-30 10:00:02 TP0] Init torch distributed begin.
[2026-11-30 10:00:02 TP1] Init torch distributed begin.
"""
INIT_END = """[2026-11-30 10:00:04 TP0] Init torch distributed ends. mem usage=0.50 GB
[2026-11-30 10:00:04 TP1] Init torch distributed ends. mem usage=0.50 GB
"""
LOAD = """[2026-11-30 10:00:05 TP0] Load weight begin. avail mem=138.20 GB
[2026-11-30 10:00:05 TP1] Load weight begin. avail mem=138.20 GB
"""
LOADED = """[2026-11-30 10:00:30 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=122.10 GB
[2026-11-30 10:00:30 TP1] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=122.10 GB
[2026-11-30 10:00:31 TP0] KV Cache is allocated. #tokens: 900000, K size: 50.00 GB, V size: 50.00 GB
[2026-11-30 10:00:31 TP1] KV Cache is allocated. #tokens: 900000, K size: 50.00 GB, V size: 50.00 GB
"""
LOCK_STACK = """Process 4200: sglang::scheduler_TP0
Python v3.12.3 (/usr/bin/python3.12)

Thread 4200 (idle): "MainThread"
    FileBaton.wait (/usr/local/lib/python3.12/dist-packages/torch/utils/file_baton.py:43)
    _jit_compile (/usr/local/lib/python3.12/dist-packages/torch/utils/cpp_extension.py:2074)
    load (/usr/local/lib/python3.12/dist-packages/torch/utils/cpp_extension.py:1623)
    ModelRunner.init_attention_backend (/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/model_runner.py:1401)
"""


def finding(cause: str, severity: str, title: str, evidence: str, remedy: str = "see the preflight") -> dict:
    return {"cause": cause, "severity": severity, "title": title, "check": f"preflight-{cause}",
            "evidence": [{"text": evidence, "source": "preflight"}], "remedy": remedy}


SHM = finding("shm_too_small", "critical", "/dev/shm is far too small for several ranks (a container default)",
              "/dev/shm is a 64 MiB tmpfs (for 2 rank process(es))")
WEIGHTS = finding("weight_loading_io", "critical", "A weights file is a FIFO",
                  "/models/m/model.safetensors is a FIFO: the loader's open() blocks until something writes to it")
PORT = finding("port_in_use", "critical", "The server's HTTP port is already taken", "port 30000 (the default port) is already listened on")
RDZV = finding("multinode_rendezvous", "critical", "A multi-node launch rendezvous on a loopback address",
               "--dist-init-addr localhost resolves to loopback (127.0.0.1) on a 2-node launch: other nodes cannot reach it")
P2P = finding("nccl_p2p_topology", "critical", "PCIe-only GPUs with P2P through an IOMMU or ACS redirect",
              "the IOMMU translates GPU DMA (not off, not passthrough): peer writes go through it")
P2P_INFO = {**P2P, "severity": "info"}
LOCK = finding("jit_lock_deadlock", "critical", "A JIT cache lock file left behind by a process that is gone",
               "/root/.cache/torch_extensions/py312_cu130/sgl_ext/lock is a build lock left behind (no build holds it)")
FLASHINFER = finding("flashinfer_arch", "warning", "FlashInfer attention on an SM12x (Blackwell workstation) GPU",
                     "GPU 0: NVIDIA RTX PRO 6000 Blackwell Workstation Edition, compute capability 12.0")

CASES = {
    "preflight-predicted-shm-stall": {
        "fires": {"init-after-small-shm": {"log": START, "preflight": [SHM]}},
        "quiet": {"init-no-preflight": {"log": START}},
    },
    "preflight-predicted-weights-stall": {
        "fires": {"load-after-fifo": {"log": START + INIT_END + LOAD, "preflight": [WEIGHTS]}},
        "quiet": {"load-after-other-finding": {"log": START + INIT_END + LOAD, "preflight": [PORT]}},
    },
    "preflight-predicted-rendezvous-stall": {
        "fires": {"rendezvous-after-loopback": {"log": START, "preflight": [RDZV],
                                                "cmdline": CMD + " --nnodes 2 --node-rank 0 --dist-init-addr localhost:5000"}},
        "quiet": {"rendezvous-no-preflight": {"log": START, "cmdline": CMD + " --nnodes 2 --node-rank 0 --dist-init-addr localhost:5000"}},
    },
    "preflight-predicted-p2p-stall": {
        "fires": {"after-weights-iommu": {"log": START + INIT_END + LOAD + LOADED, "preflight": [P2P]}},
        "quiet": {"info-only-finding": {"log": START + INIT_END + LOAD + LOADED, "preflight": [P2P_INFO]}},
    },
    "preflight-predicted-jit-lock-stall": {
        "fires": {"file-baton-wait": {"log": START + INIT_END + LOAD + LOADED, "preflight": [LOCK], "stacks": {"TP0": LOCK_STACK}}},
        "quiet": {"file-baton-no-preflight": {"log": START + INIT_END + LOAD + LOADED, "stacks": {"TP0": LOCK_STACK}}},
    },
    "preflight-predicted-flashinfer-stall": {
        "fires": {"silent-after-weights": {"log": START + INIT_END + LOAD + LOADED, "preflight": [FLASHINFER]}},
        "quiet": {"still-loading": {"log": START + INIT_END + LOAD, "preflight": [FLASHINFER]}},
    },
}


def write(dest: Path, case: dict) -> None:
    dest.mkdir(parents=True)
    (dest / "meta.json").write_text(json.dumps(META, indent=1) + "\n")
    (dest / "server.log").write_text(case["log"])
    (dest / "cmdline.txt").write_text(case.get("cmdline", CMD) + "\n")
    if "preflight" in case:
        (dest / "preflight.json").write_text(json.dumps({"findings": case["preflight"]}, indent=1) + "\n")
    for label, text in (case.get("stacks") or {}).items():
        (dest / "stacks").mkdir(exist_ok=True)
        (dest / "stacks" / f"{label}.txt").write_text(text)


def main() -> None:
    for rule, kinds in CASES.items():
        shutil.rmtree(HERE / rule, ignore_errors=True)
        for kind, cases in kinds.items():
            for name, case in cases.items():
                write(HERE / rule / kind / name, case)


if __name__ == "__main__":
    main()
