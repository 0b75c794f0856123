"""Engines: phase events for SGLang 0.4.6 / 0.5.9 / 0.5.23 and vLLM 0.11 / 0.33, process roles,
engine guessing, rank positions. Log strings are copied from ../shared/reference/sglang-startup.md
(rendered from the f-strings quoted there), ../shared/reference/sglang-on-cpu.md §3.4-3.5 and the DEV corpus.
"""

from __future__ import annotations

import pytest

from hangwatch.engines import MAIN, get_engine, guess_engine, rank_positions, ready_seen
from hangwatch.model import Phase, PhaseEvent
from hangwatch.parse.logs import read_log_lines
from helpers.paths import DEV_CORPUS

SGLANG = get_engine("sglang")
VLLM = get_engine("vllm")


def events(engine, text: str) -> tuple[PhaseEvent, ...]:
    return engine.phase_events(read_log_lines(text.encode()))


def brief(evs) -> list[tuple[str, str | None, bool]]:
    return [(e.phase.value, e.rank, e.end) for e in evs]


# Real SGLang 0.5.23 CPU start (../shared/reference/sglang-on-cpu.md §3.4, try 6), TP=1: no rank prefixes.
SGLANG_0523_TP1 = """\
The current platform does not support Intel AMX, will fallback to torch_native backend.
server_args={...}
Using default HuggingFace chat template with detected content format: string
Init parallel begin.
init_threads_binding: numa_index=0, world_size=1, local_omp_cpuid=0,1
Init parallel ends. elapsed=0.02 s
Memory baseline taken. mem usage=0.00 GB
Cannot detect CUDA architecture.
Load weight begin. avail mem=21.77 GB
Using Transformers backend.
Load weight end. elapsed=0.03 s, type=TransformersForCausalLM, avail mem=21.77 GB, mem usage=0.00 GB.
KV Cache is allocated. dtype: torch.bfloat16, #tokens: 4096, K size: 0.00 GB, V size: 0.00 GB
Memory pool end. avail mem=21.77 GB
max_total_num_tokens=4096, chunked_prefill_size=4096, ...
Engine startup timings (s): load_weight=0.02, kv_cache_allocation=0.36, scheduler_e2e=1.23, tokenizer_e2e=8.44
INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)
The server is fired up and ready to roll!
"""


def test_sglang_0523_cpu_start_phases_in_order():
    evs = events(SGLANG, SGLANG_0523_TP1)
    assert [(e.phase, e.end) for e in evs] == [
        (Phase.DIST_INIT, False),
        (Phase.DIST_INIT, True),
        (Phase.DIST_INIT, True),
        (Phase.WEIGHT_LOAD, False),
        (Phase.WEIGHT_LOAD, True),
        (Phase.KV_CACHE, False),
        (Phase.KV_CACHE, True),
        (Phase.CUDA_GRAPH, True),
        (Phase.HTTP_UP, False),
        (Phase.HTTP_UP, True),
        (Phase.READY, True),
    ]
    assert evs[2].detail["step"] == "memory_baseline"
    assert evs[5].detail == {"kv_dtype": "torch.bfloat16", "tokens": "4096"}
    assert evs[7].detail["step"] == "scheduler_ready"
    assert dict(evs[9].detail) == {"scheme": "http", "host": "127.0.0.1", "port": "30000"}
    assert evs[0].lineno == 4 and evs[0].text == "Init parallel begin."
    assert ready_seen(evs)
    assert rank_positions(evs) == {MAIN: (Phase.READY, True)}


# ../shared/reference/sglang-on-cpu.md §3.5 (a): TP0 waits for a second node that never comes.
SGLANG_STUCK_DIST = """\
[2026-11-29 23:43:20] server_args=ServerArgs(...)
[2026-11-29 23:43:26 TP0] Init parallel begin.
[2026-11-29 23:43:26 TP0] The total number of ranks (2) is larger than numa node number (1), ...
[2026-11-29 23:43:26 TP0] init_threads_binding: numa_index=0, world_size=2, local_omp_cpuid=0
[2026-11-29 23:43:26 TP0] init_cpu_threads_env and shared memory based AllReduce is disabled, only intel amx backend and arm64 are supported
"""


