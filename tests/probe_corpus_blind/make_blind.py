"""Blind probes: report-shaped bundles written from docs/causes.md and the reference notes only,
without reading the rules or the other corpora. Regenerate: python tests/probe_corpus_blind/make_blind.py

Corrected after the first (blind) score, because the probes, not the rules, were unrealistic:
- three "progressing" probes (DeepGEMM warmup bar, vLLM torch.compile, vLLM NFS shard bar) had a
  measured `since_last_progress_s` of 20-90 s in meta.json; a pasted report has no measured quiet
  time, and a measured one says nothing moved (hangwatch needs < 15 s of quiet for `progressing`);
- the OMP oversubscription probe carried vLLM's "Reducing Torch parallelism" warning, which vLLM
  prints only when OMP_NUM_THREADS is unset, yet its env set OMP_NUM_THREADS=224;
- the NCCL-version probe named NCCL 2.27.3 on B200 "known bad" with nothing public behind it; it
  now shows a release that predates the GPU's architecture (2.21.5 on an RTX 5090).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
C = "\x1b[1;36m"
R = "\x1b[0;0m"


def v1(proc, pid, level, ts, f, msg):
    return f"({proc} pid={pid}) {level} {ts} [{f}] {msg}"


def v0(level, ts, f, msg):
    return f"{level} {ts} {f}] {msg}"


# The dev corpus (../shared/corpus/dev/INDEX.md, `state`) calls a start whose log ends in a fatal error, nothing after it, `crashed`.
ENDED_IN_ERROR = "relabelled stalled -> crashed: the log ends in its fatal error with nothing after it (the dev corpus index, `state`)"
WHY = {name: ENDED_IN_ERROR for name in (
    "port-sglang-uvicorn-errno98",
    "port-sglang-nccl-port-eaddrinuse",
    "dead-vllm-v0-worker-segv",
    "shm-docker-64m",
)}


def case(name, cause, state, tier, meta, **files):
    d = HERE / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    m = {"format": "hangwatch-bundle/1"}
    m.update(meta)
    (d / "meta.json").write_text(json.dumps(m, indent=1))
    exp = {"cause": cause, "evidence": tier}
    if state:
        exp["state"] = state
    if name in WHY:
        exp["why"] = WHY[name]
    (d / "expected.json").write_text(json.dumps(exp))
    for key, text in files.items():
        path = d / {"log": "server.log", "cmd": "cmdline.txt", "env": "env.txt", "dmesg": "dmesg.txt",
                    "procs": "procs.json", "gpus": "gpus.json", "ports": "ports.txt", "notes_md": "notes.md"}.get(key, key)
        if key.startswith("stack_"):
            path = d / "stacks" / (key[len("stack_"):] + ".txt")
        path.parent.mkdir(parents=True, exist_ok=True)
        if not isinstance(text, str):
            text = json.dumps(text, indent=1)
        path.write_text(text if text.endswith("\n") else text + "\n")


def gpus(name, cc, n, used, util, samples=3):
    return {"samples": [{"t": 30.0 * i, "gpus": [
        {"index": g, "uuid": f"GPU-{g}", "name": name, "compute_capability": cc, "memory_used_mib": used,
         "memory_total_mib": 24564 if "4090" in name else 97887, "utilization_pct": util, "processes": []}
        for g in range(n)]} for i in range(samples)]}


def VLLM_HEAD(pid, ts, model):
    return [
    f"INFO {ts} [__init__.py:241] Automatically detected platform cuda.",
    f"(APIServer pid={pid}) INFO {ts} [api_server.py:1805] vLLM API server version 0.10.1.1",
    f"(APIServer pid={pid}) INFO {ts} [utils.py:326] non-default args: {{'model': '{model}', 'tensor_parallel_size': 2}}",
    f"(APIServer pid={pid}) INFO {ts} [__init__.py:1750] Using max model len 32768",
    f"(EngineCore_0 pid={pid+180}) INFO {ts} [core.py:636] Waiting for init message from front-end.",
    f"(EngineCore_0 pid={pid+180}) INFO {ts} [core.py:74] Initializing a V1 LLM engine (v0.10.1.1) with config: model='{model}', speculative_config=None, tokenizer='{model}', dtype=torch.bfloat16, max_seq_len=32768, tensor_parallel_size=2, pipeline_parallel_size=1, quantization=None, enforce_eager=False, kv_cache_dtype=auto, seed=0",
    f"(EngineCore_0 pid={pid+180}) INFO {ts} [shm_broadcast.py:289] vLLM message queue communication handle: Handle(local_reader_ranks=[0, 1], buffer_handle=(2, 16777216, 10, 'psm_3f2a1b'), local_subscribe_addr='ipc:///tmp/5e1c', remote_subscribe_addr=None, remote_addr_ipv6=False)",
]


def main():
    # ---------------- nccl_p2p_topology ----------------
    log = VLLM_HEAD(51234, "08-21 14:02:11", "Qwen/Qwen2.5-32B-Instruct-AWQ") + [
        "(Worker pid=51500) INFO 08-21 14:02:19 [__init__.py:1418] Found nccl from library libnccl.so.2",
        "(Worker pid=51501) INFO 08-21 14:02:19 [__init__.py:1418] Found nccl from library libnccl.so.2",
        "(Worker pid=51500) INFO 08-21 14:02:19 [pynccl.py:70] vLLM is using nccl==2.26.2",
        "(Worker pid=51501) INFO 08-21 14:02:19 [pynccl.py:70] vLLM is using nccl==2.26.2",
    ]
    case("p2p-vllm-v1-rtx4090-after-pynccl", "nccl_p2p_topology", "stalled", "log",
         {"engine": "vllm", "engine_version": "0.10.1.1", "gpu_model": "NVIDIA GeForce RTX 4090",
          "compute_capability": "8.9", "tp": 2, "nnodes": 1},
         log="\n".join(log),
         cmd="vllm serve Qwen/Qwen2.5-32B-Instruct-AWQ --tensor-parallel-size 2 --max-model-len 32768",
         gpus=gpus("NVIDIA GeForce RTX 4090", "8.9", 2, 1120, 100))

    log = [
        "[2025-03-02 09:14:55] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-70B-Instruct', tp_size=4, port=30000, mem_fraction_static=0.85, attention_backend=None, disable_custom_all_reduce=False)",
        "[2025-03-02 09:15:03 TP0] Init torch distributed begin.",
        "[2025-03-02 09:15:03 TP2] Init torch distributed begin.",
        "[2025-03-02 09:15:03 TP1] Init torch distributed begin.",
        "[2025-03-02 09:15:03 TP3] Init torch distributed begin.",
        "[2025-03-02 09:15:04 TP0] sglang is using nccl==2.21.5",
    ]
    stack = """Thread 8231 (active): "MainThread"
    synchronize (torch/cuda/streams.py:90)
    __init__ (sglang/srt/distributed/device_communicators/pynccl.py:118)
    __init__ (sglang/srt/distributed/parallel_state.py:243)
    init_world_group (sglang/srt/distributed/parallel_state.py:1014)
    init_distributed_environment (sglang/srt/distributed/parallel_state.py:1175)
    init_torch_distributed (sglang/srt/model_executor/model_runner.py:367)
    __init__ (sglang/srt/model_executor/model_runner.py:187)
    __init__ (sglang/srt/managers/tp_worker.py:74)
    __init__ (sglang/srt/managers/scheduler.py:229)
    run_scheduler_process (sglang/srt/managers/scheduler.py:2081)"""
    case("p2p-sglang-l40s-pynccl-warmup-iommu", "nccl_p2p_topology", "stalled", "log+stacks",
         {"engine": "sglang", "engine_version": "0.4.3.post2", "gpu_model": "NVIDIA L40S", "compute_capability": "8.9",
          "tp": 4},
         log="\n".join(log), stack_TP1=stack,
         cmd="python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct --tp 4 --port 30000",
         dmesg="[    0.412210] DMAR: IOMMU enabled\n[    1.022001] DMAR: Intel(R) Virtualization Technology for Directed I/O\n[ 8812.11] pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0\n")

    log = [
        "INFO 06-10 22:31:07 config.py:1005] Defaulting to use mp for distributed inference",
        "INFO 06-10 22:31:07 llm_engine.py:237] Initializing an LLM engine (v0.6.3.post1) with config: model='mistralai/Mistral-Small-Instruct-2409', tensor_parallel_size=2, enforce_eager=False",
        f"{C}(VllmWorkerProcess pid=2291){R} INFO 06-10 22:31:11 multiproc_worker_utils.py:215] Worker ready; awaiting tasks",
        "INFO 06-10 22:31:12 utils.py:1008] Found nccl from library libnccl.so.2",
        "INFO 06-10 22:31:12 pynccl.py:63] vLLM is using nccl==2.20.5",
        "rtx5090box:2220:2220 [0] NCCL INFO Bootstrap : Using eno1:192.168.1.20<0>",
        "rtx5090box:2220:2220 [0] NCCL INFO cudaDriverVersion 12080",
        "rtx5090box:2220:2220 [0] NCCL INFO NCCL version 2.20.5+cuda12.4",
        "rtx5090box:2220:2305 [0] NCCL INFO Channel 00/02 :    0   1",
        "rtx5090box:2220:2305 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
        "rtx5090box:2220:2305 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM",
        "rtx5090box:2291:2306 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM",
        "rtx5090box:2220:2305 [0] NCCL INFO Connected all rings",
        "rtx5090box:2220:2305 [0] NCCL INFO Connected all trees",
        "rtx5090box:2220:2305 [0] NCCL INFO comm 0x5581 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x1f2e - Init COMPLETE",
        "rtx5090box:2291:2306 [1] NCCL INFO comm 0x55a2 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2000 commId 0x1f2e - Init COMPLETE",
    ]
    case("p2p-vllm-v0-nccl-debug-p2p-cumem", "nccl_p2p_topology", "stalled", "log",
         {"engine": "vllm", "engine_version": "0.6.3.post1", "gpu_model": "NVIDIA GeForce RTX 5090",
          "compute_capability": "12.0", "tp": 2},
         log="\n".join(log), env="NCCL_DEBUG=INFO\nCUDA_VISIBLE_DEVICES=0,1\n",
         cmd="vllm serve mistralai/Mistral-Small-Instruct-2409 --tensor-parallel-size 2")

    case("p2p-meta-only-rtxpro6000-tp4", "nccl_p2p_topology", "stalled", "meta-only",
         {"engine": "vllm", "engine_version": "0.9.2", "gpu_model": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
          "compute_capability": "12.0", "tp": 4},
         cmd="vllm serve Qwen/Qwen3-32B --tensor-parallel-size 4 --gpu-memory-utilization 0.9",
         env="CUDA_VISIBLE_DEVICES=0,1,2,3\n")

    # ---------------- jit_compile_slow ----------------
    log = [
        "[2025-11-04 10:01:00 TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=22.31 GB, mem usage=56.12 GB.",
        "[2025-11-04 10:01:02 TP0] KV Cache is allocated. #tokens: 412000, KV size: 15.10 GB",
        "[2025-11-04 10:01:02 TP0] Memory pool end. avail mem=6.02 GB",
        "[2025-11-04 10:01:05 TP0] Entering DeepGEMM JIT Pre-Compile session. It may take a long time (typically 10-20 mins) if you have not run `sglang.compile_deep_gemm`. It is recommended to run `sglang.compile_deep_gemm` with same args as `sglang.launch_server` for pre-compilation to reduce the overhead if you have not run it before. For example: `python3 -m sglang.compile_deep_gemm --model deepseek-ai/DeepSeek-V3 --tp 8 --trust-remote-code`",
        "[2025-11-04 10:01:05 TP0] Try DeepGEMM JIT Compiling for <GEMM_NT_F8F8BF16> N=24576, K=1536, num_groups=1 with all Ms.",
        "[2025-11-04 10:01:05 TP0] Required memory for warmup: 0.61GB, Available memory: 5.52GB",
    ] + [f"DeepGEMM warmup: {p}%|{'#'*(p//10)}{' '*(10-p//10)}| {p*41}/4096 [0{p//20}:{p%60:02d}<0{(100-p)//20}:10, 3.9it/s]" for p in (3, 11, 19, 27, 34)]
    case("jit-sglang-deepgemm-precompile", "jit_compile_slow", "progressing", "log",
         {"engine": "sglang", "engine_version": "0.4.9.post2", "gpu_model": "NVIDIA H200", "compute_capability": "9.0",
          "tp": 8, "observed_for_s": 600.0},
         log="\r".join(log[:6] and ["\n".join(log[:6])] + log[6:]),
         cmd="python3 -m sglang.launch_server --model deepseek-ai/DeepSeek-V3 --tp 8 --trust-remote-code")

    log = VLLM_HEAD(7711, "09-02 03:40:10", "nvidia/Llama-3.3-70B-Instruct-FP4")[:6] + [
        "(EngineCore_0 pid=7891) INFO 09-02 03:40:31 [gpu_model_runner.py:1953] Starting to load model nvidia/Llama-3.3-70B-Instruct-FP4...",
        "(EngineCore_0 pid=7891) INFO 09-02 03:40:32 [cuda.py:286] Using FlashInfer backend on V1 engine.",
        "(EngineCore_0 pid=7891) INFO 09-02 03:41:40 [default_loader.py:262] Loading weights took 66.93 seconds",
        "(EngineCore_0 pid=7891) INFO 09-02 03:41:41 [gpu_model_runner.py:2007] Model loading took 39.51 GiB and 68.21 seconds",
    ]
    stack = """Process 7891: VLLM::EngineCore
