"""Write the probe corpus: report-style bundles (docs/bundle-format.md) with an expected.json each.

    python tests/probe_corpus/make_probes.py

Each case is written from the startup mechanism (../shared/reference/sglang-startup.md, ../shared/reference/anchors.md)
in the shapes public bug reports take: a pasted log tail of a few lines from SGLang 0.4.x/0.5.x or
vLLM V0/V1, sometimes a pasted py-spy dump or traceback, often only a command line, a GPU name,
environment variables or a dmesg line. None is copied from the dev corpus. A case folder is
rewritten from scratch, so edit the case here, not the files.

Cases named `healthy-*` model the live loop watching a start that is fine: `since_last_progress_s`
is short, and the verdict must not name a cause (state `starting` or `progressing`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES: dict[str, dict] = {}


# The dev corpus (../shared/corpus/dev/INDEX.md, `state`) calls a start whose log ends in a fatal error, nothing after it, `crashed`.
ENDED_IN_ERROR = "relabelled stalled -> crashed: the log ends in its fatal error with nothing after it (the dev corpus index, `state`)"
ENDED_BY_SIGNAL = "relabelled stalled -> crashed: its stack file reports the fatal signal the process died of (the dev corpus index, `state`)"

def case(name, cause, state, *, engine="sglang", gpu=None, cc=None, tp=None, nnodes=1, version=None,
         log=None, cmdline=None, env=None, dmesg=None, stacks=None, procs=None, ports=None, quiet=None, why=None):
    files = {}
    if log is not None:
        files["server.log"] = log
    if cmdline is not None:
        files["cmdline.txt"] = cmdline
    if env is not None:
        files["env.txt"] = "\n".join(f"{k}={v}" for k, v in env.items())
    if dmesg is not None:
        files["dmesg.txt"] = dmesg
    if ports is not None:
        files["ports.txt"] = ports
    for label, text in (stacks or {}).items():
        files[f"stacks/{label}.txt"] = text
    if procs is not None:
        files["procs.json"] = json.dumps(procs, indent=2)
    tier = ("log+stacks" if log and stacks else "log" if log else "stacks" if stacks else "meta-only")
    meta = {"format": "hangwatch-bundle/1", "engine": engine, "engine_version": version, "gpu_model": gpu,
            "compute_capability": cc, "nnodes": nnodes, "tp": tp}
    if quiet is not None:
        meta["observed_for_s"] = quiet + 60.0
        meta["since_last_progress_s"] = float(quiet)
    expected = {"cause": cause, "state": state, "evidence": tier}
    if why:
        expected["why"] = why
    CASES[name] = {"meta": meta, "expected": expected, "files": files}


SITE = "/usr/local/lib/python3.10/dist-packages/"
CONDA = "/opt/conda/lib/python3.11/site-packages/"

# =========================================================================== nccl_p2p_topology

case("p2p-4090-vllm-v0-init-complete", "nccl_p2p_topology", "stalled", engine="vllm", gpu="NVIDIA GeForce RTX 4090", cc="8.9", tp=2,
     cmdline="python -m vllm.entrypoints.openai.api_server --model Qwen/Qwen1.5-14B-Chat -tp 2",
     log="""INFO 06-02 14:21:07 utils.py:660] Found nccl from library libnccl.so.2
INFO 06-02 14:21:07 pynccl.py:63] vLLM is using nccl==2.20.5
(VllmWorkerProcess pid=3318) INFO 06-02 14:21:07 pynccl.py:63] vLLM is using nccl==2.20.5
ws-4090:3201:3201 [0] NCCL INFO comm 0x55c3d0a0 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0
ws-4090:3201:3201 [0] NCCL INFO Channel 00/02 :    0   1
ws-4090:3201:3201 [0] NCCL INFO Channel 01/02 :    0   1
ws-4090:3201:3201 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC
ws-4090:3318:3318 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC
ws-4090:3201:3201 [0] NCCL INFO Connected all rings
ws-4090:3201:3201 [0] NCCL INFO Connected all trees
ws-4090:3201:3201 [0] NCCL INFO comm 0x55c3d0a0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x6b3f0c2a - Init COMPLETE
ws-4090:3318:3318 [1] NCCL INFO comm 0x5612b8e0 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2000 commId 0x6b3f0c2a - Init COMPLETE
""")

case("p2p-rtxpro6000-meta-tp4", "nccl_p2p_topology", "stalled", engine="vllm",
     gpu="NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", cc="12.0", tp=4,
     cmdline="vllm serve zai-org/GLM-4.5-Air-FP8 --tensor-parallel-size 4 --max-model-len 65536")

case("p2p-l40s-sglang-04-nccl-last", "nccl_p2p_topology", "stalled", gpu="NVIDIA L40S", cc="8.9", tp=8, version="0.4.3",
     cmdline="python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct --tp 8 --port 30000",
     log="""[2025-02-11 09:14:02 TP0] Init torch distributed begin.
[2025-02-11 09:14:02 TP3] Init torch distributed begin.
[2025-02-11 09:14:02 TP5] Init torch distributed begin.
[2025-02-11 09:14:03 TP7] Init torch distributed begin.
[2025-02-11 09:14:05 TP0] sglang is using nccl==2.21.5
""")

case("p2p-a6000-stacks-allreduce", "nccl_p2p_topology", "stalled", engine="vllm", gpu="NVIDIA RTX A6000", cc="8.6", tp=2,
     cmdline="vllm serve mistralai/Mistral-Small-24B-Instruct-2501 --tensor-parallel-size 2",
     stacks={"reported": """Thread 51422 (active): "MainThread"
    synchronize (torch/cuda/__init__.py:985)
    all_reduce (vllm/distributed/device_communicators/pynccl.py:142)
    __init__ (vllm/distributed/device_communicators/pynccl.py:118)
    __init__ (vllm/distributed/device_communicators/cuda_communicator.py:47)
    __init__ (vllm/distributed/parallel_state.py:234)
    init_model_parallel_group (vllm/distributed/parallel_state.py:904)
    initialize_model_parallel (vllm/distributed/parallel_state.py:1105)
"""})

case("p2p-iommu-dmar-faults", "nccl_p2p_topology", "stalled", engine="vllm", gpu="NVIDIA RTX 6000 Ada Generation", cc="8.9", tp=4,
     log="""INFO 11-03 18:40:11 [pynccl.py:69] vLLM is using nccl==2.21.5
INFO 11-03 18:40:12 [custom_all_reduce_utils.py:244] reading GPU P2P access cache from /root/.cache/vllm/gpu_p2p_access_cache_for_0,1,2,3.json
""",
     dmesg="""[Mon Nov  3 18:40:13 2025] DMAR: DRHD: handling fault status reg 2
[Mon Nov  3 18:40:13 2025] DMAR: [DMA Write NO_PASID] Request device [c1:00.0] fault addr 0xf8e00000 [fault reason 0x05] PTE Write access is not set
""")

# =========================================================================== jit_compile_slow

case("jit-deepgemm-precompile-sglang", "jit_compile_slow", "progressing", gpu="NVIDIA H200", cc="9.0", tp=8,
     cmdline="python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3-0324 --tp 8 --trust-remote-code",
     log="""[2025-05-20 03:11:45 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=61.44 GB
[2025-05-20 03:11:46 TP0] Entering DeepGEMM JIT Pre-Compile session. And it may takes a long time(Typically 10-20 mins) if you have not run `sglang.compile_deep_gemm`. Recommand to run `sglang.compile_deep_gemm` with same args as `sglang.launch_server` for pre-compilation to reduce the overhead if you have not run it before. For example: `python3 -m sglang.compile_deep_gemm --model deepseek-ai/DeepSeek-V3 --tp 8 --trust-remote-code`
[2025-05-20 03:11:46 TP0] Try DeepGEMM JIT Compiling for <GEMM_NT_F8F8BF16> N=24576, K=1536, num_groups=1 with all Ms. It only takes a litte time(Typically 1 sec) if you have run `python3 -m sglang.compile_deep_gemm`.
DeepGEMM warmup:  41%|████      | 1680/4096 [02:31<03:38, 11.06it/s]
""")

case("jit-vllm-torch-compile", "jit_compile_slow", "progressing", engine="vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=1,
     cmdline="vllm serve Qwen/Qwen3-32B --max-model-len 32768",
     log="""(EngineCore_0 pid=8812) INFO 08-21 10:02:13 [default_loader.py:262] Loading weights took 14.82 seconds
(EngineCore_0 pid=8812) INFO 08-21 10:02:14 [gpu_model_runner.py:2007] Model loading took 61.0364 GiB and 15.630102 seconds
(EngineCore_0 pid=8812) INFO 08-21 10:02:24 [backends.py:548] Using cache directory: /root/.cache/vllm/torch_compile_cache/4f1a2c9e8b/rank_0_0/backbone for vLLM's torch.compile
(EngineCore_0 pid=8812) INFO 08-21 10:02:24 [backends.py:559] Dynamo bytecode transform time: 10.12 s
(EngineCore_0 pid=8812) INFO 08-21 10:02:31 [backends.py:161] Directly load the compiled graph(s) for dynamic shape from the cache, took 6.914 s
(EngineCore_0 pid=8812) INFO 08-21 10:03:32 [backends.py:215] Compiling a graph for dynamic shape takes 67.25 s
""")

case("jit-flashinfer-loading-ops-h100", "jit_compile_slow", "progressing", engine="vllm", gpu="NVIDIA H100 PCIe", cc="9.0", tp=1,
     env={"VLLM_ATTENTION_BACKEND": "FLASHINFER"},
     log="""INFO 01-14 07:33:10 model_runner.py:1072] Loading model weights took 14.9888 GB