def test_sglang_stuck_in_dist_init():
    evs = events(SGLANG, SGLANG_STUCK_DIST)
    assert brief(evs) == [("dist_init", "TP0", False)]
    assert rank_positions(evs) == {"TP0": (Phase.DIST_INIT, False)}
    assert not ready_seen(evs)


# ../shared/reference/sglang-on-cpu.md §3.5 (c): TP0 finished loading and waits in the barrier; TP1 is still loading.
SGLANG_STUCK_AFTER_LOAD = """\
[2026-11-29 23:50:01 TP0] Init parallel begin.
[2026-11-29 23:50:01 TP1] Init parallel begin.
[2026-11-29 23:50:02 TP1] Init parallel ends. elapsed=1.73 s
[2026-11-29 23:50:02 TP0] Init parallel ends. elapsed=1.73 s
[2026-11-29 23:50:02 TP0] Load weight begin. avail mem=21.78 GB
[2026-11-29 23:50:02 TP1] Load weight begin. avail mem=21.78 GB
[2026-11-29 23:50:02 TP0] Load weight end. elapsed=0.03 s, type=TransformersForCausalLM, avail mem=21.77 GB, mem usage=0.00 GB.
"""


def test_rank_positions_show_the_rank_that_stands_apart():
    positions = rank_positions(events(SGLANG, SGLANG_STUCK_AFTER_LOAD))
    assert positions == {"TP0": (Phase.WEIGHT_LOAD, True), "TP1": (Phase.WEIGHT_LOAD, False)}


# SGLang 0.5.9 (older strings): torch distributed, dtype in the weight end, 0.5.9 capture lines.
SGLANG_059 = """\
[2026-02-01 10:00:00] Attention backend not specified. Use fa3 backend by default.
[2026-02-01 10:00:05 TP0] Init torch distributed begin.
[2026-02-01 10:00:05 TP0] sglang is using nccl==2.27.3
[2026-02-01 10:00:06 TP0] Init torch distributed ends. elapsed=1.02 s, mem usage=0.51 GB
[2026-02-01 10:00:06 TP0] Load weight begin. avail mem=78.12 GB
Loading safetensors checkpoint shards:  50% Completed | 1/2 [04:38<04:38, 278.99s/it]
Loading safetensors checkpoint shards: 100% Completed | 2/2 [09:16<00:00, 278.99s/it]
[2026-02-01 10:09:22 TP0] Load weight end. elapsed=556.00 s, type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.00 GB, mem usage=15.12 GB.
[2026-02-01 10:09:22 TP0] KV Cache is allocated. #tokens: 400000, K size: 24.00 GB, V size: 24.00 GB
[2026-02-01 10:09:22 TP0] Memory pool end. avail mem=14.00 GB
[2026-02-01 10:09:23 TP0] Running FlashInfer autotune...
[2026-02-01 10:09:30 TP0] FlashInfer autotune completed.
[2026-02-01 10:09:30 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=13.90 GB
Capturing batches (bs=160 avail_mem=13.85 GB):  10%|#         | 2/20 [00:01<00:09,  1.80it/s]
[2026-02-01 10:09:50 TP0] Capture cuda graph end. Time elapsed: 20.00 s. mem usage=1.00 GB. avail mem=12.90 GB.
[2026-02-01 10:09:51 TP0] Capture piecewise CUDA graph begin. avail mem=12.90 GB
Compiling num tokens (num_tokens=512):  25%|##5       | 1/4 [00:10<00:30, 10.00s/it]
[2026-02-01 10:10:30 TP0] Capture piecewise CUDA graph end. Time elapsed: 39.00 s. mem usage=0.50 GB. avail mem=12.40 GB.
[2026-02-01 10:10:31] INFO:     Started server process [1234]
[2026-02-01 10:10:31] INFO:     Waiting for application startup.
[2026-02-01 10:10:31] INFO:     Application startup complete.
[2026-02-01 10:10:31] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2026-02-01 10:10:33] The server is fired up and ready to roll!
"""