Python v3.12.11 (/usr/bin/python3.12)

Thread 7891 (idle): "MainThread"
    _try_wait (subprocess.py:2011)
    wait (subprocess.py:1264)
    run (subprocess.py:550)
    run_ninja (flashinfer/jit/cpp_ext.py:280)
    build (flashinfer/jit/core.py:211)
    build_and_load (flashinfer/jit/core.py:231)
    get_fp4_gemm_sm120_module (flashinfer/gemm.py:412)
    fp4_gemm (flashinfer/gemm.py:1830)
    apply (vllm/model_executor/layers/quantization/modelopt.py:912)
    forward (vllm/model_executor/layers/linear.py:1206)
    profile_run (vllm/v1/worker/gpu_model_runner.py:2519)
    determine_available_memory (vllm/v1/worker/gpu_worker.py:243)"""
    procs = [
        {"pid": 7711, "ppid": 1, "cmdline": "vllm serve nvidia/Llama-3.3-70B-Instruct-FP4", "role": "launcher", "rank": None, "state": "S", "cpu_percent": 0.5, "rss_mib": 900, "alive": True, "exit_code": None},
        {"pid": 7891, "ppid": 7711, "cmdline": "VLLM::EngineCore", "role": "engine_core", "rank": None, "state": "S", "cpu_percent": 1.0, "rss_mib": 6100, "alive": True, "exit_code": None},
        {"pid": 8122, "ppid": 7891, "cmdline": "ninja -v -C /root/.cache/flashinfer/120a/cached_ops/fp4_gemm_cutlass_sm120", "role": "compiler", "rank": None, "state": "S", "cpu_percent": 0.1, "rss_mib": 20, "alive": True, "exit_code": None},
        {"pid": 8130, "ppid": 8122, "cmdline": "/usr/local/cuda/bin/nvcc -gencode=arch=compute_120a,code=sm_120a -c fp4_gemm_cutlass_sm120.cu", "role": "compiler", "rank": None, "state": "R", "cpu_percent": 99.0, "rss_mib": 300, "alive": True, "exit_code": None},
        {"pid": 8141, "ppid": 8130, "cmdline": "cicc --c++17 -arch compute_120a", "role": "compiler", "rank": None, "state": "R", "cpu_percent": 100.0, "rss_mib": 2900, "alive": True, "exit_code": None},
    ]
    case("jit-vllm-v1-flashinfer-fp4-sm120-nvcc", "jit_compile_slow", "progressing", "log+stacks",
         {"engine": "vllm", "engine_version": "0.10.2", "gpu_model": "NVIDIA GeForce RTX 5090", "compute_capability": "12.0", "tp": 1},
         log="\n".join(log), stack_EngineCore=stack, procs=procs,
         cmd="vllm serve nvidia/Llama-3.3-70B-Instruct-FP4 --max-model-len 8192")

    log = VLLM_HEAD(3300, "10-15 18:20:00", "google/gemma-3-27b-it")[:6] + [
        "(VllmWorker TP0 pid=3505) INFO 10-15 18:20:40 [default_loader.py:262] Loading weights took 21.04 seconds",
        "(VllmWorker TP0 pid=3505) INFO 10-15 18:20:41 [gpu_model_runner.py:2007] Model loading took 26.4 GiB and 22.10 seconds",
        "(VllmWorker TP0 pid=3505) INFO 10-15 18:20:55 [backends.py:548] Using cache directory: /root/.cache/vllm/torch_compile_cache/3a9b0e2f1c/rank_0_0/backbone for vLLM's torch.compile",
        "(VllmWorker TP0 pid=3505) INFO 10-15 18:20:55 [backends.py:559] Dynamo bytecode transform time: 13.62 s",
        "(VllmWorker TP0 pid=3505) INFO 10-15 18:21:03 [backends.py:161] Directly load the compiled graph(s) for dynamic shape from the cache, took 0.0 s",
        "(VllmWorker TP0 pid=3505) INFO 10-15 18:21:40 [backends.py:194] Compiling a graph for dynamic shape takes 44.1 s",
        "(VllmWorker TP1 pid=3506) INFO 10-15 18:21:41 [backends.py:194] Compiling a graph for dynamic shape takes 45.0 s",
    ]
    case("jit-vllm-v1-torch-compile-inductor", "jit_compile_slow", "progressing", "log",
         {"engine": "vllm", "engine_version": "0.10.1", "gpu_model": "NVIDIA A100-SXM4-80GB", "compute_capability": "8.0",
          "tp": 2},
         log="\n".join(log), cmd="vllm serve google/gemma-3-27b-it -tp 2",
         procs=[{"pid": 3505, "ppid": 3485, "cmdline": "VLLM::Worker_TP0", "role": "worker", "rank": "TP0", "state": "R", "cpu_percent": 100.0, "rss_mib": 9000, "alive": True, "exit_code": None},
                {"pid": 3600, "ppid": 3505, "cmdline": "python3 -m torch._inductor.compile_worker --pool=subprocess --workers=32", "role": "compiler", "rank": None, "state": "R", "cpu_percent": 380.0, "rss_mib": 2200, "alive": True, "exit_code": None}])

    # ---------------- custom_allreduce ----------------
    log = [
        "INFO 04-22 11:05:31 llm_engine.py:161] Initializing an LLM engine (v0.5.0.post1) with config: model='meta-llama/Meta-Llama-3-70B-Instruct', tensor_parallel_size=4, disable_custom_all_reduce=False",
        "INFO 04-22 11:05:40 utils.py:623] Found nccl from library libnccl.so.2",
        "INFO 04-22 11:05:40 pynccl.py:65] vLLM is using nccl==2.20.5",
        f"{C}(VllmWorkerProcess pid=901){R} INFO 04-22 11:05:40 pynccl.py:65] vLLM is using nccl==2.20.5",
        "INFO 04-22 11:05:41 custom_all_reduce_utils.py:232] reading GPU P2P access cache from /root/.config/vllm/gpu_p2p_access_cache_for_0,1,2,3.json",
        f"{C}(VllmWorkerProcess pid=902){R} INFO 04-22 11:05:41 custom_all_reduce_utils.py:232] reading GPU P2P access cache from /root/.config/vllm/gpu_p2p_access_cache_for_0,1,2,3.json",
    ]
    stack = """Thread 901 (idle): "MainThread"
    __init__ (vllm/distributed/device_communicators/custom_all_reduce.py:162)
    init_custom_ar (vllm/distributed/device_communicators/custom_all_reduce.py:... )
    init_model_parallel_group (vllm/distributed/parallel_state.py:823)
    initialize_model_parallel (vllm/distributed/parallel_state.py:905)
    init_worker_distributed_environment (vllm/worker/worker.py:357)
    init_device (vllm/worker/worker.py:129)"""
    case("car-vllm-v0-p2p-cache-read", "custom_allreduce", "stalled", "log+stacks",
         {"engine": "vllm", "engine_version": "0.5.0.post1", "gpu_model": "NVIDIA A10G", "compute_capability": "8.6", "tp": 4},
         log="\n".join(log), stack_901=stack.replace("... ", "140"),
         cmd="python -m vllm.entrypoints.openai.api_server --model meta-llama/Meta-Llama-3-70B-Instruct --tensor-parallel-size 4")

    log = [
        "[2025-06-18 07:22:10 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=10.21 GB",
        "[2025-06-18 07:22:10 TP0] Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 136, 144, 152, 160]",
        "Capturing batches (avail_mem=10.21 GB): 100%|██████████| 23/23 [00:09<00:00,  2.45it/s]",
        "[2025-06-18 07:22:19 TP0] Registering 2944 cuda graph addresses",
    ]
    stack = """Thread 55012 (idle): "MainThread"
    all_gather_object (torch/distributed/distributed_c10d.py:2944)
    _gather_ipc_meta (sglang/srt/distributed/device_communicators/custom_all_reduce.py:247)
    register_graph_buffers (sglang/srt/distributed/device_communicators/custom_all_reduce.py:268)
    graph_capture (sglang/srt/distributed/device_communicators/custom_all_reduce.py:232)
    __exit__ (contextlib.py:144)
    capture (sglang/srt/model_executor/cuda_graph_runner.py:380)
    __init__ (sglang/srt/model_executor/cuda_graph_runner.py:288)
    init_cuda_graphs (sglang/srt/model_executor/model_runner.py:1012)"""
    case("car-sglang-register-graph-buffers", "custom_allreduce", "stalled", "log+stacks",
         {"engine": "sglang", "engine_version": "0.4.7", "gpu_model": "NVIDIA A800-SXM4-80GB", "compute_capability": "8.0", "tp": 4},
         log="\n".join(log), stack_TP2=stack,
         cmd="python -m sglang.launch_server --model-path Qwen/Qwen2-72B-Instruct --tp-size 4")

    stack = """Process 44120: VLLM::Worker_TP1