2025-01-14 07:33:12,442 - INFO - flashinfer.jit: Prebuilt kernels not found, using JIT backend
2025-01-14 07:33:12,448 - INFO - flashinfer.jit: Loading JIT ops: batch_prefill_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_dtype_idx_i32_head_dim_128_posenc_0_use_swa_False_use_logits_cap_False_f16qk_False
""")

case("jit-meta-fp8-sglang-h20", "jit_compile_slow", "progressing", gpu="NVIDIA H20", cc="9.0", tp=8,
     cmdline="python3 -m sglang.launch_server --model-path /data/DeepSeek-R1 --tp 8 --trust-remote-code --quantization fp8")

case("jit-sglang-torch-compile-capture", "jit_compile_slow", "progressing", gpu="NVIDIA A100-SXM4-80GB", cc="8.0", tp=1, version="0.4.6",
     cmdline="python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --enable-torch-compile --cuda-graph-max-bs 32",
     log="""[2025-04-30 12:00:41] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.52 GB, mem usage=15.06 GB.
[2025-04-30 12:00:41] KV Cache is allocated. #tokens: 399402, K size: 24.38 GB, V size: 24.38 GB
[2025-04-30 12:00:41] Memory pool end. avail mem=14.02 GB
[2025-04-30 12:00:42] Capture cuda graph begin. This can take up to several minutes. avail mem=13.44 GB
Capturing batches (avail_mem=13.40 GB):  25%|██▌       | 1/4 [01:48<05:24, 108.03s/it]
""")

case("jit-vllm-deepgemm-warmup-v1", "jit_compile_slow", "progressing", engine="vllm", gpu="NVIDIA H200", cc="9.0", tp=8,
     env={"VLLM_USE_DEEP_GEMM": "1"},
     log="""(Worker_TP0 pid=2231) INFO 10-02 05:51:40 [gpu_model_runner.py:2653] Model loading took 83.2 GiB and 62.4 seconds
(Worker_TP0 pid=2231) INFO 10-02 05:51:52 [deep_gemm_warmup.py:160] DeepGemm(fp8_gemm_nt) warmup (W=torch.Size([7168, 2048])) :  12%|█▏        | 1003/8192 [04:11<29:51, 4.01it/s]
""")

# =========================================================================== custom_allreduce

case("ca-vllm-v0-registering-addresses", "custom_allreduce", "stalled", engine="vllm", gpu="NVIDIA A40", cc="8.6", tp=4,
     log="""INFO 07-10 16:20:41 custom_all_reduce_utils.py:232] reading GPU P2P access cache from /home/user/.cache/vllm/gpu_p2p_access_cache_for_0,1,2,3.json
INFO 07-10 16:21:58 model_runner.py:1060] Capturing the model for CUDA graphs. This may lead to unexpected consequences if the model is not static. To run the model in eager mode, set 'enforce_eager=True' or use '--enforce-eager' in the CLI.
INFO 07-10 16:21:58 model_runner.py:1064] CUDA graphs can take additional 1~3 GiB memory per GPU. If you are running out of memory, consider decreasing `gpu_memory_utilization` or enforcing eager mode. You can also reduce the `max_num_seqs` as needed to decrease memory usage.
INFO 07-10 16:22:19 custom_all_reduce.py:223] Registering 2275 cuda graph addresses
""")

case("ca-sglang-04-registering-after-capture", "custom_allreduce", "stalled", gpu="NVIDIA A800-SXM4-80GB", cc="8.0", tp=2, version="0.4.1",
     cmdline="python -m sglang.launch_server --model-path Qwen/Qwen2.5-72B-Instruct-AWQ --tp 2",
     log="""[2025-01-06 10:41:18 TP0] Capture cuda graph begin. This can take up to several minutes.
[2025-01-06 10:41:19 TP1] Capture cuda graph begin. This can take up to several minutes.
100%|██████████| 23/23 [00:09<00:00,  2.47it/s]
[2025-01-06 10:41:29 TP0] Registering 1288 cuda graph addresses
""")

case("ca-stack-custom-all-reduce", "custom_allreduce", "stalled", engine="vllm", gpu="NVIDIA L20", cc="8.9", tp=2,
     stacks={"reported": """Process 1937: VLLM::Worker_TP1
Python v3.12.11 (/usr/bin/python3.12)

Thread 1937 (active): "MainThread"
    all_reduce (vllm/distributed/device_communicators/custom_all_reduce.py:286)
    custom_all_reduce (vllm/distributed/device_communicators/custom_all_reduce.py:303)
    all_reduce (vllm/distributed/device_communicators/cuda_communicator.py:105)
    _all_reduce_out_place (vllm/distributed/parallel_state.py:505)
    forward (vllm/model_executor/layers/linear.py:1349)
    _dummy_run (vllm/v1/worker/gpu_model_runner.py:2392)
"""})

case("ca-vllm-v1-shm-broadcast-tp2", "custom_allreduce", "stalled", engine="vllm", gpu="NVIDIA L20", cc="8.9", tp=2,
     cmdline="vllm serve Qwen/Qwen2.5-32B-Instruct --tensor-parallel-size 2 --gpu-memory-utilization 0.9",
     log="""(EngineCore_DP0 pid=641) INFO 09-18 02:33:12 [gpu_model_runner.py:2653] Model loading took 30.7 GiB and 21.9 seconds
(EngineCore_DP0 pid=641) INFO 09-18 02:34:12 [shm_broadcast.py:466] No available shared memory broadcast block found in 60 second.
(EngineCore_DP0 pid=641) INFO 09-18 02:35:12 [shm_broadcast.py:466] No available shared memory broadcast block found in 60 second.
""")

# =========================================================================== weight_loading_io

case("w-sglang-multithread-bar-crawl", "weight_loading_io", "progressing", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=8,
     cmdline="python3 -m sglang.launch_server --model-path /mnt/lustre/models/Kimi-K2-Instruct --tp 8 --trust-remote-code",
     log="""[2026-03-02 14:02:11 TP0] Load weight begin. avail mem=78.21 GB
Multi-thread loading shards:   7% Completed | 4/61 [06:20<1:30:12, 95.0s/it]
Multi-thread loading shards:   8% Completed | 5/61 [07:58<1:29:01, 95.4s/it]
""")

case("w-vllm-d-state-nfs", "weight_loading_io", "stalled", engine="vllm", gpu="NVIDIA A100-SXM4-80GB", cc="8.0", tp=1,
     log="""INFO 05-07 11:12:01 [gpu_model_runner.py:1329] Starting to load model /mnt/nfs/models/Llama-3.1-8B-Instruct...
INFO 05-07 11:12:02 [weight_utils.py:257] Using model weights format ['*.safetensors']
Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]
""",
     procs=[{"pid": 9120, "ppid": 1, "cmdline": "vllm serve /mnt/nfs/models/Llama-3.1-8B-Instruct", "role": "launcher", "rank": None, "state": "S", "cpu_percent": 0.0, "rss_mib": 900, "alive": True, "exit_code": None},
            {"pid": 9188, "ppid": 9120, "cmdline": "VLLM::EngineCore", "role": "engine_core", "rank": None, "state": "D", "cpu_percent": 0.0, "rss_mib": 2900, "alive": True, "exit_code": None}])

case("w-sglang-monitored-barrier-timeout", "weight_loading_io", "crashed", why=ENDED_IN_ERROR, gpu="NVIDIA H800", cc="9.0", tp=16, nnodes=2,
     cmdline="python3 -m sglang.launch_server --model-path /models/DeepSeek-V3 --tp 16 --nnodes 2 --node-rank 0 --dist-init-addr 10.0.1.10:20000 --trust-remote-code",
     log="""[2025-07-03 08:15:40 TP3] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=38.90 GB, mem usage=39.12 GB.