def test_sglang_059_phases_details_and_bars():
    evs = events(SGLANG, SGLANG_059)
    assert evs[0].phase is Phase.LAUNCH and evs[0].detail == {"attention_backend": "fa3"}
    assert evs[2].detail == {"nccl_version": "2.27.3"} and evs[2].phase is Phase.DIST_INIT
    shard_bars = [e for e in evs if e.phase is Phase.WEIGHT_LOAD and e.progress]
    assert [e.progress for e in shard_bars] == [(1, 2), (2, 2)]
    assert {e.rank for e in shard_bars} == {"TP0"}  # unprefixed bar belongs to rank 0
    assert [(e.phase, e.end) for e in evs if e.text.endswith(("autotune...", "completed."))] == [
        (Phase.ATTN_BACKEND, False),
        (Phase.ATTN_BACKEND, True),
    ]
    graph = [e for e in evs if e.phase is Phase.CUDA_GRAPH]
    assert [(e.end, e.progress) for e in graph] == [(False, None), (False, (2, 20)), (True, None), (False, None), (True, None)]
    compile_bar = next(e for e in evs if "Compiling num tokens" in e.text)
    assert (compile_bar.phase, compile_bar.progress, compile_bar.detail["jit"]) == (Phase.ATTN_BACKEND, (1, 4), "torch_compile")
    http = [e for e in evs if e.phase is Phase.HTTP_UP]
    assert [e.end for e in http] == [False, False, False, True]  # app startup comes before the bind
    assert evs[-1].phase is Phase.READY and ready_seen(evs)


# SGLang 0.4.6: rank-zero filtered model_runner lines, 0.4.6 capture bar, bs list.
SGLANG_046 = """\
[2025-06-01 10:00:00] Attention backend not set. Use flashinfer backend by default.
[2025-06-01 10:00:05 TP0] Init torch distributed begin.
[2025-06-01 10:00:06 TP0] Init torch distributed ends. mem usage=0.51 GB
[2025-06-01 10:00:06 TP0] Load weight begin. avail mem=78.12 GB
[2025-06-01 10:01:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.00 GB, mem usage=15.12 GB.
[2025-06-01 10:01:00 TP1] KV Cache is allocated. #tokens: 400000, K size: 24.00 GB, V size: 24.00 GB
[2025-06-01 10:01:00 TP0] Memory pool end. avail mem=14.00 GB
[2025-06-01 10:01:01 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=13.90 GB
[2025-06-01 10:01:01 TP0] Capture cuda graph bs [1, 2, 4, 8]
Capturing batches (avail_mem=13.85 GB):  50%|#####     | 2/4 [00:01<00:01,  1.80it/s]
"""


def test_sglang_046_strings():
    evs = events(SGLANG, SGLANG_046)
    assert evs[0].detail == {"attention_backend": "flashinfer"}
    assert brief(evs[1:]) == [
        ("dist_init", "TP0", False),
        ("dist_init", "TP0", True),
        ("weight_load", "TP0", False),
        ("weight_load", "TP0", True),
        ("kv_cache", "TP1", False),
        ("kv_cache", "TP0", True),
        ("cuda_graph", "TP0", False),
        ("cuda_graph", "TP0", False),
        ("cuda_graph", "TP0", False),
    ]
    assert evs[-1].progress == (2, 4)


SGLANG_0523_CAPTURE = """\
[2026-09-01 10:00:00 TP0] Capture target prefill CUDA graph begin. backend=breakable, num_tokens=[4, 8], avail mem=5.59 GB
Capturing prefill shape (num_tokens=8 avail_mem=5.50 GB):  50%|#####     | 1/2 [00:01<00:01,  1.00it/s]
[2026-09-01 10:00:02 TP0] Capture target prefill CUDA graph end. elapsed=2.00 s, mem usage=0.10 GB, avail mem=5.49 GB.
[2026-09-01 10:00:02 TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=20.00 GB
[2026-09-01 10:00:03 TP0] Entering DeepGEMM JIT Pre-Compile session. It may take a long time (typically 10-20 mins) if you have not run `sglang.compile_deep_gemm`.
[2026-09-01 10:00:03 TP0] Try DeepGEMM JIT Compiling for <GEMM_NT_F8F8BF16> N=7168, K=2048, num_groups=1 with all Ms.
DeepGEMM warmup:  30%|###       | 3/10 [00:03<00:07,  1.00it/s]
[2026-09-01 10:01:03 TP1] Capture draft verify CPU graph begin. backend=full, num_tokens_per_req=4, avail mem=20.00 GB
Capturing batches (bs=160 avail_mem=21.85 GB):  10%|#         | 2/20 [00:01<00:09,  1.80it/s]
[2026-09-01 10:01:09 TP0] Capture target decode CUDA graph end. bs=[1, 2], elapsed=66.00 s, mem usage=1.00 GB, avail mem=19.00 GB.
"""


