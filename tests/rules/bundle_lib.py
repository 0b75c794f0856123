"""Building blocks for hand-assembled rule-test bundles (used by build_bundles.py): logs, py-spy text stacks, procs, GPUs."""
import json

SITE = "/usr/local/lib/python3.12/dist-packages/"
STDLIB = "/usr/lib/python3.12/"
TS = "2026-11-29 23:{m:02d}:{s:02d}"


def meta(engine="sglang", gpu="NVIDIA H200", cc="9.0", tp=2, nnodes=1, version=None, **kw):
    m = {"format": "hangwatch-bundle/1", "engine": engine, "engine_version": version,
         "gpu_model": gpu, "compute_capability": cc, "nnodes": nnodes, "tp": tp}
    m.update(kw)
    return m


# ---------------------------------------------------------------- SGLang logs

class Clock:
    def __init__(self):
        self.t = 0

    def __call__(self, step=1):
        self.t += step
        return TS.format(m=(self.t // 60) % 60, s=self.t % 60)


def sg_stages(tp=2, old=False, backend_line=None, nccl="2.27.5", model_type="Qwen3ForCausalLM", capture=True):
    """Ordered (stage, lines) for a healthy SGLang start; ranks TP0..TP{tp-1}."""
    c = Clock()
    ranks = [f" TP{i}" for i in range(tp)] if tp > 1 else [""]
    st = []
    launcher = []
    if backend_line:
        launcher.append(f"[{c()}] {backend_line}")
    launcher.append(f"[{c()}] server_args=ServerArgs(model_path='/models/model', tp_size={tp}, mem_fraction_static=0.85, "
                    f"chunked_prefill_size=8192, disable_cuda_graph=False, random_seed=1234)")
    st.append(("args", launcher))
    begin = "Init torch distributed begin." if old else "Init parallel begin."
    st.append(("init_begin", [f"[{c()}{r}] {begin}" for r in ranks]))
    if tp > 1:
        st.append(("nccl", [f"[{c()}{ranks[0]}] sglang is using nccl=={nccl}"]))
    if old:
        st.append(("init_end", [f"[{c(2)}{r}] Init torch distributed ends. elapsed=2.1{i} s, mem usage=0.6{i} GB" for i, r in enumerate(ranks)]))
    else:
        st.append(("init_end", [f"[{c(2)}{r}] Init parallel ends. elapsed=2.4{i} s" for i, r in enumerate(ranks)]
                   + [f"[{c()}{r}] Memory baseline taken. mem usage=0.8{i} GB" for i, r in enumerate(ranks)]))
    st.append(("load_begin", [f"[{c()}{r}] Load weight begin. avail mem=138.2{i} GB" for i, r in enumerate(ranks)]))
    bar = "Loading safetensors checkpoint shards" if old else "Multi-thread loading shards"
    st.append(("bar", [f"{bar}: {p}% Completed | {n}/4 [00:0{n}<00:0{4-n}, 1.1it/s]" for n, p in ((1, 25), (2, 50), (3, 75), (4, 100))]))
    if old:
        st.append(("load_end", [f"[{c(6)}{r}] Load weight end. elapsed=5.1{i} s, type={model_type}, dtype=torch.bfloat16, avail mem=130.5{i} GB, mem usage=7.65 GB." for i, r in enumerate(ranks)]))
    else:
        st.append(("load_end", [f"[{c(6)}{r}] Load weight end. elapsed=5.1{i} s, type={model_type}, avail mem=130.5{i} GB, mem usage=7.65 GB." for i, r in enumerate(ranks)]))
    kv = []
    for r in ranks:
        if old:
            kv.append(f"[{c()}{r}] KV Cache is allocated. #tokens: 1400000, K size: 48.00 GB, V size: 48.00 GB")
        else:
            kv.append(f"[{c()}{r}] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1400000, K size: 48.00 GB, V size: 48.00 GB")
    kv += [f"[{c()}{r}] Memory pool end. avail mem=32.1{i} GB" for i, r in enumerate(ranks)]
    st.append(("kv", kv))
    if capture:
        if old:
            st.append(("capture_begin", [f"[{c()}{r}] Capture cuda graph begin. This can take up to several minutes. avail mem=31.8{i} GB" for i, r in enumerate(ranks)]
                       + ["Capturing batches (bs=160 avail_mem=31.70 GB):  20%|██        | 7/35 [00:02<00:08,  3.1it/s]"]))
            st.append(("capture_end", [f"[{c(12)}{r}] Capture cuda graph end. Time elapsed: 12.4{i} s. mem usage=1.20 GB. avail mem=30.6{i} GB." for i, r in enumerate(ranks)]))
        else:
            st.append(("capture_begin", [f"[{c()}{r}] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=31.8{i} GB" for i, r in enumerate(ranks)]
                       + ["Capturing batches (bs=160 avail_mem=31.70 GB):  20%|██        | 7/35 [00:02<00:08,  3.1it/s]"]))
            st.append(("capture_end", [f"[{c(12)}{r}] Capture target decode CUDA graph end. bs=[1, 2, 4, 8, 16, 32, 64, 128, 160], elapsed=12.4{i} s, mem usage=1.20 GB, avail mem=30.6{i} GB." for i, r in enumerate(ranks)]))
    st.append(("summary", [f"[{c()}{ranks[0]}] max_total_num_tokens=1400000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4096, context_len=40960, available_gpu_mem=30.60 GB"]))
    st.append(("uvicorn", [f"[{c()}] INFO:     Started server process [4100]", f"[{c()}] INFO:     Waiting for application startup.",
                           f"[{c()}] INFO:     Application startup complete.",
                           f"[{c()}] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)"]))
    st.append(("warmup_get", [f"[{c()}] INFO:     127.0.0.1:53320 - \"GET /model_info HTTP/1.1\" 200 OK"]))
    st.append(("ready", [f"[{c()}{ranks[0]}] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0",
                         f"[{c()}] INFO:     127.0.0.1:53330 - \"POST /generate HTTP/1.1\" 200 OK",
                         f"[{c()}] The server is fired up and ready to roll!"]))
    return st


def sg_log(upto, extra=(), drop=(), **kw):
    """SGLang log through stage `upto` (inclusive), skipping `drop`, then `extra` lines."""
    out = []
    for name, lines in sg_stages(**kw):
        if name not in drop:
            out += lines
        if name == upto:
            break
    return "\n".join(list(out) + list(extra)) + "\n"


# ---------------------------------------------------------------- vLLM logs

def v_stages(tp=2, nccl="2.27.3", backend="Flash Attention", compile=True):
    c = Clock()
    def w(i, file, msg):
        name = f"Worker_TP{i}" if tp > 1 else "EngineCore_DP0"
        pid = 2100 + i if tp > 1 else 2000
        return f"({name} pid={pid}) INFO {ts()} [{file}] {msg}"
    def e(file, msg, proc="EngineCore_DP0", pid=2000, level="INFO"):
        return f"({proc} pid={pid}) {level} {ts()} [{file}] {msg}"
    def ts():
        c.t += 1
        return f"11-29 23:{(c.t // 60) % 60:02d}:{c.t % 60:02d}"
    st = []
    st.append(("header", [e("api_server.py:1896", "vLLM API server version 0.11.0", "APIServer", 1000),
                          e("core.py:77", "Initializing a V1 LLM engine (v0.11.0) with config: model='/models/model', "
                            f"tensor_parallel_size={tp}, dtype=torch.bfloat16, enforce_eager=False")]))
    ranks = range(tp)
    dist = [w(i, "parallel_state.py:1208", f"rank {i} in world size {tp} is assigned as DP rank 0, PP rank 0, TP rank {i}, EP rank {i}") for i in ranks]
    if tp > 1:
        dist.append(w(0, "pynccl.py:103", f"vLLM is using nccl=={nccl}"))
    st.append(("dist", dist))
    if tp > 1:
        st.append(("ca", [w(i, "custom_all_reduce.py:35", "Skipping P2P check and trusting the driver's P2P report.") for i in ranks]))
    st.append(("load_begin", [w(i, "gpu_model_runner.py:2602", "Starting to load model /models/model...") for i in ranks]
               + [w(i, "cuda.py:366", f"Using {backend} backend on V1 engine.") for i in ranks]))
    st.append(("bar", [f"Loading safetensors checkpoint shards: {p}% Completed | {n}/4 [00:0{n}<00:0{4-n},  1.20it/s]" for n, p in ((1, 25), (2, 50), (4, 100))]))
    st.append(("load_end", [w(i, "default_loader.py:267", "Loading weights took 3.12 seconds") for i in ranks]
               + [w(i, "gpu_model_runner.py:2653", "Model loading took 7.6 GiB and 3.9 seconds") for i in ranks]))
    if compile:
        st.append(("compile_begin", [w(i, "backends.py:548", "Using cache directory: /root/.cache/vllm/torch_compile_cache/1a2b3c4d5e/rank_{i}_0/backbone for vLLM's torch.compile") for i in ranks]
                   + [w(i, "backends.py:559", "Dynamo bytecode transform time: 6.10 s") for i in ranks]))
        st.append(("compile_end", [w(i, "backends.py:197", "Compiling a graph for dynamic shape takes 20.1 s") for i in ranks]
                   + [w(i, "monitor.py:34", "torch.compile takes 26.2 s in total") for i in ranks]))
    st.append(("kv", [w(i, "gpu_worker.py:298", "Available KV cache memory: 60.50 GiB") for i in ranks]
               + [e("kv_cache_utils.py:1087", "GPU KV cache size: 900,000 tokens"),
                  e("kv_cache_utils.py:1091", "Maximum concurrency for 40,960 tokens per request: 21.97x")]))
    st.append(("capture", ["Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67 [00:05<00:00, 12.50it/s]",
                           "Capturing CUDA graphs (decode, FULL): 100%|██████████| 35/35 [00:02<00:00, 14.10it/s]"]
               + [w(i, "gpu_model_runner.py:3480", "Graph capturing finished in 8 secs, took 0.60 GiB") for i in ranks]))
    st.append(("engine_ready", [e("core.py:210", "init engine (profile, create kv cache, warmup model) took 50.20 seconds")]))
    api = lambda f, m: e(f, m, "APIServer", 1000)  # noqa: E731
    st.append(("routes", [api("api_server.py:1692", "Supported_tasks: ['generate']"),
                          api("api_server.py:1912", "Starting vLLM API server 0 on http://0.0.0.0:8000"),
                          api("launcher.py:34", "Available routes are:"),
                          api("launcher.py:42", "Route: /openapi.json, Methods: GET, HEAD"),
                          api("launcher.py:42", "Route: /health, Methods: GET"),
                          api("launcher.py:42", "Route: /v1/chat/completions, Methods: POST")]))
    st.append(("uvicorn", ["(APIServer pid=1000) INFO:     Started server process [1000]",
                           "(APIServer pid=1000) INFO:     Waiting for application startup.",
                           "(APIServer pid=1000) INFO:     Application startup complete."]))
    return st


def v_log(upto, extra=(), drop=(), **kw):
    out = []
    for name, lines in v_stages(**kw):
        if name not in drop:
            out += lines
        if name == upto:
            break
    return "\n".join(list(out) + list(extra)) + "\n"


def v_line(msg, file="shm_broadcast.py:466", proc="EngineCore_DP0", pid=2000, level="INFO", when="11-29 23:12:00"):
    return f"({proc} pid={pid}) {level} {when} [{file}] {msg}"


# ---------------------------------------------------------------- stacks (py-spy text)

def fr(func, path, line):
    if path.startswith("/") or path.startswith("<"):
        where = path
    elif path.split("/")[0] in ("multiprocessing", "threading.py", "concurrent", "selectors.py", "subprocess.py", "socket.py", "time.py", "queue.py", "runpy.py", "http", "urllib", "json", "ssl.py"):
        where = STDLIB + path
    else:
        where = SITE + path
    return f"    {func} ({where}:{line})"


def nat(func, lib):
    return f"    {func} ({lib})"


SPAWN = [fr("BaseProcess.run", "multiprocessing/process.py", 108), fr("BaseProcess._bootstrap", "multiprocessing/process.py", 314),
         fr("_main", "multiprocessing/spawn.py", 135), fr("spawn_main", "multiprocessing/spawn.py", 122), "    <module> (<string>:1)"]
SCHED = [fr("Scheduler.__init__", "sglang/srt/managers/scheduler.py", 568), fr("run_scheduler_process", "sglang/srt/managers/scheduler.py", 6362)] + SPAWN
MODEL_RUNNER = [fr("ModelRunner.initialize", "sglang/srt/model_executor/model_runner.py", 715),
                fr("ModelRunner.__init__", "sglang/srt/model_executor/model_runner.py", 499),
                fr("TpModelWorker._init_model_runner", "sglang/srt/managers/tp_worker.py", 487),
                fr("TpModelWorker.__init__", "sglang/srt/managers/tp_worker.py", 319),
                fr("Scheduler.init_tp_model_worker", "sglang/srt/managers/scheduler.py", 1033),
                fr("Scheduler.init_model_worker", "sglang/srt/managers/scheduler.py", 1130)] + SCHED
INIT_DIST = [fr("init_distributed_environment", "sglang/srt/distributed/parallel_state.py", 2517),
             fr("_init_parallel_groups", "sglang/srt/distributed/bootstrap.py", 322),
             fr("init_parallel_runtime", "sglang/srt/distributed/bootstrap.py", 152)] + SCHED
INIT_MP = [fr("GroupCoordinator.__init__", "sglang/srt/distributed/parallel_state.py", 463),
           fr("init_model_parallel_group", "sglang/srt/distributed/parallel_state.py", 2186),
           fr("initialize_model_parallel", "sglang/srt/distributed/parallel_state.py", 2686),
           fr("_init_parallel_groups", "sglang/srt/distributed/bootstrap.py", 330),
           fr("init_parallel_runtime", "sglang/srt/distributed/bootstrap.py", 152)] + SCHED
LOAD = [fr("DefaultModelLoader.load_weights_only", "sglang/srt/model_loader/loader.py", 1063),
        fr("DefaultModelLoader.load_weights_and_postprocess", "sglang/srt/model_loader/loader.py", 1029),
        fr("DefaultModelLoader.load_model", "sglang/srt/model_loader/loader.py", 1020),
        fr("load_model_with_memory_saver", "sglang/srt/model_executor/model_runner_components/load_model_utils.py", 346),
        fr("ModelRunner.load_model", "sglang/srt/model_executor/model_runner.py", 1312)] + MODEL_RUNNER
CAPTURE = [fr("DecodeCudaGraphRunner._capture_one_stream", "sglang/srt/model_executor/runner/decode_cuda_graph_runner.py", 1318),
           fr("DecodeCudaGraphRunner._capture", "sglang/srt/model_executor/runner/decode_cuda_graph_runner.py", 1253),
           fr("DecodeCudaGraphRunner.capture", "sglang/srt/model_executor/runner/decode_cuda_graph_runner.py", 1249),
           fr("DecodeCudaGraphRunner.__init__", "sglang/srt/model_executor/runner/decode_cuda_graph_runner.py", 275),
           fr("capture_decode_graph", "sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py", 703),
           fr("capture_cuda_graphs", "sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py", 391),
           fr("ModelRunner.init_cuda_graphs", "sglang/srt/model_executor/model_runner.py", 1170),
           fr("TpModelWorker.init_cuda_graphs", "sglang/srt/managers/tp_worker.py", 433),
           fr("Scheduler.init_all_cuda_graphs", "sglang/srt/managers/scheduler.py", 1122),
           fr("Scheduler.init_model_worker", "sglang/srt/managers/scheduler.py", 1140)] + SCHED
CAPTURE_ONE = [fr("FullCudaGraphBackend.capture_one", "sglang/srt/model_executor/runner_backend/full_cuda_graph_backend.py", 172),
               fr("DecodeCudaGraphRunner.capture_one_shape", "sglang/srt/model_executor/runner/decode_cuda_graph_runner.py", 1368)] + CAPTURE
FORWARD = [fr("Qwen3ForCausalLM.forward", "sglang/srt/models/qwen3.py", 420),
           fr("_call_impl", "torch/nn/modules/module.py", 1784), fr("_wrapped_call_impl", "torch/nn/modules/module.py", 1773),
           fr("DecodeCudaGraphRunner.run_once", "sglang/srt/model_executor/runner/decode_cuda_graph_runner.py", 1410)] + CAPTURE_ONE
ATTN_INIT = [fr("build_attention_backends", "sglang/srt/model_executor/model_runner_components/attention_backend_setup.py", 75),
             fr("ModelRunner.init_attention_backends", "sglang/srt/model_executor/model_runner.py", 1105),
             fr("TpModelWorker.init_attention_backends", "sglang/srt/managers/tp_worker.py", 427),
             fr("Scheduler.init_all_attention_backends", "sglang/srt/managers/scheduler.py", 1113),
             fr("Scheduler.init_model_worker", "sglang/srt/managers/scheduler.py", 1138)] + SCHED
KV = [fr("KVCacheConfigurator._init_pools", "sglang/srt/mem_cache/kv_cache_configurator.py", 777),
      fr("KVCacheConfigurator.configure", "sglang/srt/mem_cache/kv_cache_configurator.py", 480),
      fr("ModelRunner.alloc_memory_pool", "sglang/srt/model_executor/model_runner.py", 982),
      fr("TpModelWorker.alloc_memory_pool", "sglang/srt/managers/tp_worker.py", 409),
      fr("Scheduler.init_target_memory_pool", "sglang/srt/managers/scheduler.py", 1090),
      fr("Scheduler.init_memory_pools", "sglang/srt/managers/scheduler.py", 1100),
      fr("Scheduler.init_model_worker", "sglang/srt/managers/scheduler.py", 1137)] + SCHED
IDLE_LOOP = [fr("Scheduler.event_loop_overlap", "sglang/srt/managers/scheduler.py", 1402),
             fr("run_scheduler_process", "sglang/srt/managers/scheduler.py", 6370)] + SPAWN
LAUNCHER_WAIT = [fr("_PollLikeSelector.select", "selectors.py", 415), fr("wait", "multiprocessing/connection.py", 947),
                 fr("Connection._poll", "multiprocessing/connection.py", 440), fr("_ConnectionBase.poll", "multiprocessing/connection.py", 257),
                 fr("_wait_for_scheduler_ready", "sglang/srt/entrypoints/engine.py", 2025),
                 fr("Engine._launch_scheduler_processes.<locals>.wait_for_ready", "sglang/srt/entrypoints/engine.py", 995),
                 fr("Engine._launch_subprocesses", "sglang/srt/entrypoints/engine.py", 1350),
                 fr("launch_server", "sglang/srt/entrypoints/http_server.py", 3156),
                 fr("run_server", "sglang/launch_server.py", 67), fr("<module>", "sglang/launch_server.py", 84)]

# vLLM
V_WORKER = [fr("WorkerProc.__init__", "vllm/v1/executor/multiproc_executor.py", 555),
            fr("WorkerProc.worker_main", "vllm/v1/executor/multiproc_executor.py", 702)] + SPAWN
V_INIT_DEVICE = [fr("init_worker_distributed_environment", "vllm/v1/worker/gpu_worker.py", 749),
                 fr("Worker.init_device", "vllm/v1/worker/gpu_worker.py", 198),
                 fr("WorkerWrapperBase.init_device", "vllm/worker/worker_base.py", 611)] + V_WORKER
V_PROFILE = [fr("GPUModelRunner.profile_run", "vllm/v1/worker/gpu_model_runner.py", 3310),
             fr("Worker.determine_available_memory", "vllm/v1/worker/gpu_worker.py", 263),
             fr("WorkerWrapperBase.execute_method", "vllm/worker/worker_base.py", 628),
             fr("WorkerProc.worker_busy_loop", "vllm/v1/executor/multiproc_executor.py", 778),
             fr("WorkerProc.worker_main", "vllm/v1/executor/multiproc_executor.py", 720)] + SPAWN
V_ENGINECORE = [fr("EngineCore._initialize_kv_caches", "vllm/v1/engine/core.py", 190),
                fr("EngineCore.__init__", "vllm/v1/engine/core.py", 92),
                fr("EngineCoreProc.__init__", "vllm/v1/engine/core.py", 505),
                fr("EngineCoreProc.run_engine_core", "vllm/v1/engine/core.py", 712)] + SPAWN


def thread(frames, name="MainThread", tid=4200, active=False):
    state = "active" if active else "idle"
    return f'Thread {tid} ({state}): "{name}"\n' + "\n".join(frames)


def pyspy(pid, title, *threads):
    return f"Process {pid}: {title}\nPython v3.12.3 (/usr/bin/python3.12)\n\n" + "\n".join(threads) + "\n"


def rank_stack(i, frames, title=None, extra=(), active=False, engine="sglang", tp=2):
    pid = 4200 + i
    if title is None:
        if engine == "sglang":
            title = f"sglang::scheduler_TP{i}" if tp > 1 else "sglang::scheduler"
        else:
            title = f"VLLM::Worker_TP{i}" if tp > 1 else "VLLM::EngineCore"
    return pyspy(pid, title, thread(frames, tid=pid, active=active), *extra)


def stacks_all(tp, frames_for, **kw):
    """{TPi: text} with `frames_for(i)` giving each rank's main-thread frames."""
    return {f"TP{i}": rank_stack(i, frames_for(i), tp=tp, **kw) for i in range(tp)}


# ---------------------------------------------------------------- procs, GPUs, ports

def procs(tp=2, engine="sglang", dead=None, states=None, threads=None, compilers=0, extra=(), exit_code=-9, tokenizer_dead=False):
    out = []
    if engine == "sglang":
        out.append({"pid": 4100, "ppid": 1, "cmdline": "python3 -m sglang.launch_server --model-path /models/model --tp %d" % tp,
                    "role": "launcher", "rank": None, "state": "S", "cpu_percent": 0.5, "rss_mib": 2100, "alive": True, "exit_code": None})
        for i in range(tp):
            rank = f"TP{i}" if tp > 1 else None
            title = f"sglang::scheduler_TP{i}" if tp > 1 else "sglang::scheduler"
            p = {"pid": 4200 + i, "ppid": 4100, "cmdline": title, "role": "scheduler", "rank": rank, "state": "S",
                 "cpu_percent": 1.0, "rss_mib": 9000, "alive": True, "exit_code": None}
            out.append(p)
        out.append({"pid": 4150, "ppid": 4100, "cmdline": "sglang::detokenizer", "role": "detokenizer", "rank": None, "state": "S",
                    "cpu_percent": 0.0, "rss_mib": 600, "alive": not tokenizer_dead, "exit_code": (1 if tokenizer_dead else None)})
    else:
        out.append({"pid": 1000, "ppid": 1, "cmdline": "/usr/bin/python3 /usr/local/bin/vllm serve /models/model --tensor-parallel-size %d" % tp,
                    "role": "launcher", "rank": None, "state": "S", "cpu_percent": 0.5, "rss_mib": 1800, "alive": True, "exit_code": None})
        out.append({"pid": 2000, "ppid": 1000, "cmdline": "VLLM::EngineCore", "role": "engine_core", "rank": None, "state": "S",
                    "cpu_percent": 1.0, "rss_mib": 3000, "alive": True, "exit_code": None})
        if tp > 1:
            for i in range(tp):
                out.append({"pid": 4200 + i, "ppid": 2000, "cmdline": f"VLLM::Worker_TP{i}", "role": "worker", "rank": f"TP{i}", "state": "S",
                            "cpu_percent": 1.0, "rss_mib": 8000, "alive": True, "exit_code": None})
    for p in out:
        if p["rank"] and dead and p["rank"] in dead:
            p.update(alive=False, state=None, exit_code=exit_code, cpu_percent=None)
        if states and (p["rank"] in states or p["role"] in states):
            p["state"] = states.get(p["rank"], states.get(p["role"]))
        if threads and p["role"] in ("scheduler", "worker", "engine_core"):
            p["num_threads"] = threads
    for k in range(compilers):
        out.append({"pid": 5000 + k, "ppid": 4200, "cmdline": "/usr/local/cuda/bin/nvcc -gencode arch=compute_90a,code=sm_90a -c kernel.cu -o kernel.o" if k == 0
                    else "/usr/local/cuda/nvvm/bin/cicc --gen_device_code kernel.cpp1.ii", "role": "compiler", "rank": None, "state": "R",
                    "cpu_percent": 99.0, "rss_mib": 900, "alive": True, "exit_code": None})
    out += list(extra)
    return out


def gpus(n=2, name="NVIDIA H200", cc="9.0", util=0, mem=(70000, 70000), samples=2, util_by=None):
    s = []
    for k in range(samples):
        used = mem[0] + (mem[1] - mem[0]) * k / max(samples - 1, 1)
        g = []
        for i in range(n):
            u = util_by[i] if util_by else util
            g.append({"index": i, "uuid": f"GPU-0000{i}", "name": name, "compute_capability": cc,
                      "memory_used_mib": used, "memory_total_mib": 143771, "utilization_pct": u,
                      "processes": [{"pid": 4200 + i, "used_mib": used}]})
        s.append({"t": 10.0 * k, "gpus": g})
    return {"samples": s}


def env(**kw):
    return "".join(f"{k}={v}\n" for k, v in kw.items())


def dumps(obj):
    return json.dumps(obj, indent=1) + "\n"