Python v3.12.3 (/usr/bin/python3.12)

Thread 44120 (active): "MainThread"
    all_reduce (vllm/distributed/device_communicators/custom_all_reduce.py:290)
    custom_all_reduce (vllm/distributed/device_communicators/custom_all_reduce.py:305)
    all_reduce (vllm/distributed/device_communicators/cuda_communicator.py:88)
    _all_reduce_out_place (vllm/distributed/parallel_state.py:447)
    forward (vllm/model_executor/layers/linear.py:1307)
    forward (vllm/model_executor/models/llama.py:311)
    _dummy_run (vllm/v1/worker/gpu_model_runner.py:2308)
    capture_model (vllm/v1/worker/gpu_model_runner.py:2713)
    compile_or_warm_up_model (vllm/v1/worker/gpu_worker.py:296)"""
    log = VLLM_HEAD(44000, "07-30 16:08:00", "meta-llama/Llama-3.1-8B-Instruct")[:6] + [
        "(VllmWorker rank=0 pid=44119) INFO 07-30 16:08:52 [gpu_worker.py:255] Available KV cache memory: 58.32 GiB",
        "(EngineCore_0 pid=44040) INFO 07-30 16:08:53 [kv_cache_utils.py:833] GPU KV cache size: 955,488 tokens",
        "(EngineCore_0 pid=44040) INFO 07-30 16:08:53 [kv_cache_utils.py:837] Maximum concurrency for 32,768 tokens per request: 29.16x",
        "(VllmWorker rank=0 pid=44119) Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/67 [00:00<?, ?it/s]",
    ]
    case("car-vllm-v1-capture-stack-tp1", "custom_allreduce", "stalled", "log+stacks",
         {"engine": "vllm", "engine_version": "0.10.0", "gpu_model": "NVIDIA L40S", "compute_capability": "8.9", "tp": 2},
         log="\n".join(log), stack_44120=stack,
         cmd="vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 2")

    # ---------------- weight_loading_io ----------------
    log = VLLM_HEAD(9100, "05-12 08:00:00", "/mnt/nfs/models/Llama-3.1-405B-Instruct-FP8")[:6] + [
        "(VllmWorker TP0 pid=9301) INFO 05-12 08:00:44 [gpu_model_runner.py:1843] Starting to load model /mnt/nfs/models/Llama-3.1-405B-Instruct-FP8...",
        "(VllmWorker TP0 pid=9301) INFO 05-12 08:00:45 [weight_utils.py:296] Using model weights format ['*.safetensors']",
        "\r".join([f"(VllmWorker TP0 pid=9301) Loading safetensors checkpoint shards:   {p}% Completed | {n}/109 [{n*2:02d}:{n*7%60:02d}<3:41:00, 121.5s/it]" for p, n in ((0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5))]),
    ]
    case("wio-vllm-v1-nfs-shards-crawl", "weight_loading_io", "progressing", "log",
         {"engine": "vllm", "engine_version": "0.9.1", "gpu_model": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "tp": 8},
         log="\n".join(log), cmd="vllm serve /mnt/nfs/models/Llama-3.1-405B-Instruct-FP8 --tensor-parallel-size 8")

    log = [
        "[2025-09-01 12:00:01] server_args=ServerArgs(model_path='/data/hf/Qwen3-235B-A22B', tp_size=8, load_format='auto')",
        "[2025-09-01 12:00:20 TP0] Init torch distributed ends. mem usage=0.78 GB",
        "[2025-09-01 12:00:21 TP0] Load weight begin. avail mem=78.40 GB",
        "Loading safetensors checkpoint shards:   0% Completed | 0/118 [00:00<?, ?it/s]",
        "Loading safetensors checkpoint shards:   1% Completed | 1/118 [03:51<7:30:12, 230.88s/it]",
        "Loading safetensors checkpoint shards:   2% Completed | 2/118 [07:40<7:24:01, 229.67s/it]",
    ]
    procs = [{"pid": 1200 + i, "ppid": 1100, "cmdline": f"sglang::scheduler_TP{i}", "role": "scheduler", "rank": f"TP{i}", "state": "D", "cpu_percent": 3.0, "rss_mib": 15000, "alive": True, "exit_code": None} for i in range(8)]
    case("wio-sglang-0.5.2-d-state-crawl", "weight_loading_io", "progressing", "log",
         {"engine": "sglang", "engine_version": "0.5.2", "gpu_model": "NVIDIA H20", "compute_capability": "9.0", "tp": 8},
         log="\n".join(log), procs=procs,
         cmd="python3 -m sglang.launch_server --model-path /data/hf/Qwen3-235B-A22B --tp 8 --port 8000")

    stack = """Thread 0x7F3A (active): "MainThread"
    read (ssl.py:1134)
    recv_into (ssl.py:1278)
    readinto (socket.py:707)
    read (urllib3/response.py:...)
    iter_content (requests/models.py:820)
    http_get (huggingface_hub/file_download.py:459)
    _download_to_tmp_and_move (huggingface_hub/file_download.py:1870)
    hf_hub_download (huggingface_hub/file_download.py:1008)
    snapshot_download (huggingface_hub/_snapshot_download.py:294)
    download_weights_from_hf (vllm/model_executor/model_loader/weight_utils.py:275)
    _prepare_weights (vllm/model_executor/model_loader/loader.py:257)
    load_model (vllm/worker/model_runner.py:1032)""".replace("...", "566")
    case("wio-vllm-v0-hf-download-stack", "weight_loading_io", "progressing", "stacks",
         {"engine": "vllm", "engine_version": "0.6.1", "gpu_model": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0", "tp": 1},
         stack_main=stack, cmd="vllm serve meta-llama/Llama-3.1-70B-Instruct --max-model-len 8192")

    # ---------------- multinode_rendezvous ----------------
    log = [
        "[2025-05-20 03:11:09] server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-R1', tp_size=16, nnodes=2, node_rank=0, dist_init_addr='10.10.0.11:5000', trust_remote_code=True)",
        "[2025-05-20 03:11:24 TP0] Init torch distributed begin.",
        "[2025-05-20 03:11:24 TP3] Init torch distributed begin.",
        "[2025-05-20 03:11:24 TP7] Init torch distributed begin.",
    ]
    stack = """Thread 12001 (idle): "MainThread"
    __init__ (torch/distributed/rendezvous.py:...)
    _create_c10d_store (torch/distributed/rendezvous.py:189)
    _tcp_rendezvous_handler (torch/distributed/rendezvous.py:236)
    init_process_group (torch/distributed/distributed_c10d.py:1520)
    wrapper (torch/distributed/c10d_logger.py:79)
    init_distributed_environment (sglang/srt/distributed/parallel_state.py:1102)
    init_torch_distributed (sglang/srt/model_executor/model_runner.py:410)""".replace("...", "189")
    case("mn-sglang-node0-tcpstore", "multinode_rendezvous", "stalled", "log+stacks",
         {"engine": "sglang", "engine_version": "0.4.6.post5", "gpu_model": "NVIDIA H800", "compute_capability": "9.0", "tp": 16, "nnodes": 2},
         log="\n".join(log), stack_TP0=stack,
         cmd="python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-R1 --tp 16 --dist-init-addr 10.10.0.11:5000 --nnodes 2 --node-rank 0 --trust-remote-code",
         env="NCCL_IB_DISABLE=0\nCUDA_DEVICE_MAX_CONNECTIONS=1\n")

    log = [
        "INFO 02-11 21:44:02 api_server.py:712] vLLM API server version 0.7.2",
        "INFO 02-11 21:44:09 config.py:1382] Defaulting to use ray for distributed inference",
        "INFO 02-11 21:44:09 llm_engine.py:234] Initializing a V0 LLM engine (v0.7.2) with config: model='deepseek-ai/DeepSeek-V3', tensor_parallel_size=8, pipeline_parallel_size=2",
        "2025-02-11 21:44:10,311\tINFO worker.py:1654 -- Connecting to existing Ray cluster at address: 10.0.0.1:6379...",
        "2025-02-11 21:44:10,330\tINFO worker.py:1841 -- Connected to Ray cluster.",
        "INFO 02-11 21:44:10 ray_utils.py:300] No current placement group found. Creating a new placement group.",
        "INFO 02-11 21:46:10 ray_utils.py:210] Waiting for creating a placement group of specs for 120 seconds. specs=[{'GPU': 1.0, 'node:10.0.0.1': 0.001}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}]. Check `ray status` and `ray list nodes` to see if you have enough resources, and make sure the IP addresses used by ray cluster are the same as VLLM_HOST_IP environment variable specified in each node if you are running on a multi-node.",
        "INFO 02-11 21:50:10 ray_utils.py:210] Waiting for creating a placement group of specs for 360 seconds. specs=[{'GPU': 1.0, 'node:10.0.0.1': 0.001}]. Check `ray status` and `ray list nodes` to see if you have enough resources.",
    ]
    case("mn-vllm-v0-ray-placement-group", "multinode_rendezvous", "stalled", "log",
         {"engine": "vllm", "engine_version": "0.7.2", "gpu_model": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "tp": 8, "nnodes": 2},
         log="\n".join(log),
         cmd="vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8 --pipeline-parallel-size 2 --trust-remote-code")

    log = VLLM_HEAD(6000, "11-03 09:10:00", "Qwen/Qwen3-235B-A22B")[:6] + [
        "(EngineCore_DP0 pid=6180) INFO 11-03 09:10:22 [core.py:94] Waiting for 1 local, 1 remote core engine proc(s) to start.",
        "(APIServer pid=6000) DEBUG 11-03 09:10:32 [utils.py:773] Waiting for 1 local, 1 remote core engine proc(s) to start.",
        "(APIServer pid=6000) DEBUG 11-03 09:10:42 [utils.py:773] Waiting for 1 local, 1 remote core engine proc(s) to start.",
        "(APIServer pid=6000) DEBUG 11-03 09:10:52 [utils.py:773] Waiting for 1 local, 1 remote core engine proc(s) to start.",
        "(APIServer pid=6000) DEBUG 11-03 09:20:52 [utils.py:773] Waiting for 1 local, 1 remote core engine proc(s) to start.",
    ]
    case("mn-vllm-v1-dp-remote-engine-waiting", "multinode_rendezvous", "stalled", "log",
         {"engine": "vllm", "engine_version": "0.11.0", "gpu_model": "NVIDIA H200", "compute_capability": "9.0", "tp": 8, "nnodes": 2},
         log="\n".join(log),
         cmd="vllm serve Qwen/Qwen3-235B-A22B --tensor-parallel-size 8 --data-parallel-size 2 --data-parallel-size-local 1 --data-parallel-address 172.16.0.4 --data-parallel-rpc-port 13345",
         env="VLLM_LOGGING_LEVEL=DEBUG\n")

    # ---------------- port_in_use ----------------
    log = [
        "[2025-07-09 15:30:02 TP0] Capture cuda graph end. Time elapsed: 31.22 s. mem usage=1.91 GB. avail mem=4.23 GB.",
        "[2025-07-09 15:30:03 TP0] max_total_num_tokens=622118, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=2048, context_len=131072",
        "[2025-07-09 15:30:04] INFO:     Started server process [4411]",
        "[2025-07-09 15:30:04] INFO:     Waiting for application startup.",
        "[2025-07-09 15:30:04] INFO:     Application startup complete.",
        "[2025-07-09 15:30:04] ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use",
        "[2025-07-09 15:30:04] INFO:     Waiting for application shutdown.",
        "[2025-07-09 15:30:04] INFO:     Application shutdown complete.",
    ]
    case("port-sglang-uvicorn-errno98", "port_in_use", "crashed", "log",
         {"engine": "sglang", "engine_version": "0.4.8", "gpu_model": "NVIDIA H100 80GB HBM3", "tp": 1},
         log="\n".join(log), cmd="python -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --host 0.0.0.0 --port 30000",
         ports="State  Recv-Q Send-Q Local Address:Port  Peer Address:Port Process\nLISTEN 0      2048         0.0.0.0:30000      0.0.0.0:*     users:((\"python3\",pid=3980,fd=21))\n")

    log = [
        "[2025-12-01 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-30B-A3B', tp_size=2, port=30000, nccl_port=None)",
        "[2025-12-01 10:00:09 TP0] Init torch distributed begin.",
        "[W1201 10:00:09.381204391 socket.cpp:462] [c10d] waitForInput: poll for socket SocketImpl(fd=61, addr=[localhost]:46118, remote=[localhost]:28312) returned 0, socket timed out after 60000ms",
        "[2025-12-01 10:00:09 TP1] Init torch distributed begin.",
        "[E1201 10:00:09.401 socket.cpp:1019] [c10d] The server socket has failed to listen on any local network address. port: 28312, useIPv6: 0, code: -98, name: EADDRINUSE, message: address already in use",
    ]
    case("port-sglang-nccl-port-eaddrinuse", "port_in_use", "crashed", "log",
         {"engine": "sglang", "engine_version": "0.5.5", "gpu_model": "NVIDIA A100-SXM4-80GB", "tp": 2},
         log="\n".join(log), cmd="python -m sglang.launch_server --model-path Qwen/Qwen3-30B-A3B --tp 2")

    # ---------------- cuda_graph_capture ----------------
    log = [
        "[2025-01-15 19:02:45 TP0] Memory pool end. avail mem=9.77 GB",
        "[2025-01-15 19:02:46 TP0] Capture cuda graph begin. This can take up to several minutes.",
        "  0%|          | 0/35 [00:00<?, ?it/s]",
    ]
    stack = """Thread 3302 (active): "MainThread"
    forward_decode (sglang/srt/layers/attention/flashinfer_backend.py:421)
    forward (sglang/srt/layers/radix_attention.py:60)
    forward (sglang/srt/models/qwen2.py:160)
    forward (sglang/srt/models/qwen2.py:337)
    run_once (sglang/srt/model_executor/cuda_graph_runner.py:331)
    capture_one_batch_size (sglang/srt/model_executor/cuda_graph_runner.py:339)
    capture (sglang/srt/model_executor/cuda_graph_runner.py:260)
    __init__ (sglang/srt/model_executor/cuda_graph_runner.py:196)
    init_cuda_graphs (sglang/srt/model_executor/model_runner.py:629)"""
    case("cg-sglang-0.4.1-capture-zero", "cuda_graph_capture", "stalled", "log+stacks",
         {"engine": "sglang", "engine_version": "0.4.1.post4", "gpu_model": "NVIDIA A100 80GB PCIe", "compute_capability": "8.0", "tp": 1},
         log="\n".join(log), stack_TP0=stack, cmd="python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-14B-Instruct")

    log = VLLM_HEAD(2100, "03-03 12:00:00", "microsoft/Phi-4-mini-instruct")[:6] + [
        "(EngineCore_0 pid=2280) INFO 03-03 12:00:41 [gpu_worker.py:276] Available KV cache memory: 62.50 GiB",
        "(EngineCore_0 pid=2280) INFO 03-03 12:00:41 [kv_cache_utils.py:849] GPU KV cache size: 1,023,984 tokens",
        "(EngineCore_0 pid=2280) INFO 03-03 12:00:41 [kv_cache_utils.py:853] Maximum concurrency for 131,072 tokens per request: 7.81x",
        "\r".join(f"(EngineCore_0 pid=2280) Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  {p}%|{'█'*(p//10)}{' '*(10-p//10)}| {n}/67 [00:{n:02d}<00:30,  1.40it/s]" for p, n in ((0, 0), (15, 10), (31, 21), (46, 31))),
    ]
    case("cg-vllm-v1-piecewise-stops-46pct", "cuda_graph_capture", "stalled", "log",
         {"engine": "vllm", "engine_version": "0.10.2", "gpu_model": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "tp": 1,
          "since_last_progress_s": 900.0},
         log="\n".join(log), cmd="vllm serve microsoft/Phi-4-mini-instruct", notes_md="works with --enforce-eager")

    log = [
        "[2026-03-12 08:40:10 TP0] Memory pool end. avail mem=18.40 GB",
        "[2026-03-12 08:40:11 TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=18.40 GB",
        "[2026-03-12 08:40:11 TP1] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=18.38 GB",
        "Capturing batches (bs=256 avail_mem=18.21 GB):   2%|▏         | 1/52 [00:02<01:48,  2.13s/it]",
    ]
    stack = """Thread 90210 (idle): "MainThread"
    __exit__ (torch/cuda/graphs.py:186)
    capture_one (sglang/srt/model_executor/runner_backend/full_cuda_graph_backend.py:171)
    capture_one_shape (sglang/srt/model_executor/runner/decode_cuda_graph_runner.py:1390)
    _capture_one_stream (sglang/srt/model_executor/runner/decode_cuda_graph_runner.py:1340)
    _capture (sglang/srt/model_executor/runner/decode_cuda_graph_runner.py:1300)
    capture (sglang/srt/model_executor/runner/decode_cuda_graph_runner.py:1249)
    __init__ (sglang/srt/model_executor/runner/decode_cuda_graph_runner.py:290)
    capture_decode_graph (sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py:710)"""
    case("cg-sglang-0.5.23-decode-endcapture", "cuda_graph_capture", "stalled", "log+stacks",
         {"engine": "sglang", "engine_version": "0.5.23", "gpu_model": "NVIDIA H200", "compute_capability": "9.0", "tp": 2},
         log="\n".join(log), stack_TP0=stack)

    # ---------------- jit_lock_deadlock ----------------
    stack = """Thread 17001 (idle): "MainThread"
    acquire (filelock/_api.py:344)
    __enter__ (filelock/_api.py:376)
    build_and_load (flashinfer/jit/core.py:229)
    gen_batch_prefill_module (flashinfer/prefill.py:181)
    get_batch_prefill_module (flashinfer/prefill.py:203)
    __init__ (flashinfer/prefill.py:1488)
    __init__ (sglang/srt/layers/attention/flashinfer_backend.py:158)
    init_attention_backend (sglang/srt/model_executor/model_runner.py:885)"""
    log = [
        "[2025-04-02 14:01:10 TP0] Memory pool end. avail mem=12.10 GB",
        "2025-04-02 14:01:11,220 - INFO - flashinfer.jit: Loading JIT ops: batch_prefill_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_dtype_idx_i32_head_dim_qk_128_head_dim_vo_128",
    ]
    case("lock-sglang-flashinfer-stale-lock", "jit_lock_deadlock", "stalled", "log+stacks",
         {"engine": "sglang", "engine_version": "0.4.5", "gpu_model": "NVIDIA GeForce RTX 4090", "compute_capability": "8.9", "tp": 1,
          "since_last_progress_s": 1800.0},
         log="\n".join(log), stack_TP0=stack,
         cmd="python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct",
         procs=[{"pid": 17001, "ppid": 16990, "cmdline": "sglang::scheduler", "role": "scheduler", "rank": "TP0", "state": "S", "cpu_percent": 0.0, "rss_mib": 4100, "alive": True, "exit_code": None}])

    stack = """Thread 4470 (idle): "MainThread"
    flock (native)
    _build_lock (sglang/jit_kernel/utils/compile/loader.py:255)
    load_jit (sglang/jit_kernel/utils/compile/loader.py:71)
    _maybe_compile_deep_gemm_one_type_all (sglang/srt/layers/deep_gemm_wrapper/compile_utils.py:160)
    deep_gemm_execution_hook (sglang/srt/layers/deep_gemm_wrapper/compile_utils.py:525)"""
    case("lock-sglang-deepgemm-flock-nfs", "jit_lock_deadlock", "stalled", "stacks",
         {"engine": "sglang", "engine_version": "0.5.4", "gpu_model": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "tp": 8},
         stack_TP3=stack, env="SGLANG_DG_CACHE_DIR=/nfs/shared/cache/deep_gemm\nHOME=/nfs/home/alice\n",
         cmd="python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3.1 --tp 8 --trust-remote-code")

    # ---------------- warmup_request ----------------
    log = [
        "[2025-08-19 06:12:30 TP0] max_total_num_tokens=1800000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4096, context_len=32768",
        "[2025-08-19 06:12:31] INFO:     Started server process [771]",
        "[2025-08-19 06:12:31] INFO:     Waiting for application startup.",
        "[2025-08-19 06:12:31] INFO:     Application startup complete.",
        "[2025-08-19 06:12:31] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
    ]
    case("warm-sglang-proxy-env", "warmup_request", "stalled", "log",
         {"engine": "sglang", "engine_version": "0.4.10", "gpu_model": "NVIDIA H20", "tp": 1, "since_last_progress_s": 620.0},
         log="\n".join(log), env="http_proxy=http://proxy.corp:3128\nhttps_proxy=http://proxy.corp:3128\n",
         cmd="python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --host 0.0.0.0")

    stack = """Thread 0x7f1c2bfff640 (idle): "Thread-2 (_wait_and_warmup)"
    recv_into (socket.py:720)
    readinto (socket.py:707)
    _read_status (http/client.py:286)
    begin (http/client.py:325)
    getresponse (http/client.py:1428)
    _make_request (urllib3/connectionpool.py:516)
    urlopen (urllib3/connectionpool.py:787)
    send (requests/adapters.py:667)
    request (requests/sessions.py:589)
    post (requests/api.py:115)
    _wait_and_warmup (sglang/srt/entrypoints/http_server.py:1012)
    run (threading.py:1012)"""
    log = [
        "[2025-10-05 01:00:12] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
        "[2025-10-05 01:00:13] INFO:     127.0.0.1:51322 - \"GET /get_model_info HTTP/1.1\" 200 OK",
        "[2025-10-05 01:00:13 TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0",
    ]
    case("warm-sglang-post-generate-stack", "warmup_request", "stalled", "log+stacks",
         {"engine": "sglang", "engine_version": "0.5.0rc2", "gpu_model": "NVIDIA B200", "compute_capability": "10.0", "tp": 1},
         log="\n".join(log), stack_launcher=stack)

    # ---------------- dead_rank ----------------
    log = VLLM_HEAD(30100, "06-30 22:10:00", "meta-llama/Llama-3.3-70B-Instruct")[:6] + [
        "(VllmWorker TP0 pid=30400) INFO 06-30 22:10:30 [gpu_model_runner.py:1843] Starting to load model meta-llama/Llama-3.3-70B-Instruct...",
        "(VllmWorker TP3 pid=30403) INFO 06-30 22:10:30 [gpu_model_runner.py:1843] Starting to load model meta-llama/Llama-3.3-70B-Instruct...",
        "(VllmWorker TP0 pid=30400) Loading safetensors checkpoint shards:  40% Completed | 12/30 [00:40<01:00,  3.4s/it]",
    ]
    dmesg = ("[Mon Jun 30 22:11:14 2025] python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0\n"
             "[Mon Jun 30 22:11:14 2025] Out of memory: Killed process 30402 (VLLM::Worker_TP) total-vm:98812344kB, anon-rss:61201932kB, file-rss:10240kB, shmem-rss:0kB, UID:0 pgtables:130112kB oom_score_adj:0\n")
    case("dead-vllm-v1-oom-killer-worker", "dead_rank", "stalled", "log",
         {"engine": "vllm", "engine_version": "0.9.2", "gpu_model": "NVIDIA A100-SXM4-80GB", "tp": 4},
         log="\n".join(log), dmesg=dmesg, cmd="vllm serve meta-llama/Llama-3.3-70B-Instruct -tp 4")

    log = [
        "INFO 10-02 17:20:01 llm_engine.py:184] Initializing an LLM engine (v0.6.2) with config: model='Qwen/Qwen2-VL-72B-Instruct', tensor_parallel_size=4",
        f"{C}(VllmWorkerProcess pid=11870){R} INFO 10-02 17:20:12 model_runner.py:1025] Starting to load model Qwen/Qwen2-VL-72B-Instruct...",
        "INFO 10-02 17:20:12 model_runner.py:1025] Starting to load model Qwen/Qwen2-VL-72B-Instruct...",
        "ERROR 10-02 17:21:40 multiproc_worker_utils.py:116] Worker VllmWorkerProcess pid 11871 died, exit code: -11",
        "INFO 10-02 17:21:40 multiproc_worker_utils.py:120] Killing local vLLM worker processes",
    ]
    case("dead-vllm-v0-worker-segv", "dead_rank", "crashed", "log",
         {"engine": "vllm", "engine_version": "0.6.2", "gpu_model": "NVIDIA A800 80GB PCIe", "tp": 4}, log="\n".join(log))

    log = [
        "[2025-12-20 05:00:00 TP0] Load weight begin. avail mem=139.20 GB",
        "[2025-12-20 05:00:00 TP1] Load weight begin. avail mem=139.20 GB",
        "[2025-12-20 05:02:10 TP0] Load weight end. type=Glm4MoeForCausalLM, dtype=torch.bfloat16, avail mem=72.10 GB, mem usage=67.10 GB.",
    ]
    procs = [
        {"pid": 500, "ppid": 1, "cmdline": "python3 -m sglang.launch_server --model-path zai-org/GLM-4.6 --tp 2", "role": "launcher", "rank": None, "state": "S", "cpu_percent": 0.2, "rss_mib": 800, "alive": True, "exit_code": None},
        {"pid": 610, "ppid": 500, "cmdline": "sglang::scheduler_TP0", "role": "scheduler", "rank": "TP0", "state": "S", "cpu_percent": 0.1, "rss_mib": 30000, "alive": True, "exit_code": None},
        {"pid": 611, "ppid": 500, "cmdline": "sglang::scheduler_TP1", "role": "scheduler", "rank": "TP1", "state": "Z", "cpu_percent": 0.0, "rss_mib": 0, "alive": False, "exit_code": -9},
    ]
    case("dead-sglang-zombie-scheduler", "dead_rank", "stalled", "log",
         {"engine": "sglang", "engine_version": "0.5.6", "gpu_model": "NVIDIA H200", "tp": 2}, log="\n".join(log), procs=procs)

    # ---------------- driver_or_xid ----------------
    log = VLLM_HEAD(8800, "01-09 04:00:00", "Qwen/Qwen2.5-72B-Instruct")[:6] + [
        "(VllmWorker TP0 pid=8901) INFO 01-09 04:00:40 [gpu_model_runner.py:1843] Starting to load model Qwen/Qwen2.5-72B-Instruct...",
    ]
    dmesg = ("[1722201.55] NVRM: GPU at PCI:0000:41:00: GPU-7c1e2a\n"
             "[1722201.55] NVRM: Xid (PCI:0000:41:00): 79, pid=8903, name=VLLM::Worker_TP, GPU has fallen off the bus.\n"
             "[1722201.56] NVRM: GPU 0000:41:00.0: GPU has fallen off the bus.\n")
    case("xid-vllm-v1-xid79", "driver_or_xid", "stalled", "log",
         {"engine": "vllm", "engine_version": "0.8.5", "gpu_model": "NVIDIA L40", "tp": 4},
         log="\n".join(log), dmesg=dmesg)

    log = ["[2025-10-10 12:00:01 TP0] Init torch distributed begin.", "[2025-10-10 12:00:02 TP0] sglang is using nccl==2.27.3"]
    dmesg = "[ 9921.114] NVRM: Xid (PCI:0000:1b:00): 119, pid=2211, name=python3, Timeout after 6s of waiting for RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).\n[ 9927.114] NVRM: GPU1 GSP RPC buffer contains function 76 (GSP_RM_CONTROL) and data 0x0000000020800a4c 0x0000000000000004.\n"
    case("xid-sglang-gsp-timeout-119", "driver_or_xid", "stalled", "log",
         {"engine": "sglang", "engine_version": "0.5.3", "gpu_model": "NVIDIA H100 80GB HBM3", "tp": 2},
         log="\n".join(log), dmesg=dmesg)

    # ---------------- one each for the rest ----------------
    log = ["[2026-01-01 09:00:00 TP0] Init parallel begin.", "[2026-01-01 09:00:00 TP1] Init parallel begin.",
           "[2026-01-01 09:00:00 TP2] Init parallel begin.", "[2026-01-01 09:00:00 TP3] Init parallel begin."]
    stack = """Thread 777 (idle): "MainThread"
    ncclCommInitRank (sglang/srt/distributed/device_communicators/pynccl_wrapper.py:395)
    __init__ (sglang/srt/distributed/device_communicators/pynccl.py:112)
    __init__ (sglang/srt/distributed/parallel_state.py:465)
    init_world_group (sglang/srt/distributed/parallel_state.py:2410)
    init_distributed_environment (sglang/srt/distributed/parallel_state.py:2530)
    _init_parallel_groups (sglang/srt/distributed/bootstrap.py:330)"""
    case("nccl-init-sglang-0.5.23-nvls", "nccl_init", "stalled", "log+stacks",
         {"engine": "sglang", "engine_version": "0.5.23", "gpu_model": "NVIDIA H200", "compute_capability": "9.0", "tp": 4},
         log="\n".join(log), stack_TP2=stack, env="NCCL_NVLS_ENABLE=1\n")

    # probe corrected after the first run: it first named NCCL 2.27.3 on B200 as "known bad", which
    # nothing public says; a release that predates the architecture (sm_120 needs NCCL >= 2.26) is
    # the form these reports take
    log = VLLM_HEAD(1000, "12-01 10:00:00", "Qwen/Qwen3-8B")[:5] + [
        "(Worker_TP0 pid=1201) INFO 12-01 10:00:12 [pynccl.py:111] vLLM is using nccl==2.21.5",
        "(Worker_TP1 pid=1202) INFO 12-01 10:00:12 [pynccl.py:111] vLLM is using nccl==2.21.5",
    ]
    case("ncclver-vllm-v1-rtx5090-old-nccl", "nccl_version_bug", "stalled", "log",
         {"engine": "vllm", "engine_version": "0.9.0", "gpu_model": "NVIDIA GeForce RTX 5090", "compute_capability": "12.0", "tp": 2},
         log="\n".join(log), notes_md="pip install -U nvidia-nccl-cu12 fixed it")

    log = [
        "[2025-11-20 10:00:00] Attention backend not specified. Use flashinfer backend by default.",
        "[2025-11-20 10:00:30 TP0] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=70.10 GB, mem usage=15.27 GB.",
        "[2025-11-20 10:00:31 TP0] KV Cache is allocated. #tokens: 500000, K size: 34.33 GB, V size: 34.33 GB",
        "[2025-11-20 10:00:31 TP0] Memory pool end. avail mem=1.20 GB",
    ]
    case("fi-arch-sglang-rtxpro6000-default-fi", "flashinfer_arch", "stalled", "log",
         {"engine": "sglang", "engine_version": "0.5.5", "gpu_model": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "compute_capability": "12.0", "tp": 1},
         log="\n".join(log), cmd="python -m sglang.launch_server --model-path Qwen/Qwen3-8B")

    stack = """Thread 6000 (active): "MainThread"
    top_k_top_p_sampling_from_probs (flashinfer/sampling.py:1066)
    forward (sglang/srt/layers/sampler.py:104)
    sample (sglang/srt/model_executor/model_runner.py:1800)
    forward_batch_generation (sglang/srt/managers/tp_worker.py:240)
    run_batch (sglang/srt/managers/scheduler.py:1700)"""
    case("arch-kernel-sampler-sm103", "arch_kernel_hang", "stalled", "stacks",
         {"engine": "sglang", "engine_version": "0.5.4", "gpu_model": "NVIDIA B300 SXM6", "compute_capability": "10.3", "tp": 1},
         stack_TP0=stack, gpus=gpus("NVIDIA B300 SXM6", "10.3", 1, 120000, 100))

    s0 = """Thread 1 (active): "MainThread"
    _profile_tactics (flashinfer/autotuner.py:540)
    choose_one (flashinfer/autotuner.py:402)
    cutlass_fused_moe (flashinfer/fused_moe/core.py:780)"""
    s1 = """Thread 2 (idle): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:2810)
    _sync_best_tactic (flashinfer/autotuner.py:611)
    choose_one (flashinfer/autotuner.py:398)
    cutlass_fused_moe (flashinfer/fused_moe/core.py:780)"""
    case("autotune-desync-flashinfer-moe", "autotune_rank_desync", "stalled", "log+stacks",
         {"engine": "sglang", "engine_version": "0.5.3", "gpu_model": "NVIDIA B200", "compute_capability": "10.0", "tp": 2},
         log="[2025-10-01 10:00:00 TP0] Running FlashInfer autotune...\n[2025-10-01 10:00:00 TP1] Running FlashInfer autotune...",
         stack_TP0=s0, stack_TP1=s1)

    log = [
        "[2025-08-08 11:11:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=60.00 GB, mem usage=15.00 GB.",
    ]
    stack = """Thread 3 (active): "MainThread"
    __init__ (sglang/srt/mem_cache/memory_pool_host.py:120)
    init_memory_pool (sglang/srt/model_executor/model_runner.py:1010)
    initialize (sglang/srt/model_executor/model_runner.py:300)"""
    case("kv-sglang-hicache-host-pool", "kv_cache_alloc", "progressing", "log+stacks",
         {"engine": "sglang", "engine_version": "0.5.1", "gpu_model": "NVIDIA H100 80GB HBM3", "tp": 1},
         log="\n".join(log), stack_TP0=stack,
         cmd="python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --enable-hierarchical-cache --hicache-ratio 8")

    case("cpu-oversub-omp-loader", "cpu_thread_oversubscription", "progressing", "log",
         {"engine": "vllm", "engine_version": "0.8.4", "gpu_model": "NVIDIA H100 80GB HBM3", "tp": 8},
         log="\n".join(VLLM_HEAD(100, "04-04 04:04:04", "Qwen/QwQ-32B")[:6] + [
             "(VllmWorker rank=0 pid=300) INFO 04-04 04:04:30 [gpu_model_runner.py:1329] Starting to load model Qwen/QwQ-32B..."]),
         env="OMP_NUM_THREADS=224\n", notes_md="load average 900 on 224 cores")

    log = ["[2025-05-05 05:05:05 TP0] Init torch distributed begin.",
           "a1b2c3:120:180 [0] NCCL INFO NET/Socket : Using [0]eth0:172.17.0.2<0>",
           "a1b2c3:120:180 [0] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device",
           "a1b2c3:120:180 [0] NCCL INFO transport/shm.cc:114 -> 2"]
    case("shm-docker-64m", "shm_too_small", "crashed", "log",
         {"engine": "sglang", "engine_version": "0.4.6", "gpu_model": "NVIDIA A10", "tp": 2},
         log="\n".join(log), cmd="docker run --gpus all lmsysorg/sglang:latest python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B --tp 2")

    stack = """Thread 2222 (idle): "MainThread"
    _get_config_dict (transformers/configuration_utils.py:700)
    from_pretrained (transformers/models/auto/tokenization_auto.py:900)
    get_tokenizer (sglang/srt/hf_transformers_utils.py:200)
    __init__ (sglang/srt/managers/detokenizer_manager.py:70)
    run_detokenizer_process (sglang/srt/managers/detokenizer_manager.py:250)
    hf_hub_download (huggingface_hub/file_download.py:800)"""
    case("tok-detok-hub-ratelimit", "tokenizer_or_detokenizer", "stalled", "stacks",
         {"engine": "sglang", "engine_version": "0.4.9", "gpu_model": "NVIDIA L4", "tp": 1},
         stack_detokenizer=stack.replace("    hf_hub_download (huggingface_hub/file_download.py:800)", "").rstrip())

    log = ["[2026-02-02 02:02:02 TP0] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=60.00 GB, mem usage=15.00 GB.",
           "[2026-02-02 02:02:03 TP0] [HS_DUMP] registering hidden-state hook on layer 20",
           "[2026-02-02 02:02:03 TP0] [HS_DUMP] waiting for dump consumer on /tmp/hs.sock"]
    stack = """Thread 1 (idle): "MainThread"
    accept (socket.py:295)
    wait_consumer (/home/bob/hs_dump/hook.py:41)
    register (/home/bob/hs_dump/hook.py:18)
    init_attention_backends (sglang/srt/model_executor/model_runner.py:1105)"""
    case("patch-hsdump-hook", "patch_or_user_code", "stalled", "log+stacks",
         {"engine": "sglang", "engine_version": "0.5.9", "gpu_model": "NVIDIA H100 80GB HBM3", "tp": 1},
         log="\n".join(log), stack_TP0=stack)


if __name__ == "__main__":
    main()