def test_sglang_0523_capture_variants_and_deepgemm_jit():
    evs = events(SGLANG, SGLANG_0523_CAPTURE)
    assert [(e.phase.value, e.rank, e.end, e.progress) for e in evs] == [
        ("cuda_graph", "TP0", False, None),
        ("cuda_graph", "TP0", False, (1, 2)),
        ("cuda_graph", "TP0", True, None),
        ("cuda_graph", "TP0", False, None),
        ("attn_backend", "TP0", False, None),
        ("attn_backend", "TP0", False, None),
        ("attn_backend", "TP0", False, (3, 10)),
        ("cuda_graph", "TP1", False, None),
        ("cuda_graph", "TP0", False, (2, 20)),  # the bar is TP0's, not TP1's: only tp_rank 0 draws it
        ("cuda_graph", "TP0", True, None),
    ]
    assert evs[5].detail == {"jit": "deep_gemm", "kernel": "GEMM_NT_F8F8BF16"}


def test_flashinfer_jit_lines():
    text = (
        "2025-01-01 10:00:00,000 - INFO - core.py:12 - flashinfer.jit: Loading JIT ops: batch_prefill_with_kv_cache\n"
        "2025-01-01 10:05:00,000 - INFO - core.py:14 - flashinfer.jit: Finished loading JIT ops: batch_prefill_with_kv_cache\n"
    )
    evs = events(SGLANG, text)
    assert [(e.phase, e.end, e.detail["jit"]) for e in evs] == [
        (Phase.ATTN_BACKEND, False, "batch_prefill_with_kv_cache"),
        (Phase.ATTN_BACKEND, True, "batch_prefill_with_kv_cache"),
    ]


def test_nccl_info_version_line():
    (ev,) = events(SGLANG, "test:259034:259034 [0] NCCL INFO NCCL version 2.25.1+cuda12.8\n")
    assert (ev.phase, ev.rank, ev.detail) == (Phase.DIST_INIT, "TP0", {"nccl_version": "2.25.1+cuda12.8"})


def test_sglang_warmup_error_and_access_log():
    text = (
        '[2026-01-01 12:00:00] INFO:     127.0.0.1:40000 - "GET /model_info HTTP/1.1" 200 OK\n'
        "[2026-01-01 12:10:00] Initialization failed. warmup error: Traceback ...\n"
    )
    evs = events(SGLANG, text)
    assert [(e.phase, e.detail.get("step")) for e in evs] == [(Phase.WARMUP, None), (Phase.WARMUP, "warmup_error")]


# ---------------------------------------------------------------- vLLM