[2025-07-03 08:23:40 TP3] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 763, in load_model
    dist.monitored_barrier(
RuntimeError: Rank 11 failed to pass monitoredBarrier in 480000 ms
RuntimeError: TP rank 3 could finish the model loading, but there are other ranks that didn't finish loading. It is likely due to unexpected failures (e.g., OOM) or a slow node.
""")

case("w-hf-download-crawl", "weight_loading_io", "progressing", engine="vllm", tp=1,
     cmdline="vllm serve meta-llama/Llama-3.3-70B-Instruct",
     log="""INFO 12-09 20:14:51 [weight_utils.py:296] Using model weights format ['*.safetensors']
model-00003-of-00030.safetensors:  41%|████      | 2.03G/4.97G [08:12<11:53, 4.12MB/s]
""")

case("w-vllm-starting-load-silent", "weight_loading_io", "stalled", engine="vllm", gpu="NVIDIA L4", cc="8.9", tp=1,
     cmdline="vllm serve /gcs-fuse/models/gemma-2-9b-it --download-dir /gcs-fuse/cache",
     log="""INFO 03-22 04:10:33 [core.py:58] Initializing a V1 LLM engine (v0.8.1) with config: model='/gcs-fuse/models/gemma-2-9b-it'
INFO 03-22 04:10:36 [gpu_model_runner.py:1164] Starting to load model /gcs-fuse/models/gemma-2-9b-it...
""")

# =========================================================================== multinode_rendezvous

case("mn-tcpstore-clients-joined", "multinode_rendezvous", "crashed", why=ENDED_IN_ERROR, gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=16, nnodes=2,
     cmdline="python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-R1 --tp 16 --nnodes 2 --node-rank 0 --dist-init-addr 172.16.4.52:20000 --trust-remote-code",
     log="""[2025-03-14 02:11:05 TP0] Init torch distributed begin.
[2025-03-14 02:41:06 TP0] Scheduler hit an exception: Traceback (most recent call last):
torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 8/16 clients joined.
""")

case("mn-vllm-ray-placement-group", "multinode_rendezvous", "stalled", engine="vllm", gpu="NVIDIA A100-SXM4-80GB", cc="8.0", tp=8, nnodes=2,
     cmdline="vllm serve meta-llama/Llama-3.1-405B-Instruct-FP8 --tensor-parallel-size 8 --pipeline-parallel-size 2 --distributed-executor-backend ray",
     log="""INFO 09-04 13:20:11 ray_utils.py:282] Waiting for creating a placement group of specs for 10 seconds. specs=[{'node:10.20.0.4': 0.001, 'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}]. Check `ray status` to see if you have enough resources, and make sure the IP addresses used by ray cluster are the same as VLLM_HOST_IP environment variable specified in each node if you are running on a multi-node.
INFO 09-04 13:20:31 ray_utils.py:282] Waiting for creating a placement group of specs for 30 seconds. specs=[{'node:10.20.0.4': 0.001, 'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}]. Check `ray status` to see if you have enough resources.
""")

case("mn-node1-init-last", "multinode_rendezvous", "stalled", gpu="NVIDIA H20", cc="9.0", tp=16, nnodes=2, version="0.4.3.post2",
     cmdline="python3 -m sglang.launch_server --model-path /data/DeepSeek-V3 --tp 16 --nnodes 2 --node-rank 1 --dist-init-addr 192.168.10.11:5000 --trust-remote-code",
     log="""[2025-02-20 11:02:33 TP8] Init torch distributed begin.
[2025-02-20 11:02:33 TP9] Init torch distributed begin.
[2025-02-20 11:02:33 TP12] Init torch distributed begin.
[2025-02-20 11:02:34 TP15] Init torch distributed begin.
""")

case("mn-client-socket-timeout", "multinode_rendezvous", "crashed", why=ENDED_IN_ERROR, engine="vllm", tp=8, nnodes=2,
     log="""[W socket.cpp:697] [c10d] The client socket has failed to connect to [node-0]:29500 (errno: 110 - Connection timed out).
torch.distributed.DistNetworkError: The client socket has timed out after 600s while trying to connect to (10.8.0.2, 29500).
""")

case("mn-meta-nnodes-env", "multinode_rendezvous", "stalled", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=16, nnodes=2,
     cmdline="python3 -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --tp 16 --nnodes 2 --node-rank 1 --dist-init-addr 10.0.0.1:50000",
     env={"NCCL_IB_DISABLE": "0", "NCCL_DEBUG": "WARN"})

# =========================================================================== port_in_use

case("port-uvicorn-errno98", "port_in_use", "crashed", why=ENDED_IN_ERROR, tp=1,
     log="""[2025-06-01 19:02:17] INFO:     Started server process [31877]
[2025-06-01 19:02:17] INFO:     Waiting for application startup.
[2025-06-01 19:02:17] INFO:     Application startup complete.
[2025-06-01 19:02:17] ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use
[2025-06-01 19:02:17] INFO:     Waiting for application shutdown.
""")

case("port-vllm-oserror", "port_in_use", "crashed", why=ENDED_IN_ERROR, engine="vllm", tp=1,
     log="""  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py", line 1834, in create_server_socket
    sock.bind(addr)
OSError: [Errno 98] Address already in use
""")

case("port-nccl-port-eaddrinuse", "port_in_use", "crashed", why=ENDED_IN_ERROR, gpu="NVIDIA A100-SXM4-40GB", cc="8.0", tp=2,
     log="""[2025-08-19 07:44:02 TP1] Init torch distributed begin.
[2025-08-19 07:44:02 TP0] Init torch distributed begin.
[2025-08-19 07:44:03 TP0] Scheduler hit an exception: Traceback (most recent call last):
torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 28714, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use
""")

# =========================================================================== cuda_graph_capture

case("cg-sglang-04-capturing-stuck", "cuda_graph_capture", "stalled", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=4, version="0.4.4",
     log="""[2025-03-28 15:30:02 TP0] Memory pool end. avail mem=20.66 GB
[2025-03-28 15:30:02 TP2] Capture cuda graph begin. This can take up to several minutes. avail mem=20.63 GB
[2025-03-28 15:30:02 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=20.66 GB
Capturing batches (avail_mem=20.41 GB):  22%|██▏       | 5/23 [00:03<00:10,  1.70it/s]
""")

case("cg-vllm-v1-capturing-stuck", "cuda_graph_capture", "stalled", engine="vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=1,
     log="""(EngineCore_0 pid=77120) INFO 09-01 08:14:31 [gpu_worker.py:276] Available KV cache memory: 42.21 GiB
(EngineCore_0 pid=77120) INFO 09-01 08:14:31 [kv_cache_utils.py:849] GPU KV cache size: 691,568 tokens
(EngineCore_0 pid=77120) INFO 09-01 08:14:31 [kv_cache_utils.py:853] Maximum concurrency for 32,768 tokens per request: 21.11x
Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  46%|████▋     | 31/67 [00:04<00:05,  6.79it/s]
""")

case("cg-sglang-05-target-decode-begin", "cuda_graph_capture", "stalled", gpu="NVIDIA H200", cc="9.0", tp=8,
     cmdline="python3 -m sglang.launch_server --model-path moonshotai/Kimi-K2-Instruct --tp 8 --trust-remote-code --cuda-graph-max-bs 256",
     log="""[2026-05-12 20:04:45 TP0] Memory pool end. avail mem=18.22 GB
[2026-05-12 20:04:46 TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=18.01 GB
[2026-05-12 20:04:46 TP3] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=18.03 GB
""")

case("cg-stack-capture-one-batch", "cuda_graph_capture", "stalled", gpu="NVIDIA A100-SXM4-80GB", cc="8.0", tp=1,
     stacks={"reported": """Thread 92213 (active): "MainThread"
    synchronize (torch/cuda/__init__.py:954)
    capture_one_batch_size (sglang/srt/model_executor/cuda_graph_runner.py:471)
    capture (sglang/srt/model_executor/cuda_graph_runner.py:382)
    __init__ (sglang/srt/model_executor/cuda_graph_runner.py:302)
    init_cuda_graphs (sglang/srt/model_executor/model_runner.py:1027)
    initialize (sglang/srt/model_executor/model_runner.py:233)
"""})

# =========================================================================== jit_lock_deadlock

case("lock-flashinfer-filelock-stack", "jit_lock_deadlock", "stalled", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=2,
     stacks={"reported": """Thread 18811 (idle): "MainThread"
    _poll_acquire (filelock/_api.py:332)
    acquire (filelock/_api.py:344)
    __enter__ (filelock/_api.py:375)
    build_and_load (flashinfer/jit/core.py:291)
    gen_batch_prefill_module (flashinfer/prefill.py:229)
    plan (flashinfer/prefill.py:1604)
    init_forward_metadata (sglang/srt/layers/attention/flashinfer_backend.py:212)
"""})

case("lock-torch-extensions-root-last", "jit_lock_deadlock", "stalled", engine="vllm", gpu="NVIDIA A100-SXM4-40GB", cc="8.0", tp=1,
     log="""INFO 04-02 13:01:44 model_runner.py:146] Loading model weights took 13.4966 GB
Using /root/.cache/torch_extensions/py310_cu121 as PyTorch extensions root...
""")

case("lock-filelock-debug-lines", "jit_lock_deadlock", "stalled", gpu="NVIDIA L40S", cc="8.9", tp=1,
     env={"FLASHINFER_WORKSPACE_BASE": "/shared/home/bob"},
     log="""[2025-09-09 10:18:22] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=28.11 GB, mem usage=15.25 GB.
2025-09-09 10:18:25,101 - DEBUG - filelock: Attempting to acquire lock 140210611235872 on /shared/home/bob/.cache/flashinfer/0.2.14/89/cached_ops/tmp/batch_decode_with_kv_cache.lock
2025-09-09 10:18:25,101 - DEBUG - filelock: Lock 140210611235872 not acquired on /shared/home/bob/.cache/flashinfer/0.2.14/89/cached_ops/tmp/batch_decode_with_kv_cache.lock, waiting 0.05 seconds ...
""")

# =========================================================================== warmup_request

case("wu-uvicorn-model-info-no-ready", "warmup_request", "stalled", tp=1,
     env={"http_proxy": "http://proxy.corp.example:3128", "https_proxy": "http://proxy.corp.example:3128"},
     log="""[2025-05-07 09:40:12] INFO:     Started server process [1203]
[2025-05-07 09:40:12] INFO:     Waiting for application startup.
[2025-05-07 09:40:12] INFO:     Application startup complete.
[2025-05-07 09:40:12] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
""")

case("wu-initialization-failed", "warmup_request", "crashed", why=ENDED_IN_ERROR, tp=1,
     log="""[2025-10-12 22:05:31] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)
[2025-10-12 22:05:32] INFO:     127.0.0.1:41592 - "GET /get_model_info HTTP/1.1" 200 OK
[2025-10-12 22:15:32] Initialization failed. warmup error: Traceback (most recent call last):
requests.exceptions.ReadTimeout: HTTPConnectionPool(host='127.0.0.1', port=30000): Read timed out. (read timeout=600)
""")

case("wu-stack-warmup-thread", "warmup_request", "stalled", tp=1,
     stacks={"reported": """Thread 5120 (idle): "Thread-2 (_wait_and_warmup)"
    readinto (socket.py:720)
    _read_status (http/client.py:292)
    begin (http/client.py:331)
    getresponse (http/client.py:1428)
    _make_request (urllib3/connectionpool.py:516)
    urlopen (urllib3/connectionpool.py:793)
    send (requests/adapters.py:667)
    post (requests/api.py:115)
    _execute_server_warmup (sglang/srt/entrypoints/http_server.py:1150)
    _wait_and_warmup (sglang/srt/entrypoints/http_server.py:1205)
"""})

# =========================================================================== flashinfer_arch

case("fi-sglang-5090-default-silent", "flashinfer_arch", "stalled", gpu="NVIDIA GeForce RTX 5090", cc="12.0", tp=1, version="0.4.6.post1",
     cmdline="python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --port 30000",
     log="""[2025-05-02 21:12:03] Attention backend not set. Use flashinfer backend by default.
[2025-05-02 21:12:14] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=15.97 GB, mem usage=14.45 GB.
[2025-05-02 21:12:14] KV Cache is allocated. #tokens: 215302, K size: 5.75 GB, V size: 5.75 GB
[2025-05-02 21:12:14] Memory pool end. avail mem=3.83 GB
""")

case("fi-trtllm-unsupported-arch", "flashinfer_arch", "crashed", why=ENDED_IN_ERROR, gpu="NVIDIA RTX PRO 6000 Blackwell Server Edition", cc="12.0", tp=2,
     log="""[2026-04-20 17:31:02 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/flashinfer/prefill.py", line 3380, in trtllm_ragged_attention_deepseek
    run_func(
RuntimeError: Error in function 'TllmGenFmhaRunner' at /workspace/include/flashinfer/trtllm/fmha/fmhaRunner.cuh:30: Unsupported architecture
""")

case("fi-nvcc-unsupported-gpu-arch", "flashinfer_arch", "crashed", why=ENDED_IN_ERROR, engine="vllm", gpu="NVIDIA GeForce RTX 5080", cc="12.0", tp=1,
     log="""FAILED: batch_decode_with_kv_cache_dtype_q_bf16/batch_decode.cuda.o
/usr/local/cuda-12.4/bin/nvcc --generate-dependencies-with-compile -gencode=arch=compute_120a,code=sm_120a -c flashinfer/data/csrc/batch_decode.cu
nvcc fatal   : Unsupported gpu architecture 'compute_120a'
ninja: build stopped: subcommand failed.
""")

case("fi-ptxas-sm120-not-defined", "flashinfer_arch", "crashed", why=ENDED_IN_ERROR, gpu="NVIDIA GeForce RTX 5090", cc="12.0", tp=1,
     log="""[2025-04-02 10:21:40] Capture cuda graph begin. This can take up to several minutes. avail mem=5.12 GB
ptxas fatal   : Value 'sm_120' is not defined for option 'gpu-name'
Exception: Capture cuda graph failed: Internal Triton PTX codegen error
""")

case("fi-meta-vllm-flashinfer-env-5090", "flashinfer_arch", "stalled", engine="vllm", gpu="NVIDIA GeForce RTX 5090", cc="12.0", tp=1,
     cmdline="vllm serve Qwen/Qwen3-8B --max-model-len 16384",
     env={"VLLM_ATTENTION_BACKEND": "FLASHINFER"})

case("fi-sm121-no-kernel-image", "flashinfer_arch", "crashed", why=ENDED_IN_ERROR, gpu="NVIDIA GB10", cc="12.1", tp=1,
     log="""  File "/usr/local/lib/python3.12/dist-packages/flashinfer/norm.py", line 86, in rmsnorm
    get_norm_module().rmsnorm(out, input, weight, eps, enable_pdl)
RuntimeError: RMSNorm failed with error code no kernel image is available for execution on the device
""")

# =========================================================================== dead_rank

case("dr-scheduler-died-minus9", "dead_rank", "crashed", why=ENDED_IN_ERROR, gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=8,
     log="""[2026-02-10 04:40:12 TP5] Load weight begin. avail mem=78.33 GB
Multi-thread loading shards:  61% Completed | 100/163 [03:01<01:54,  1.82s/it]
[2026-02-10 04:43:20] Rank 5 scheduler died during initialization (exit code: -9). If this is an out-of-memory (OOM) kill, consider lowering host memory usage.
""")

case("dr-dmesg-oom-killer", "dead_rank", "stalled", engine="vllm", gpu="NVIDIA A10G", cc="8.6", tp=4,
     log="""(VllmWorker rank=2 pid=3141) INFO 06-12 01:02:03 [default_loader.py:272] Loading weights took 42.17 seconds
""",
     dmesg="""[1203441.221340] Out of memory: Killed process 3141 (VLLM::Worker_TP2) total-vm:61238120kB, anon-rss:30183320kB, file-rss:102400kB, shmem-rss:0kB, UID:0 pgtables:68432kB oom_score_adj:0
""")

case("dr-vllm-worker-died-unexpectedly", "dead_rank", "crashed", why=ENDED_IN_ERROR, engine="vllm", tp=2,
     log="""(EngineCore_0 pid=2012) ERROR 10-11 03:11:47 [multiproc_executor.py:149] Worker proc VllmWorker-1 died unexpectedly, shutting down executor.
""")

# =========================================================================== driver_or_xid

case("dx-xid79-fallen-off-bus", "driver_or_xid", "stalled", engine="vllm", gpu="NVIDIA A100-SXM4-80GB", cc="8.0", tp=8,
     dmesg="""[Tue Jan 21 03:12:44 2025] NVRM: GPU at PCI:0000:4e:00: GPU-9f2c1a3e-77aa-2b3c-8d9e-0f1a2b3c4d5e
[Tue Jan 21 03:12:44 2025] NVRM: Xid (PCI:0000:4e:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
""")

case("dx-nvml-unknown-error", "driver_or_xid", "crashed", why=ENDED_IN_ERROR, engine="vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=4,
     log="""Unable to determine the device handle for GPU0000:1B:00.0: Unknown Error
RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable
""")

# =========================================================================== nccl_init

case("ni-vllm-v1-nccl-debug-bootstrap", "nccl_init", "stalled", engine="vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=4,
     env={"NCCL_DEBUG": "INFO", "NCCL_NVLS_ENABLE": "1"},
     log="""(VllmWorker rank=0 pid=14022) INFO 05-28 09:12:44 [pynccl.py:69] vLLM is using nccl==2.21.5
gpu-h100-03:14022:14022 [0] NCCL INFO Bootstrap : Using eth0:10.42.1.17<0>
gpu-h100-03:14022:14022 [0] NCCL INFO cudaDriverVersion 12040
gpu-h100-03:14022:14022 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
gpu-h100-03:14022:14113 [0] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)
gpu-h100-03:14022:14113 [0] NCCL INFO NET/IB : No device found.
gpu-h100-03:14022:14113 [0] NCCL INFO NET/Socket : Using [0]eth0:10.42.1.17<0>
""")

case("ni-stack-nccl-comm-init-rank", "nccl_init", "stalled", engine="vllm", gpu="NVIDIA H200", cc="9.0", tp=8,
     stacks={"reported": """Thread 3304 (idle): "MainThread"
    ncclCommInitRank (vllm/distributed/device_communicators/pynccl_wrapper.py:277)
    __init__ (vllm/distributed/device_communicators/pynccl.py:99)
    __init__ (vllm/distributed/device_communicators/cuda_communicator.py:39)
    __init__ (vllm/distributed/parallel_state.py:229)
    init_world_group (vllm/distributed/parallel_state.py:801)
    init_distributed_environment (vllm/distributed/parallel_state.py:951)
"""})

case("ni-sglang-init-begin-only", "nccl_init", "stalled", gpu="NVIDIA A100-SXM4-80GB", cc="8.0", tp=2, version="0.4.0",
     cmdline="python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3.1-70B-Instruct --tp 2 --enable-p2p-check",
     log="""[2024-12-09 14:41:11 TP0] Init torch distributed begin.
[2024-12-09 14:41:11 TP1] Init torch distributed begin.
""")

# =========================================================================== nccl_version_bug

case("nv-5090-old-nccl-version", "nccl_version_bug", "stalled", engine="vllm", gpu="NVIDIA GeForce RTX 5090", cc="12.0", tp=2,
     log="""INFO 03-20 15:11:08 [pynccl.py:69] vLLM is using nccl==2.21.5
(VllmWorker rank=1 pid=2210) INFO 03-20 15:11:08 [pynccl.py:69] vLLM is using nccl==2.21.5
""")

case("nv-b200-nccl-no-kernel-image", "nccl_version_bug", "crashed", why=ENDED_IN_ERROR, engine="vllm", gpu="NVIDIA B200", cc="10.0", tp=8,
     log="""b200-7:4410:4410 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
b200-7:4410:4520 [0] enqueue.cc:1522 NCCL WARN Cuda failure 'no kernel image is available for execution on the device'
b200-7:4410:4520 [0] NCCL INFO init.cc:1423 -> 1
""")

# =========================================================================== patch_or_user_code

case("pu-user-hook-stack", "patch_or_user_code", "stalled", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=2,
     stacks={"reported": """Thread 71002 (active): "MainThread"
    save (torch/serialization.py:943)
    dump_hidden_states (/home/researcher/probe/hooks.py:41)
    _call_impl (torch/nn/modules/module.py:1790)
    forward (sglang/srt/models/llama.py:398)
    capture_one_batch_size (sglang/srt/model_executor/cuda_graph_runner.py:574)
"""})

# =========================================================================== tokenizer_or_detokenizer

case("tk-stack-hub-download", "tokenizer_or_detokenizer", "stalled", tp=1,
     stacks={"reported": """Thread 2210 (idle): "MainThread"
    recv_into (ssl.py:1304)
    readinto (socket.py:720)
    _get_metadata_or_catch_error (huggingface_hub/file_download.py:1533)
    hf_hub_download (huggingface_hub/file_download.py:1010)
    cached_file (transformers/utils/hub.py:403)
    from_pretrained (transformers/models/auto/tokenization_auto.py:881)
    get_tokenizer (sglang/srt/hf_transformers_utils.py:195)
    __init__ (sglang/srt/managers/tokenizer_manager.py:210)
"""})

case("tk-hub-429", "tokenizer_or_detokenizer", "crashed", why=ENDED_IN_ERROR, engine="vllm", tp=1,
     log="""huggingface_hub.errors.HfHubHTTPError: 429 Client Error: Too Many Requests for url: https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/tokenizer_config.json
""")

# =========================================================================== arch_kernel_hang

case("ak-sampler-stack-5090", "arch_kernel_hang", "stalled", engine="vllm", gpu="NVIDIA GeForce RTX 5090", cc="12.0", tp=1,
     stacks={"reported": """Thread 9001 (active): "MainThread"
    top_k_top_p_sampling_from_probs (flashinfer/sampling.py:921)
    flashinfer_sample (vllm/v1/sample/ops/topk_topp_sampler.py:290)
    forward_cuda (vllm/v1/sample/ops/topk_topp_sampler.py:111)
    sample (vllm/v1/sample/sampler.py:114)
    _dummy_sampler_run (vllm/v1/worker/gpu_model_runner.py:2468)
"""})

# =========================================================================== autotune_rank_desync

case("at-flashinfer-autotune-split", "autotune_rank_desync", "stalled", gpu="NVIDIA B200", cc="10.0", tp=4,
     log="""[2026-01-15 06:30:11 TP0] Running FlashInfer autotune...
[2026-01-15 06:30:11 TP1] Running FlashInfer autotune...
[2026-01-15 06:30:11 TP2] Running FlashInfer autotune...
[2026-01-15 06:30:11 TP3] Running FlashInfer autotune...
[2026-01-15 06:30:14 TP2] FlashInfer autotune completed.
[2026-01-15 06:30:14 TP3] FlashInfer autotune completed.
""")

# =========================================================================== cpu_thread_oversubscription

case("cpu-omp-resource-unavailable", "cpu_thread_oversubscription", "crashed", why=ENDED_IN_ERROR, engine="vllm", tp=8,
     log="""OMP: Error #34: System unable to allocate necessary resources for OMP thread:
OMP: System error #11: Resource temporarily unavailable
OMP: Hint Try decreasing the value of OMP_NUM_THREADS.
""")

# =========================================================================== kv_cache_alloc

case("kv-high-mem-fraction-after-load", "kv_cache_alloc", "stalled", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=4,
     cmdline="python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-72B-Instruct --tp 4 --mem-fraction-static 0.95",
     log="""[2025-06-22 10:02:55 TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=44.06 GB, mem usage=35.90 GB.
[2025-06-22 10:02:55 TP2] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=44.08 GB, mem usage=35.90 GB.
[2025-06-22 10:02:55 TP1] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=44.02 GB, mem usage=35.90 GB.
[2025-06-22 10:02:56 TP3] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=44.11 GB, mem usage=35.90 GB.
""")

# =========================================================================== shm_too_small

case("shm-nccl-warn-segment", "shm_too_small", "crashed", why=ENDED_IN_ERROR, engine="vllm", tp=4,
     log="""node1:312:390 [2] NCCL INFO Channel 00 : 2[2] -> 3[3] via SHM/direct/direct
node1:312:390 [2] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device
node1:312:390 [2] include/shm.h:48 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-3Fa9xK (size 9637888)
""")

case("shm-docker-64m-meta", "shm_too_small", "stalled", engine="vllm", tp=2,
     cmdline="docker run --gpus all --shm-size 64m -p 8000:8000 vllm/vllm-openai:latest --model Qwen/Qwen2.5-14B-Instruct --tensor-parallel-size 2")

case("shm-bus-error", "shm_too_small", "crashed", why=ENDED_IN_ERROR, engine="vllm", tp=2,
     log="""(VllmWorker rank=1 pid=311) INFO 07-02 09:01:12 [pynccl.py:69] vLLM is using nccl==2.26.2
Bus error (core dumped)
""")

# =========================================================================== healthy starts, live loop

case("healthy-sglang-init-begin-5s", None, "starting", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=2, quiet=5,
     log="""[2026-01-01 12:00:00 TP0] Init parallel begin.
[2026-01-01 12:00:00 TP1] Init parallel begin.
[2026-01-01 12:00:01 TP0] sglang is using nccl==2.27.5
""")

case("healthy-vllm-starting-load-10s", None, "starting", engine="vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=1, quiet=10,
     log="""INFO 09-01 08:14:01 [core.py:70] Initializing a V1 LLM engine (v0.10.1) with config: model='Qwen/Qwen3-8B'
INFO 09-01 08:14:05 [gpu_model_runner.py:1953] Starting to load model Qwen/Qwen3-8B...
""")

case("healthy-sglang-capture-begin-20s", None, "starting", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=2, quiet=20,
     log="""[2026-01-01 12:00:30 TP0] Memory pool end. avail mem=20.66 GB
[2026-01-01 12:00:31 TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=20.50 GB
[2026-01-01 12:00:31 TP1] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=20.52 GB
""")

case("healthy-sglang-uvicorn-5s", None, "starting", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=1, quiet=5,
     log="""[2026-01-01 12:01:00] INFO:     Application startup complete.
[2026-01-01 12:01:00] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)
""")

case("healthy-vllm-registering-10s", None, "starting", engine="vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=2, quiet=10,
     log="""(Worker_TP0 pid=2231) INFO 10-02 05:51:40 [gpu_model_runner.py:2653] Model loading took 13.2 GiB and 12.4 seconds
(Worker_TP0 pid=2231) INFO 10-02 05:52:40 [custom_all_reduce.py:203] Registering 4515 cuda graph addresses
""")

# =========================================================================== more report shapes

case("p2p-watchdog-first-allreduce-a5000", "nccl_p2p_topology", "crashed", why=ENDED_IN_ERROR, engine="vllm", gpu="NVIDIA RTX A5000", cc="8.6", tp=2,
     log="""INFO 08-02 11:20:15 model_runner.py:1008] Loading model weights took 7.1441 GB
[rank1]:[E802 11:30:16.311820470 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600041 milliseconds before timing out.
""")

case("p2p-nccl-peer-access-warn", "nccl_p2p_topology", "crashed", why=ENDED_IN_ERROR, engine="vllm", gpu="NVIDIA GeForce RTX 3090", cc="8.6", tp=2,
     log="""ws:1201:1290 [0] transport/p2p.cc:275 NCCL WARN Cuda failure 'peer access is not supported between these two devices'
ws:1201:1290 [0] NCCL INFO transport/p2p.cc:327 -> 1
""")

case("ni-unique-id-socket-timeout", "nccl_init", "crashed", why=ENDED_IN_ERROR, engine="vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=2,
     log="""torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout
Exception raised from recvBytes at ../torch/csrc/distributed/c10d/Utils.hpp:670 (most recent call first):
""")

case("dr-vllm-failed-core-proc-9", "dead_rank", "crashed", why=ENDED_IN_ERROR, engine="vllm", gpu="NVIDIA L4", cc="8.9", tp=1,
     log="""(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': -9}
""")

case("dr-sglang-04-child-failed", "dead_rank", "stalled", gpu="NVIDIA A100-SXM4-80GB", cc="8.0", tp=4, version="0.4.0",
     log="""[2024-12-02 10:11:52 TP1] Load weight begin. avail mem=78.10 GB
[2024-12-02 10:13:40] Child process unexpectedly failed with exitcode=9. pid=48122
""")

case("fi-vllm-011-flashinfer-attention-5090", "flashinfer_arch", "stalled", engine="vllm", gpu="NVIDIA GeForce RTX 5090", cc="12.0", tp=1,
     log="""(EngineCore_DP0 pid=311) INFO 10-08 22:10:02 [cuda.py:403] Using FLASHINFER attention backend out of potential backends: ['FLASHINFER', 'TRITON_ATTN']
(EngineCore_DP0 pid=311) INFO 10-08 22:10:19 [default_loader.py:267] Loading weights took 15.02 seconds
(EngineCore_DP0 pid=311) INFO 10-08 22:10:20 [gpu_model_runner.py:2653] Model loading took 15.2683 GiB and 16.001 seconds
""")

case("mn-gloo-closed-by-peer", "multinode_rendezvous", "crashed", why=ENDED_IN_ERROR, engine="vllm", tp=8, nnodes=2,
     log="""[E ProcessGroupGloo.cpp:138] Gloo connectFullMesh failed with [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:446] Connection closed by peer [10.0.0.2]:21234
""")

case("mn-nccl-socket-docker0", "multinode_rendezvous", "crashed", why=ENDED_IN_ERROR, engine="vllm", tp=16, nnodes=2,
     log="""node-a:221:221 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0> [1]eth0:10.1.0.5<0>
node-a:221:303 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/Socket/0
node-a:221:303 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer 172.17.0.1<36512>
""")

case("cg-vllm-v0-capturing-decoding", "cuda_graph_capture", "stalled", engine="vllm", gpu="NVIDIA A100-SXM4-80GB", cc="8.0", tp=1,
     log="""INFO 05-11 09:00:41 model_runner.py:254] Loading model weights took 13.4966 GB
INFO 05-11 09:00:43 gpu_executor.py:83] # GPU blocks: 27849, # CPU blocks: 2048
INFO 05-11 09:00:45 model_runner.py:867] Capturing cudagraphs for decoding. This may lead to unexpected consequences if the model is not static. To run the model in eager mode, set 'enforce_eager=True' or use '--enforce-eager' in the CLI.
INFO 05-11 09:00:45 model_runner.py:871] CUDA graphs can take additional 1~3 GiB memory per GPU. If you are running out of memory, consider decreasing `gpu_memory_utilization` or enforcing eager mode. You can also reduce the `max_num_seqs` as needed to decrease memory usage.
""")

case("tk-trust-remote-code-prompt", "tokenizer_or_detokenizer", "stalled", engine="vllm", tp=1,
     log="""The repository for /models/internlm2-chat-20b contains custom code which must be executed to correctly load the model. You can inspect the repository content at https://hf.co//models/internlm2-chat-20b.
You can avoid this prompt in future by passing the argument `trust_remote_code=True`.

Do you wish to run the custom code? [y/N]
""")

case("shm-nccl-unhandled-system-error", "shm_too_small", "crashed", why=ENDED_IN_ERROR, engine="vllm", tp=2,
     log="""torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5
ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.
Last error:
Error while creating shared memory segment /dev/shm/nccl-vzIpS6 (size 9637888)
""")

case("dx-d-state-after-kv", "driver_or_xid", "stalled", engine="vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=1,
     log="""(EngineCore_0 pid=5120) INFO 09-21 02:14:31 [kv_cache_utils.py:849] GPU KV cache size: 401,568 tokens
""",
     procs=[{"pid": 5101, "ppid": 1, "cmdline": "vllm serve Qwen/Qwen3-8B", "role": "launcher", "rank": None, "state": "S", "cpu_percent": 0.0, "rss_mib": 900, "alive": True, "exit_code": None},
            {"pid": 5120, "ppid": 5101, "cmdline": "VLLM::EngineCore", "role": "engine_core", "rank": None, "state": "D", "cpu_percent": 0.0, "rss_mib": 4100, "alive": True, "exit_code": None}])

case("w-sglang-load-begin-nfs", "weight_loading_io", "stalled", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=2,
     cmdline="python3 -m sglang.launch_server --model-path /mnt/nfs/models/Qwen2.5-72B-Instruct --tp 2",
     log="""[2025-07-01 08:00:03 TP0] Load weight begin. avail mem=78.51 GB
[2025-07-01 08:00:03 TP1] Load weight begin. avail mem=78.49 GB
""")

case("port-vllm-routes-no-uvicorn-v1", "port_in_use", "stalled", engine="vllm", tp=1,
     log="""(APIServer pid=1) INFO 10-03 08:11:20 [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8000
(APIServer pid=1) INFO 10-03 08:11:20 [launcher.py:36] Available routes are:
(APIServer pid=1) INFO 10-03 08:11:20 [launcher.py:44] Route: /openapi.json, Methods: GET, HEAD
(APIServer pid=1) INFO 10-03 08:11:20 [launcher.py:44] Route: /health, Methods: GET
(APIServer pid=1) INFO 10-03 08:11:20 [launcher.py:44] Route: /v1/chat/completions, Methods: POST
""")

case("wu-first-prefill-never-returns", "warmup_request", "stalled", tp=2, gpu="NVIDIA H100 80GB HBM3", cc="9.0",
     log="""[2025-09-10 14:10:02] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2025-09-10 14:10:03] INFO:     127.0.0.1:45210 - "GET /get_model_info HTTP/1.1" 200 OK
[2025-09-10 14:10:03 TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0
""")

case("cpu-libgomp-thread-creation", "cpu_thread_oversubscription", "crashed", why=ENDED_IN_ERROR, tp=8,
     log="""libgomp: Thread creation failed: Resource temporarily unavailable
""")

# =========================================================================== meta-only and odd shapes

case("p2p-meta-l20-tp4-sglang", "nccl_p2p_topology", "stalled", gpu="NVIDIA L20", cc="8.9", tp=4,
     cmdline="python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4 --tp 4")

case("p2p-meta-3090-tp2-vllm-v0", "nccl_p2p_topology", "stalled", engine="vllm", gpu="NVIDIA GeForce RTX 3090", cc="8.6", tp=2,
     env={"CUDA_VISIBLE_DEVICES": "0,1"})

case("jit-meta-vllm-compilation-config", "jit_compile_slow", "progressing", engine="vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=1,
     cmdline="vllm serve meta-llama/Llama-3.1-8B-Instruct -O3 --compilation-config '{\"cudagraph_mode\": \"FULL_AND_PIECEWISE\"}'")

case("jit-meta-flashinfer-h100-first-start", "jit_compile_slow", "progressing", engine="vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=1,
     cmdline="vllm serve Qwen/Qwen3-8B", env={"VLLM_ATTENTION_BACKEND": "FLASHINFER"})

case("mn-meta-vllm-headless", "multinode_rendezvous", "stalled", engine="vllm", gpu="NVIDIA H200", cc="9.0", tp=8,
     cmdline="vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8 --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-start-rank 2 --data-parallel-address 10.99.48.128 --data-parallel-rpc-port 13345 --headless")

case("mn-meta-sglang-node-rank1", "multinode_rendezvous", "stalled", gpu="NVIDIA A100-SXM4-80GB", cc="8.0", tp=16, nnodes=None,
     cmdline="python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-405B-Instruct-FP8 --tp 16 --dist-init-addr 10.0.0.5:20000 --node-rank 1")

case("wu-meta-host-ipv6-wildcard", "warmup_request", "stalled", tp=1,
     cmdline="python3 -m sglang.launch_server --model-path Qwen/Qwen3-4B --host :: --port 30000")

case("wu-watchdog-on-warmup", "warmup_request", "crashed", why=ENDED_IN_ERROR, gpu="NVIDIA H20", cc="9.0", tp=8,
     log="""[2025-08-01 13:20:10] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2025-08-01 13:20:11] INFO:     127.0.0.1:39122 - "GET /get_model_info HTTP/1.1" 200 OK
[2025-08-01 13:25:12 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)
""")

case("port-sglang-zmq-in-use", "port_in_use", "crashed", why=ENDED_IN_ERROR, tp=1,
     log="""  File "zmq/backend/cython/socket.pyx", line 931, in zmq.backend.cython.socket.Socket.bind
zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:30001')
""")

case("port-live-ss-holder", "port_in_use", "stalled", tp=1,
     cmdline="python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --port 30000",
     ports="""State  Recv-Q Send-Q Local Address:Port  Peer Address:Port Process
LISTEN 0      2048         0.0.0.0:30000      0.0.0.0:*     users:(("python3",pid=2201,fd=31))
""",
     procs=[{"pid": 5000, "ppid": 1, "cmdline": "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --port 30000", "role": "launcher", "rank": None, "state": "S", "cpu_percent": 1.0, "rss_mib": 1200, "alive": True, "exit_code": None},
            {"pid": 5040, "ppid": 5000, "cmdline": "sglang::scheduler", "role": "scheduler", "rank": None, "state": "S", "cpu_percent": 0.0, "rss_mib": 6000, "alive": True, "exit_code": None}])

case("lock-hf-download-lock-not-jit", "weight_loading_io", "stalled", engine="vllm", tp=1,
     log="""DEBUG 05-02 10:01:02 filelock: Lock 139912 not acquired on /root/.cache/huggingface/hub/.locks/models--Qwen--Qwen2.5-32B-Instruct/1f5a.lock, waiting 0.05 seconds ...
INFO 05-02 10:00:58 [gpu_model_runner.py:1329] Starting to load model Qwen/Qwen2.5-32B-Instruct...
""")

case("dx-cuda-802-fabricmanager", "driver_or_xid", "crashed", why=ENDED_IN_ERROR, engine="vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=8,
     log="""RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized
""")

case("kv-hicache-host-alloc-last", "kv_cache_alloc", "stalled", gpu="NVIDIA H200", cc="9.0", tp=8,
     log="""[2025-11-03 16:40:22 TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=52.10 GB, mem usage=86.33 GB.
[2025-11-03 16:40:25 TP0] KV Cache is allocated. #tokens: 612000, KV size: 40.05 GB
[2025-11-03 16:40:25 TP0] Allocating 480.00 GB host memory for hierarchical KV cache.
""")

case("pu-dump-marker-print", "patch_or_user_code", "stalled", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=2,
     log="""[2025-10-01 10:00:31 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=12.03 GB
>>> dumping layer 12 hidden states to /tmp/hs_dump/bs_1.pt
>>> dumping layer 12 hidden states to /tmp/hs_dump/bs_2.pt
""")

case("shm-torch-mmap-cannot-allocate", "shm_too_small", "crashed", why=ENDED_IN_ERROR, engine="vllm", tp=2,
     log="""RuntimeError: unable to mmap 1048576 bytes from file </torch_231_1847710583_0>: Cannot allocate memory (12)
""")

case("ni-nvls-last-b200", "nccl_init", "stalled", engine="vllm", gpu="NVIDIA B200", cc="10.0", tp=8,
     log="""b200-2:771:771 [0] NCCL INFO NCCL version 2.26.2+cuda12.8
b200-2:771:902 [0] NCCL INFO NVLS multicast support is available on dev 0 (NVLS_NCHANNELS 24)
b200-2:771:902 [0] NCCL INFO NVLS comm 0x55e1 headRank 0 nHeads 8 nvlsRanks 8 buffSize 1048576 nvlsPerRankSize 201326592 nvlsTotalSize 1610612736
""")

case("cg-sglang-05-bs-tqdm-stuck-0", "cuda_graph_capture", "stalled", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=2,
     log="""[2026-02-01 10:10:01 TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=22.10 GB
Capturing batches (bs=256 avail_mem=21.99 GB):   0%|          | 0/36 [00:00<?, ?it/s]
""")

case("tk-sglang-tokenizer-manager-exception", "tokenizer_or_detokenizer", "crashed", why=ENDED_IN_ERROR, tp=1,
     log="""[2025-04-01 09:00:02] TokenizerManager hit an exception: Traceback (most recent call last):
OSError: Can't load tokenizer for 'mistralai/Mistral-7B-Instruct-v0.3'. If you were trying to load it from 'https://huggingface.co/models', make sure you don't have a local directory with the same name.
""")

case("w-vllm-v1-bar-crawl-prefixed", "weight_loading_io", "progressing", engine="vllm", gpu="NVIDIA A100-SXM4-80GB", cc="8.0", tp=4,
     log="""(Worker_TP0 pid=812) INFO 10-10 12:01:00 [gpu_model_runner.py:2602] Starting to load model /mnt/blob/Qwen3-235B-A22B...
(Worker_TP0 pid=812) Loading safetensors checkpoint shards:  10% Completed | 12/118 [11:40<1:43:02, 58.33s/it]
""")


# =========================================================================== first failure (issue 9)
# One probe per mechanism fixed from the dev corpus, in another engine, release or wording: the rule
# must get the mechanism, not the report it was found in.

case("ff-zmq-bind-cut-sglang", "port_in_use", "crashed", why=ENDED_IN_ERROR, tp=2,
     log="""[2025-09-02 11:00:01] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tp_size=2, port=30000)
[2025-09-02 11:00:05] TokenizerManager hit an exception: Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/managers/tokenizer_manager.py", line 190, in __init__
    self.send_to_scheduler = get_zmq_socket(context, zmq.PUSH, port_args.scheduler_input_ipc_name, True)
  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/utils.py", line 1720, in get_zmq_socket
    socket.bind(endpoint)
  File "/usr/local/lib/python3.10/dist-packages/zmq/sugar/socket.py", line 302, in bind
    super().bind(addr)
""")

case("ff-car-error-in-worker-wrapper-vllm", "custom_allreduce", "crashed", why=ENDED_IN_ERROR, engine="vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=4,
     log="""(Worker_TP1 pid=2210) ERROR 03-11 08:14:52 [multiproc_executor.py:671] RuntimeError: CUDA error: invalid argument (at /workspace/csrc/custom_all_reduce.cuh:368)
(EngineCore_DP0 pid=2101) ERROR 03-11 08:14:53 [core.py:844] EngineCore failed to start.
(EngineCore_DP0 pid=2101) ERROR 03-11 08:14:53 [core.py:844] RuntimeError: Worker failed with error 'CUDA error: invalid argument', please check the stack trace above for the root cause
(APIServer pid=2000) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
""")

case("ff-peer-access-name-terminate", "custom_allreduce", "crashed", why=ENDED_IN_ERROR, engine=None, gpu="NVIDIA GeForce RTX 3090", cc="8.6", tp=2,
     log="""[TensorRT-LLM][INFO] Initializing MPI with thread mode 3
terminate called after throwing an instance of 'tensorrt_llm::common::TllmException'
  what():  [TensorRT-LLM][ERROR] CUDA runtime error in cudaDeviceEnablePeerAccess(peerDevice, 0): cudaErrorPeerAccessUnsupported (/src/tensorrt_llm/cpp/tensorrt_llm/runtime/ipcUtils.cpp:48)
""")

case("ff-nvls-fabric-in-torch-error", "driver_or_xid", "crashed", why=ENDED_IN_ERROR, gpu="NVIDIA H200", cc="9.0", tp=8,
     log="""[2025-11-20 02:10:11 TP3] Init torch distributed begin.
dgx-07:88124:88390 [3] NCCL INFO NVLS multicast support is available on dev 3
dgx-07:88124:88390 [3] transport/nvls.cc:201 NCCL WARN Cuda failure 1 'invalid argument'
dgx-07:88124:88390 [3] NCCL INFO transport/nvls.cc:402 -> 1
[2025-11-20 02:10:13 TP3] Scheduler hit an exception: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3
""")

case("ff-nccl-enqueue-cuda-failure-vllm", "nccl_version_bug", "crashed", why=ENDED_IN_ERROR, engine="vllm", gpu="NVIDIA A100-SXM4-80GB", cc="8.0", tp=2,
     log="""(Worker_TP0 pid=301) INFO 05-02 10:00:01 [pynccl.py:70] vLLM is using nccl==2.25.1
gpu-a:301:301 [0] enqueue.cc:1556 NCCL WARN Cuda failure 1 'invalid argument'
gpu-a:301:301 [0] NCCL INFO group.cc:250 -> 1
(Worker_TP0 pid=301) ERROR 05-02 10:00:03 [multiproc_executor.py:671] RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)
""")

case("ff-bootstrap-no-interface", "nccl_init", "crashed", why=ENDED_IN_ERROR, engine=None, tp=4, nnodes=1,
     cmdline="torchrun --nproc-per-node 4 bench.py",
     log="""pod-0:55:55 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so.
pod-0:55:55 [0] bootstrap.cc:102 NCCL WARN Bootstrap : no socket interface found
pod-0:55:55 [0] NCCL INFO init.cc:1788 -> 3
""")

case("ff-flashinfer-jit-build-gb10", "flashinfer_arch", "crashed", why=ENDED_IN_ERROR, gpu="NVIDIA GB10", cc="12.1", tp=1,
     log="""[2025-12-01 09:12:40] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=96.10 GB
[2025-12-01 09:12:44] Scheduler hit an exception: Traceback (most recent call last):
  File "/opt/venv/lib/python3.12/site-packages/sglang/srt/layers/attention/flashinfer_backend.py", line 132, in __init__
    self.prefill_wrapper_ragged = BatchPrefillWithRaggedKVCacheWrapper(self.workspace_buffer, "NHD")
  File "/opt/venv/lib/python3.12/site-packages/flashinfer/prefill.py", line 2310, in __init__
    self._cached_module = get_batch_prefill_module("fa2")
  File "/opt/venv/lib/python3.12/site-packages/flashinfer/jit/core.py", line 301, in build_and_load
    self.build(verbose)
RuntimeError: Ninja build failed.
""")

case("ff-proxy-page-in-warmup", "warmup_request", "stalled", tp=1,
     log="""[2025-06-10 14:00:20] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2025-06-10 14:00:21] Initialization failed. warmup error: <HTML><HEAD><TITLE>Proxy Error</TITLE></HEAD><BODY><H1>502 Proxy Error</H1>The proxy server could not handle the request GET /get_model_info</BODY></HTML>
""")

case("ff-shm-sigbus-gdb-pytorch", "shm_too_small", "crashed", why=ENDED_BY_SIGNAL, engine=None, tp=None,
     stacks={"reported": """Thread 57 "python" received signal SIGBUS, Bus error.
#0  0x00007fb1d01a2c88 in ncclShmOpen () from /usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib/libnccl.so.2
#1  0x00007fb1d01a06a1 in shmSendProxyConnect () from /usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib/libnccl.so.2
#2  0x00007fb1d018f1c2 in proxyConnInit () from /usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib/libnccl.so.2
#3  0x00007fb20c894ac3 in start_thread () from /lib/x86_64-linux-gnu/libc.so.6
"""})

case("ff-store-timeouts-one-node", "nccl_init", "stalled", engine="vllm", tp=2, nnodes=1,
     log="""[W1110 09:01:00.000 socket.cpp:755] [c10d] The client socket has timed out after 600s while trying to connect to (192.168.64.3, 41233).
[W1110 09:11:00.000 socket.cpp:755] [c10d] The client socket has timed out after 600s while trying to connect to (192.168.64.3, 41233).
""")

case("ff-file-baton-torch-extension", "jit_lock_deadlock", "stalled", tp=1,
     stacks={"TP0": """Thread 4411 (idle): "MainThread"
    wait (torch/utils/file_baton.py:42)
    _jit_compile (torch/utils/cpp_extension.py:1742)
    load (torch/utils/cpp_extension.py:1312)
    _load_kernels (sgl_kernel/jit_ops.py:88)
    <module> (sgl_kernel/jit_ops.py:120)
"""})

case("ff-launch-blocking-native", "nccl_version_bug", "stalled", engine=None, tp=2,
     env={"CUDA_LAUNCH_BLOCKING": "1"},
     stacks={"rank0": """Thread 9001 (idle): "MainThread"
    ioctl (libc.so.6)
    cudaLaunchKernel (libcudart.so.11.0)
    ncclLaunchKernel(ncclComm*, ncclKernelPlan*) (libnccl.so.2)
    ncclGroupEndInternal() (libnccl.so.2)
    ncclGroupEnd (libnccl.so.2)
    c10d::ProcessGroupNCCL::allreduce (libtorch_cuda.so)
"""})

# =========================================================================== how a start ended (state)
# Another release's wording of "the start ended in its error": vLLM V1's EngineCore traceback under
# process prefixes, the front-end's consequence last. Nothing moves after it: crashed.
case("end-vllm-v1-zmq-bind-crashed", "port_in_use", "crashed", engine="vllm", version="0.11.0", tp=2,
     log="""(APIServer pid=2211) INFO 10-14 08:01:02 [api_server.py:1839] vLLM API server version 0.11.0
(APIServer pid=2211) INFO 10-14 08:01:02 [utils.py:233] non-default args: {'model': 'Qwen/Qwen3-14B', 'tensor_parallel_size': 2}
(EngineCore_DP0 pid=2380) INFO 10-14 08:01:20 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: model='Qwen/Qwen3-14B'
(EngineCore_DP0 pid=2380) ERROR 10-14 08:01:21 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=2380) ERROR 10-14 08:01:21 [core.py:708] Traceback (most recent call last):
(EngineCore_DP0 pid=2380) ERROR 10-14 08:01:21 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 84, in _init_executor
(EngineCore_DP0 pid=2380) ERROR 10-14 08:01:21 [core.py:708]     self.rpc_broadcast_mq = MessageQueue(self.world_size, self.world_size)
(EngineCore_DP0 pid=2380) ERROR 10-14 08:01:21 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/device_communicators/shm_broadcast.py", line 260, in __init__
(EngineCore_DP0 pid=2380) ERROR 10-14 08:01:21 [core.py:708]     self.local_socket.bind(socket_addr)
(EngineCore_DP0 pid=2380) ERROR 10-14 08:01:21 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/zmq/sugar/socket.py", line 311, in bind
(EngineCore_DP0 pid=2380) ERROR 10-14 08:01:21 [core.py:708]     super().bind(addr)
(EngineCore_DP0 pid=2380) ERROR 10-14 08:01:21 [core.py:708] zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:47263')
(APIServer pid=2211) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
""")

# One rank errors and the others carry on (their next phase lines follow the error), then wait for
# it at the next collective: the start has not ended, it stalls.
case("end-rank-error-peers-carry-on-stalled", "dead_rank", "stalled", engine="vllm", version="0.10.1",
     gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=4,
     log="""(VllmWorker TP0 pid=4401) INFO 09-02 11:20:01 [gpu_model_runner.py:1953] Starting to load model Qwen/Qwen3-32B...
(VllmWorker TP3 pid=4412) INFO 09-02 11:20:01 [gpu_model_runner.py:1953] Starting to load model Qwen/Qwen3-32B...
(VllmWorker TP3 pid=4412) ERROR 09-02 11:21:40 [multiproc_executor.py:596] WorkerProc hit an exception.
(VllmWorker TP3 pid=4412) ERROR 09-02 11:21:40 [multiproc_executor.py:596] Traceback (most recent call last):
(VllmWorker TP3 pid=4412) ERROR 09-02 11:21:40 [multiproc_executor.py:596]   File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/model_loader/weight_utils.py", line 478, in safetensors_weights_iterator
(VllmWorker TP3 pid=4412) ERROR 09-02 11:21:40 [multiproc_executor.py:596]     with safe_open(st_file, framework="pt") as f:
(VllmWorker TP3 pid=4412) ERROR 09-02 11:21:40 [multiproc_executor.py:596] OSError: No such device (os error 19)
(VllmWorker TP0 pid=4401) INFO 09-02 11:21:52 [default_loader.py:262] Loading weights took 110.83 seconds
(VllmWorker TP1 pid=4405) INFO 09-02 11:21:52 [default_loader.py:262] Loading weights took 110.91 seconds
(VllmWorker TP2 pid=4409) INFO 09-02 11:21:53 [default_loader.py:262] Loading weights took 111.02 seconds
""")

# A crash handler's backtrace in another project's format (glog's signal handler, as TensorFlow,
# Paddle and MXNet servers print it): SIGBUS in NCCL's proxy thread while it maps /dev/shm.
case("sig-glog-sigbus-nccl-proxy", "shm_too_small", "crashed", engine=None, tp=4,
     stacks={"crash": """*** Aborted at 1733011200 (unix time) try "date -d @1733011200" if you are using GNU date ***
PC: @     0x7f9c2e41a2b0 (unknown)
*** SIGBUS (@0x7f9b40000000) received by PID 5120 (TID 0x7f9b8dffb700) from PID 18446744073709551615; stack trace: ***
    @     0x7f9c3b8f0980 (unknown)
    @     0x7f9c2e41a2b0 ncclProxyConnect()
    @     0x7f9c2e41c9d1 ncclProxyService()
    @     0x7f9c3b8e56db start_thread
    @     0x7f9c3b20e71f clone
"""})


# Issue 19 (dev batch 3): the engines' own start-up checks and consequences that followed a first failure.

case("ff-sglang-unbalanced-memory-other-process", "gpu_memory_held", "crashed", why=ENDED_IN_ERROR, gpu="NVIDIA A100-SXM4-80GB", cc="8.0", tp=2,
     log="""[2025-06-03 10:12:40 TP0] Init torch distributed begin.
[2025-06-03 10:12:41 TP1] Init torch distributed begin.
[2025-06-03 10:12:44 TP1] Scheduler hit an exception: Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/model_executor/model_runner.py", line 512, in init_torch_distributed
    raise ValueError(
ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. min_per_gpu_memory=31.2, local_gpu_memory=78.9, local_gpu_memory * 0.9=71.01
""")

case("ff-kv-none-left-v1-shared-gpu", "gpu_memory_held", "crashed", why=ENDED_IN_ERROR, engine="vllm", gpu="NVIDIA L4", cc="8.9", tp=1,
     cmdline="vllm serve Qwen/Qwen2.5-0.5B-Instruct --gpu-memory-utilization 0.25 --port 8001",
     log="""(EngineCore_0 pid=811) INFO 05-02 09:01:12 [gpu_model_runner.py:1730] Model loading took 0.93 GiB and 2.1 seconds
(EngineCore_0 pid=811) ERROR 05-02 09:01:19 [core.py:586] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.
""")

case("ff-bind-failed-cpp-listener", "port_in_use", "crashed", why=ENDED_IN_ERROR, engine=None, tp=1,
     log="""I0412 08:00:01.112 grpc_server.cc:2451] Started GRPCInferenceService at 0.0.0.0:8001
E0412 08:00:01.114 http_server.cc:201] failed to bind HTTP server socket on 0.0.0.0:8000
error: creating server: Internal - failed to start HTTP service
""")

case("ff-uvicorn-workers-die-api-server", "tokenizer_or_detokenizer", "stalled", engine=None, tp=1,
     cmdline="python -m my_serving.api --workers 4 --model /models/llama-3-8b",
     log="""INFO:     Started parent process [9120]
INFO:     Waiting for child process [9133]
INFO:     Child process [9133] died
INFO:     Started server process [9201]
INFO:     Waiting for child process [9140]
INFO:     Child process [9140] died
""")

case("ff-warmup-error-then-killed-sglang", "warmup_request", "crashed", why=ENDED_IN_ERROR, tp=1,
     log="""[2025-04-02 08:10:02] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2025-04-02 08:10:03] Initialization failed. warmup error: Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/entrypoints/http_server.py", line 702, in _wait_and_warmup
    res = requests.post(url + request_name, json=json_data, headers=headers, timeout=600)
  File "/usr/local/lib/python3.10/dist-packages/requests/adapters.py", line 700, in send
    raise ConnectionError(e, request=request)