VLLM_033 = """\
(APIServer pid=100) INFO 08-14 10:00:00 [api_server.py:1] vLLM API server version 0.33.0
(EngineCore pid=200) INFO 08-14 10:00:05 [core.py:139] Initializing a V1 LLM engine (v0.33.0) with config: model='Qwen/Qwen2.5-3B-Instruct'
(Worker_TP0 pid=300) INFO 08-14 10:00:10 [parallel_state.py:1] rank 0 in world size 2 is assigned as DP rank 0, PP rank 0, TP rank 0, EP rank 0
(Worker_TP0 pid=300) INFO 08-14 10:00:10 [pynccl.py:113] vLLM is using nccl==2.28.9
(Worker_TP1 pid=301) INFO 08-14 10:00:10 [parallel_state.py:1] rank 1 in world size 2 is assigned as DP rank 0, PP rank 0, TP rank 1, EP rank 0
(Worker_TP0 pid=300) INFO 08-14 10:00:11 [gpu_model_runner.py:4979] Starting to load model Qwen/Qwen2.5-3B-Instruct...
(Worker_TP0 pid=300) INFO 08-14 10:00:11 [cuda.py:1] Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN', 'FLEX_ATTENTION']
Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.00s/it]
(Worker_TP0 pid=300) INFO 08-14 10:00:13 [default_loader.py:506] Loading weights took 2.00 seconds
(Worker_TP0 pid=300) INFO 08-14 10:00:13 [gpu_model_runner.py:5088] Model loading took 3.1 GiB memory and 2.500000 seconds
(Worker_TP0 pid=300) INFO 08-14 10:00:14 [monitor.py:20] Starting torch.compile
(Worker_TP0 pid=300) INFO 08-14 10:00:20 [backends.py:417] Dynamo bytecode transform time: 5.00 s
(Worker_TP0 pid=300) INFO 08-14 10:00:40 [monitor.py:40] torch.compile took 25.00 s in total
(Worker_TP0 pid=300) INFO 08-14 10:00:41 [gpu_worker.py:771] Available KV cache memory: 60.5 GiB
(EngineCore pid=200) INFO 08-14 10:00:41 [kv_cache_utils.py:1136] GPU KV cache size: 1,234,567 tokens, Maximum concurrency for 32,768 tokens per request: 37.68x
Capturing CUDA graphs (decode, FULL):  40%|####      | 2/5 [00:01<00:01,  2.00it/s]
(Worker_TP0 pid=300) INFO 08-14 10:00:50 [gpu_model_runner.py:6585] Graph capturing finished in 9 secs, took 0.50 GiB
(EngineCore pid=200) INFO 08-14 10:00:51 [core.py:392] init engine (profile, create kv cache, warmup model) took 40.00 s
(APIServer pid=100) INFO 08-14 10:00:52 [entry.py:134] Supported tasks: ['generate']
(APIServer pid=100) INFO 08-14 10:00:52 [entry.py:139] Starting vLLM server on http://0.0.0.0:8000
(APIServer pid=100) INFO 08-14 10:00:52 [launcher.py:188] Available routes are:
(APIServer pid=100) INFO 08-14 10:00:52 [launcher.py:196] Route: /health, Methods: GET
(APIServer pid=100) INFO:     Started server process [100]
(APIServer pid=100) INFO:     Waiting for application startup.
(APIServer pid=100) INFO:     Application startup complete.
"""


def test_vllm_033_full_start():
    evs = events(VLLM, VLLM_033)
    assert [(e.phase.value, e.rank, e.end) for e in evs] == [
        ("launch", None, False),
        ("launch", None, False),
        ("dist_init", "TP0", True),
        ("dist_init", "TP0", False),
        ("dist_init", "TP1", True),
        ("weight_load", "TP0", False),
        ("weight_load", "TP0", False),
        ("weight_load", "TP0", False),
        ("weight_load", "TP0", True),
        ("weight_load", "TP0", True),
        ("attn_backend", "TP0", False),
        ("attn_backend", "TP0", False),
        ("attn_backend", "TP0", True),
        ("kv_cache", "TP0", False),
        ("kv_cache", None, True),
        ("cuda_graph", None, False),
        ("cuda_graph", "TP0", True),
        ("cuda_graph", None, True),
        ("http_up", None, False),
        ("http_up", None, False),
        ("http_up", None, False),
        ("http_up", None, False),
        ("http_up", None, False),
        ("ready", None, True),
    ]
    assert evs[0].detail["vllm_version"] == "0.33.0"
    assert evs[3].detail == {"nccl_version": "2.28.9"}
    assert evs[5].detail == {"model": "Qwen/Qwen2.5-3B-Instruct"}
    assert evs[6].detail == {"attention_backend": "FLASH_ATTN"}
    assert evs[7].progress == (1, 2)  # bar attributed to TP0, the rank that draws it
    assert evs[14].detail["tokens"] == "1,234,567"
    assert evs[15].progress == (2, 5)
    assert ready_seen(evs)
    assert rank_positions(evs)[MAIN] == (Phase.READY, True)


def test_vllm_application_startup_without_engine_up_is_not_ready():
    evs = events(VLLM, "INFO:     Started server process [1]\nINFO:     Application startup complete.\n")
    assert [(e.phase, e.end) for e in evs] == [(Phase.HTTP_UP, False), (Phase.HTTP_UP, True)]
    assert not ready_seen(evs)


# Real vLLM 0.32.0 CPU start (lab/run.py vllm-healthy), TP=1, the lines that carry a phase.
VLLM_032_CPU = """\
(EngineCore pid=17559) INFO 11-30 23:44:35 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: model='m'
(Worker pid=18529) INFO 11-30 23:45:04 [parallel_state.py:1906] world_size=1 rank=0 local_rank=0 distributed_init_method=file:///tmp/vllm_dist_f1d8 backend=gloo
(Worker pid=18529) INFO 11-30 23:45:04 [parallel_state.py:2350] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank 0, ETP rank 0, EP rank N/A, EPLB rank N/A
(Worker pid=18529) INFO 11-30 23:45:04 [cpu_model_runner.py:68] Starting to load model /m...
(Worker pid=18529) INFO 11-30 23:45:05 [default_loader.py:501] Loading weights took 0.03 seconds
(Worker pid=18529) INFO 11-30 23:45:06 [cpu_model_runner.py:87] Warming up model for the compilation...
(Worker pid=18529) INFO 11-30 23:46:37 [decorators.py:743] [backbone] saved AOT compiled function to /root/.cache/vllm/torch_compile_cache/torch_aot_compile/ab/rank_0_0/model
(Worker pid=18529) INFO 11-30 23:46:38 [cpu_model_runner.py:91] Warming up done.
(Worker pid=18529) INFO 11-30 23:46:38 [cpu_worker.py:260] Explicitly set (1.0/13.09) GiB for KV cache on node 0.
(EngineCore pid=17559) INFO 11-30 23:46:38 [kv_cache_utils.py:2327] CPU KV cache size: 524,288 tokens, Maximum concurrency for 512 tokens per request: 1024.00x
(EngineCore pid=17559) INFO 11-30 23:46:39 [core.py:402] init engine (profile, create kv cache, warmup model) took 93.81 s
(APIServer pid=15988) INFO 11-30 23:46:43 [entry.py:140] Starting vLLM server on http://127.0.0.1:31573
INFO:     Started server process [15988]
INFO:     Waiting for application startup.
INFO:     Application startup complete.
"""


def test_vllm_032_cpu_compile_warmup_is_its_own_phase():
    evs = events(VLLM, VLLM_032_CPU)
    assert [(e.phase.value, e.end) for e in evs] == [
        ("launch", False),
        ("dist_init", False),
        ("dist_init", True),
        ("weight_load", False),
        ("weight_load", True),
        ("attn_backend", False),
        ("attn_backend", False),
        ("attn_backend", True),
        ("kv_cache", False),
        ("kv_cache", True),
        ("cuda_graph", True),
        ("http_up", False),
        ("http_up", False),
        ("http_up", False),
        ("ready", True),
    ]
    assert evs[5].detail == {"jit": "torch_compile"}
    assert evs[8].detail == {"gib": "1.0"}


def test_vllm_ready_when_the_engine_was_up_in_an_earlier_read():
    # GIVEN a live tail that reads the log in two pieces, the engine-up lines in the first
    lines = read_log_lines(VLLM_032_CPU.encode())
    first, second = lines[:-1], lines[-1:]
    before = VLLM.phase_events(first)
    # WHEN the second piece holds only uvicorn's line
    later = VLLM.phase_events(second, before=before)
    # THEN it is READY (without that context it is only the end of HTTP_UP)
    assert [(e.phase, e.end) for e in later] == [(Phase.READY, True)]
    assert [(e.phase, e.end) for e in VLLM.phase_events(second)] == [(Phase.HTTP_UP, True)]