requests.exceptions.ConnectionError: HTTPConnectionPool(host='0.0.0.0', port=30000): Max retries exceeded with url: /generate (Caused by ProxyError('Unable to connect to proxy', OSError('Tunnel connection failed: 403 Forbidden')))
[2025-04-02 08:10:03] Rank 0 scheduler is dead. Please check if there are relevant logs.
Killed
""")


case("ff-capture-wraps-kernel-error-blackwell", "cuda_graph_capture", "crashed", why=ENDED_IN_ERROR, gpu="NVIDIA RTX PRO 6000 Blackwell Workstation Edition", cc="12.0", tp=2,
     log="""[2025-10-21 14:02:11 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=21.40 GB
[2025-10-21 14:02:12 TP0] Scheduler hit an exception: Traceback (most recent call last):
RuntimeError: CUDA error: invalid resource handle (at /sgl-kernel/csrc/elementwise/rope.cu:311)
Exception: Capture cuda graph failed: CUDA error: invalid resource handle
""")

case("ff-kv-component-oom-executor", "kv_cache_alloc", "crashed", why=ENDED_IN_ERROR, engine=None, gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=4,
     log="""[11/02/2025-08:12:40] [TRT-LLM] [I] Model weights loaded: 71.3 GiB per rank
[11/02/2025-08:12:44] [TRT-LLM] [RANK 2] [E] Out of memory while building the executor.
Failed to allocate component: KV cache (requested 9.80 GiB, free 3.12 GiB)
""")

case("ff-compile-took-minutes-sglang", "jit_compile_slow", "progressing", tp=2,
     log="""[2025-09-14 10:01:02 TP0] Load weight end. type=Qwen3MoeForCausalLM, dtype=torch.bfloat16, avail mem=41.02 GB
[2025-09-14 10:01:05 TP0] Compiling piecewise CUDA graphs for 52 token sizes
[2025-09-14 10:19:47 TP0] torch.compile took 1121.8 s for the piecewise graphs
""")


case("ff-xid-dbe-before-vllm-store-wait", "driver_or_xid", "crashed", why=ENDED_IN_ERROR, engine="vllm", gpu="NVIDIA A100-SXM4-80GB", cc="8.0", tp=8, nnodes=2,
     cmdline="vllm serve /models/Llama-3.1-405B-Instruct-FP8 --tensor-parallel-size 8 --pipeline-parallel-size 2",
     dmesg="[88123.4411] NVRM: Xid (PCI:0000:90:00): 48, pid=30122, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 2, subpartition 0.\n",
     log="""(EngineCore_DP0 pid=30011) INFO 03-18 22:14:02 [parallel_state.py:1165] world_size=16 rank=0 local_rank=0 distributed_init_method=tcp://10.0.4.11:29501 backend=nccl
(EngineCore_DP0 pid=30011) ERROR 03-18 22:24:03 [core.py:708] torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 8/16 clients joined.
""")


case("ff-hub-unreachable-sglang-config", "weight_loading_io", "crashed", why=ENDED_IN_ERROR, tp=1,
     log="""[2025-07-01 09:00:02] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', tp_size=1)
Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/huggingface_hub/file_download.py", line 1484, in _raise_on_head_call_error
    raise LocalEntryNotFoundError(
huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying to locate the file on the Hub and we cannot find the requested files in the local cache. Please check your connection and try again or make sure your Internet connection is on.
""")

case("ff-p2p-unavailable-then-abort-vllm", "custom_allreduce", "crashed", why=ENDED_IN_ERROR, engine="vllm", gpu="NVIDIA RTX A6000", cc="8.6", tp=4,
     log="""(VllmWorker TP0 pid=812) WARNING 02-10 10:01:13 [cuda_communicator.py:64] peer access is not available between GPU 0 and GPU 3
(VllmWorker TP0 pid=812) INFO 02-10 10:01:13 [custom_all_reduce.py:141] Registering 0 cuda graph addresses
terminate called after throwing an instance of 'c10::Error'
Aborted (core dumped)
""")


def main() -> None:
    for old in HERE.iterdir():
        if old.is_dir() and (old / "expected.json").exists() and old.name not in CASES:
            shutil.rmtree(old)
    for name, c in CASES.items():
        dest = HERE / name
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        (dest / "meta.json").write_text(json.dumps(c["meta"], indent=2) + "\n")
        (dest / "expected.json").write_text(json.dumps(c["expected"], indent=2) + "\n")
        for rel, text in c["files"].items():
            path = dest / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text if text.endswith("\n") else text + "\n")
    print(f"{len(CASES)} probe bundles in {HERE}")


if __name__ == "__main__":
    main()