def test_vllm_011_ansi_prefix_and_old_strings():
    text = (
        "\x1b[1;36m(EngineCore_DP0 pid=200)\x1b[0;0m INFO 08-14 10:00:05 [core.py:74] Initializing a V1 LLM engine (v0.11.0) with config: x\n"
        "\x1b[1;36m(EngineCore_DP0 pid=200)\x1b[0;0m INFO 08-14 10:00:30 [backends.py:559] torch.compile takes 12.50 s in total\n"
        "\x1b[1;36m(EngineCore_DP0 pid=200)\x1b[0;0m INFO 08-14 10:00:31 [gpu_worker.py:298] Available KV cache memory: 60.52 GiB\n"
        "\x1b[1;36m(EngineCore_DP0 pid=200)\x1b[0;0m INFO 08-14 10:00:31 [kv_cache_utils.py:1087] GPU KV cache size: 1,000 tokens\n"
        "\x1b[1;36m(EngineCore_DP0 pid=200)\x1b[0;0m INFO 08-14 10:00:31 [kv_cache_utils.py:1091] Maximum concurrency for 32,768 tokens per request: 3.00x\n"
        "\x1b[1;36m(APIServer pid=100)\x1b[0;0m INFO 08-14 10:00:40 [api_server.py:1912] Starting vLLM API server 0 on http://0.0.0.0:8000\n"
    )
    evs = events(VLLM, text)
    assert [(e.phase.value, e.rank, e.end) for e in evs] == [
        ("launch", "DP0", False),
        ("attn_backend", "DP0", True),
        ("kv_cache", "DP0", False),
        ("kv_cache", "DP0", True),
        ("kv_cache", "DP0", True),
        ("http_up", None, False),
    ]
    assert evs[-1].detail["addr"] == "http://0.0.0.0:8000"


def test_vllm_v0_corpus_log():
    text = open_corpus("vllm-7514")
    evs = VLLM.phase_events(read_log_lines(text))
    assert [(e.phase, e.end) for e in evs] == [
        (Phase.WEIGHT_LOAD, False),
        (Phase.WEIGHT_LOAD, True),
        (Phase.KV_CACHE, True),
        (Phase.HTTP_UP, False),
    ]
    assert evs[0].progress == (3, 3) and evs[2].detail == {"gpu_blocks": "215"}


def test_vllm_moe_backend_line_is_not_the_attention_backend():
    assert events(VLLM, "INFO 08-14 10:00:11 [fused_moe.py:1] Using TRITON backend for Unquantized MoE\n") == ()


def open_corpus(case: str) -> bytes:
    path = DEV_CORPUS / case / "server.log"
    if not path.exists():
        pytest.skip(f"corpus case {case} not present")
    return path.read_bytes()


# ---------------------------------------------------------------- positions


def test_rank_positions_latest_in_log_order_and_ready_is_sticky():
    evs = (
        PhaseEvent(Phase.ATTN_BACKEND, "TP0", 1, "compile", end=True),
        PhaseEvent(Phase.KV_CACHE, "TP0", 2, "kv"),
        PhaseEvent(Phase.READY, None, 3, "fired up", end=True),
        PhaseEvent(Phase.WARMUP, None, 4, "GET /model_info"),
    )
    assert rank_positions(evs) == {"TP0": (Phase.KV_CACHE, False), MAIN: (Phase.READY, True)}
    assert ready_seen(evs) and not ready_seen(evs[:2])
    assert rank_positions(()) == {}


# ---------------------------------------------------------------- process roles


@pytest.mark.parametrize(
    "cmdline, role",
    [
        ("sglang::scheduler_DP0_TP3", ("scheduler", "DP0_TP3")),
        ("sglang::scheduler_DP0_TP3\x00\x00\x00\x00", ("scheduler", "DP0_TP3")),
        ("sglang::scheduler", ("scheduler", None)),
        ("sglang::scheduler_TP3_PP1", ("scheduler", "PP1_TP3")),  # 0.4.6 order, same key as the log
        ("sglang::scheduler_TP0_EP0", ("scheduler", "TP0_EP0")),
        ("sglang::detokenizer", ("detokenizer", None)),
        ("sglang::detokenizer_router", ("detokenizer", None)),
        ("sglang::data_parallel_controller", ("dp_controller", None)),
        ("sglang::tokenizer_worker:4242", ("tokenizer", None)),
        ("python -m sglang.launch_server --tp 4 --enable-hierarchical-cache", ("launcher", None)),
        ("/usr/bin/python3\x00-m\x00sglang.launch_server\x00--host\x00", ("launcher", None)),
        ("/usr/local/bin/sglang serve --model-path x", ("launcher", None)),
        (
            "/usr/bin/python3 -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7) --multiprocessing-fork",
            ("other", None),
        ),
        ("/usr/bin/python3 -B -c from multiprocessing.resource_tracker import main;main(6)", ("other", None)),
        ("/usr/local/cuda/bin/nvcc -c x.cu", ("compiler", None)),
        ("ninja -v -C /root/.cache/flashinfer -f build.ninja", ("compiler", None)),
        ("/usr/local/cuda/nvvm/bin/cicc --gen_c_file_name x", ("compiler", None)),
        ("/site-packages/triton/backends/nvidia/bin/ptxas -arch=sm_90a", ("compiler", None)),
        ("/usr/lib/gcc/x86_64-linux-gnu/11/cc1plus -quiet x.cpp", ("compiler", None)),
        ("bash", None),
        ("VLLM::EngineCore", None),
        # a zombie: its comm, the title cut to 15 characters; the rank is lost
        ("[sglang::schedul]", ("scheduler", None)),
        ("[sglang::detoken]", ("detokenizer", None)),
        ("[python3]", None),
    ],
)
def test_sglang_process_roles(cmdline, role):
    assert SGLANG.process_role(cmdline) == role


@pytest.mark.parametrize(
    "cmdline, role",
    [
        ("VLLM::EngineCore", ("engine_core", None)),
        ("VLLM::EngineCore_DP0", ("engine_core", "DP0")),
        ("VLLM::Worker_TP3", ("worker", "TP3")),
        ("VLLM::Worker_DP1_PP0_TP3", ("worker", "DP1_PP0_TP3")),
        ("VLLM::Worker", ("worker", None)),
        ("VLLM::APIServer_0", ("tokenizer", None)),
        ("VLLM::DPCoordinator", ("dp_controller", None)),
        ("vllm serve Qwen/Qwen2.5-3B-Instruct", ("launcher", None)),
        ("/usr/bin/python3 /usr/local/bin/vllm serve x --tensor-parallel-size 4", ("launcher", None)),
        ("python -m vllm.entrypoints.openai.api_server --model x", ("launcher", None)),
        ("ray::RayWorkerWrapper.execute_method", ("worker", None)),
        ("ptxas -arch=sm_120", ("compiler", None)),
        ("sglang::scheduler_TP0", None),
        ("[VLLM::Worker_TP]", ("worker", None)),
        ("[VLLM::EngineCor]", ("engine_core", None)),
    ],
)
def test_vllm_process_roles(cmdline, role):
    assert VLLM.process_role(cmdline) == role


# ---------------------------------------------------------------- lookup and guessing


def test_get_engine_and_defaults():
    assert (SGLANG.name, SGLANG.default_port) == ("sglang", 30000)
    assert (VLLM.name, VLLM.default_port) == ("vllm", 8000)
    assert get_engine(" SGLang ") is SGLANG
    with pytest.raises(ValueError, match="unknown engine 'tgi'"):
        get_engine("tgi")


@pytest.mark.parametrize(
    "cmdline, name",
    [
        ("python -m sglang.launch_server --tp 16 --nnodes 2", "sglang"),
        ("sglang::scheduler_TP0", "sglang"),
        ("vllm serve --tensor-parallel-size 4", "vllm"),
        ("VLLM::Worker_TP1", "vllm"),
    ],
)
def test_guess_engine_from_cmdline(cmdline, name):
    assert guess_engine((), cmdline) == name


def test_guess_engine_from_log_prefixes():
    assert guess_engine(read_log_lines(SGLANG_STUCK_DIST.encode()), None) == "sglang"
    assert guess_engine(read_log_lines(SGLANG_0523_TP1.encode()), "") == "sglang"
    assert guess_engine(read_log_lines(VLLM_033.encode()), "bash") == "vllm"
    corpus = read_log_lines(open_corpus("hami-2641"))
    assert guess_engine(corpus, None) == "vllm"


def test_guess_engine_without_signal_is_none():
    assert guess_engine((), None) is None
    assert guess_engine(read_log_lines(b"hello\nRuntimeError: Gloo connectFullMesh failed\n"), "python train.py") is None
    nccl_only = read_log_lines(b"test:259034:259034 [0] NCCL INFO NCCL version 2.25.1+cuda12.8\n")
    assert guess_engine(nccl_only, None) is None
