"""vLLM (V1, 0.11 and 0.33; a few V0 strings): log markers, process titles, default port.

Strings from ../shared/reference/sglang-startup.md §9. vLLM has no "ready" line of its own: the API
server builds its engine client (which blocks until the engine core reports READY) before it
logs `Starting vLLM ... server` and the routes, then uvicorn logs `Application startup complete.`
once it serves on the pre-bound socket. So that uvicorn line is READY only when the log has
already shown the engine up; otherwise (a log tail that starts late, a foreign uvicorn app) it
is the end of HTTP_UP.
"""

from __future__ import annotations

import re
from dataclasses import replace

from hangwatch.engines.base import Engine, LogPrefix, Marker, ParsedPrefix, bar, marker, strip_uvicorn
from hangwatch.engines.endpoints import HealthEndpoint
from hangwatch.model import Phase, PhaseEvent, rank_from_name

# Process prefix `(EngineCore pid=123) `, `(Worker_TP1 pid=9) `, `(VllmWorker TP0 pid=9) `,
# Ray's `(RayWorkerWrapper pid=9, ip=10.0.0.1) `; corpus copies redact the pid as `pid=...`.
_PROC = re.compile(r"\((?P<proc>[\w.\- ]+?) pid=(?P<pid>\d+|\.\.\.)(?:, ip=[^)]*)?\) ?(?P<rest>.*)", re.S)
# Logger body: 0.11+/0.33 `INFO 08-14 10:01:27 [file.py:12] msg`; old `INFO 08-14 10:01:27
# model_runner.py:692] msg`; the timestamp is optional because redacted copies drop it.
_BODY = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) "
    r"(?:(?P<ts>\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:\.\d+)? )?"
    r"(?:\[[^\]\s]+?:\d+\]|[\w.\-]+\.py:\d+\]) ?(?P<msg>.*)",
    re.S,
)


def _parse_process(text: str) -> ParsedPrefix | None:
    m = _PROC.match(text)
    if m is None:
        return None
    proc, rest = m["proc"], m["rest"]
    pid = int(m["pid"]) if m["pid"].isdigit() else None
    body = _BODY.match(rest)
    if body:
        return rank_from_name(proc), proc, body["ts"], body["msg"], pid
    return rank_from_name(proc), proc, None, strip_uvicorn(rest), pid


def _parse_body(text: str) -> ParsedPrefix | None:
    m = _BODY.match(text)
    return (None, None, m["ts"], m["msg"], None) if m else None


MARKERS: tuple[Marker, ...] = (
    marker(Phase.LAUNCH, "LLM engine", r"Initializing an? (?:V1 )?LLM engine \(v?(?P<vllm_version>[^)\s]+)\)"),
    marker(Phase.LAUNCH, "API server version", r"vLLM API server version (?P<vllm_version>\S+)"),
    marker(Phase.LAUNCH, "core engine proc", r"Waiting for \d+ local, \d+ remote core engine proc"),
    # distributed init (per worker; the PyNccl version row is common)
    marker(Phase.DIST_INIT, "distributed_init_method=", r"world_size=\d+ rank=\d+ local_rank=\d+ distributed_init_method="),
    marker(Phase.DIST_INIT, "is assigned as", r"rank \d+ in world size \d+ is assigned as", end=True),
    marker(Phase.DIST_INIT, "Custom allreduce is disabled", r"Custom allreduce is disabled", step="custom_allreduce"),
    # weights; the backend is chosen while the model is built, inside this phase
    marker(Phase.WEIGHT_LOAD, "Starting to load model", r"Starting to load model (?P<model>\S+?)(?:\.\.\.)?$"),
    marker(Phase.WEIGHT_LOAD, " took ", r"^Loading (?:model )?weights took", end=True),
    marker(Phase.WEIGHT_LOAD, "Model loading took", r"^Model loading took", end=True),
    marker(
        Phase.WEIGHT_LOAD,
        "backend",
        # "Using TRITON backend for Unquantized MoE" names a MoE kernel, not attention
        r"^Using (?P<attention_backend>[\w.]+(?: [A-Z]\w*)*?) (?:attention )?backend\b(?! for )",
    ),
    # torch.compile and kernel JIT in the profiling run (FlashInfer rows are common)
    # CPU (0.32): the worker compiles in a warm-up run before sizing the KV cache; the log is
    # silent from `Warming up model for the compilation...` to `Warming up done.` (10-40 s here)
    marker(Phase.ATTN_BACKEND, "Warming up model", r"^Warming up model for the compilation", jit="torch_compile"),
    marker(Phase.ATTN_BACKEND, "Warming up done", r"^Warming up done\.", end=True),
    marker(Phase.ATTN_BACKEND, "AOT compiled", r"saved AOT compiled function to", jit="torch_compile"),
    marker(Phase.ATTN_BACKEND, "Compiling model again", r"^Compiling model again due to a load failure", jit="torch_compile"),
    marker(Phase.ATTN_BACKEND, "torch.compile", r"torch\.compile (?:took|takes) [\d.]+ s in total", end=True),
    marker(Phase.ATTN_BACKEND, "Starting torch.compile", r"Starting torch\.compile", jit="torch_compile"),
    marker(Phase.ATTN_BACKEND, "Dynamo bytecode transform", r"Dynamo bytecode transform time", jit="torch_compile"),
    marker(Phase.ATTN_BACKEND, "Compiling a graph for", r"Compiling a graph for", jit="torch_compile"),
    marker(Phase.ATTN_BACKEND, "torch.compile", r"Using cache directory: .* for vLLM's torch\.compile", jit="torch_compile"),
    marker(Phase.ATTN_BACKEND, "compiled graph", r"Directly load the compiled graph", jit="torch_compile"),
    # KV cache sizing
    marker(Phase.KV_CACHE, "Available KV cache memory", r"Available KV cache memory: (?P<gib>[\d.]+) GiB"),
    marker(Phase.KV_CACHE, "for KV cache", r"^Explicitly set \((?P<gib>[\d.]+)/[\d.]+\) GiB for KV cache"),
    marker(Phase.KV_CACHE, "KV cache size:", r"KV cache size: (?P<tokens>[\d,]+) tokens", end=True),
    marker(Phase.KV_CACHE, "Maximum concurrency for", r"^Maximum concurrency for", end=True),
    marker(Phase.KV_CACHE, "blocks:", r"# (?:GPU|cuda) blocks: (?P<gpu_blocks>\d+)", end=True),
    # CUDA graphs
    bar(Phase.CUDA_GRAPH, "Capturing CUDA graph", r"Capturing CUDA graphs? \([^)]*\)"),
    marker(Phase.CUDA_GRAPH, "Capturing ", r"^Capturing (?:cudagraphs for decoding|the model for CUDA graphs)"),
    marker(Phase.CUDA_GRAPH, "Graph capturing finished", r"Graph capturing finished in (?P<seconds>\d+) sec", end=True),
    marker(
        Phase.CUDA_GRAPH,
        "init engine",
        r"^init engine \(profile, create kv cache, warmup model\) took",
        end=True,
        step="engine_ready",  # the engine core is up: the last line before its READY handshake
    ),
    # API server: these are logged only after the engine client is up
    marker(Phase.HTTP_UP, "Starting vLLM", r"Starting vLLM (?:API )?server(?: \d+)? on (?P<addr>\S+)", step="engine_up"),
    marker(Phase.HTTP_UP, "Supported tasks", r"^Supported tasks:", step="engine_up"),
    marker(Phase.HTTP_UP, "Available routes are", r"^Available routes are:", step="engine_up"),
)

_ENGINE_UP_STEPS = frozenset({"engine_ready", "engine_up"})
_TITLE = re.compile(r"^[\w.\-]+::(?P<name>EngineCore|Worker|APIServer|DPCoordinator)(?P<suffix>_\S*)?(?:\s|$)")
_TITLE_ROLES = {"EngineCore": "engine_core", "Worker": "worker", "APIServer": "tokenizer", "DPCoordinator": "dp_controller"}
_LAUNCHER = re.compile(
    r"(?:^|\s|/)vllm\s+serve\b|(?:^|\s)(?:-m\s+)?vllm\.entrypoints\.(?:openai\.api_server|api_server|cli\.main)\b"
)
_RAY_WORKER = re.compile(r"^ray::RayWorkerWrapper")
# A zombie shows only its comm, the title cut to 15 characters (`[VLLM::Worker_TP]`, `[VLLM::EngineCor]`)
_ZOMBIE_TITLE = re.compile(r"^\[VLLM::(?P<name>[A-Za-z]+)(?:_\w*)?\]$")


class VLLM(Engine):
    name = "vllm"
    title = "vLLM"
    packages = frozenset({"vllm"})
    checkout = (
        r"v1|engine|entrypoints|model_executor|worker|executor|distributed|attention|compilation|"
        r"config|platforms|utils|multimodal|transformers_utils"
    )
    source_dirs = frozenset(
        "v1 model_executor distributed entrypoints worker executor engine compilation attention".split()
    )
    source_files = frozenset(
        "gpu_model_runner.py gpu_worker.py core.py parallel_state.py kv_cache_configurator.py".split()
    )
    roles = ("launcher", "engine_core", "worker", "tokenizer", "dp_controller")
    rank_roles = frozenset({"engine_core", "worker"})
    libraries = frozenset({"vllm_flash_attn"})
    program = r"vllm\.entrypoints\.[\w.]+|api_server\.py"
    serve_command = "vllm"
    launch_hint = "vllm serve, python -m vllm.entrypoints..."
    flag_aliases = {
        "tensor-parallel-size": "tp",
        "data-parallel-size": "dp",
        "pipeline-parallel-size": "pp",
        "expert-parallel-size": "ep",
    }
    default_port = 8000
    rendezvous_flags = ("master-addr", "master-port")
    env_prefixes = ("VLLM_",)
    cache_dirs = (("VLLM_CACHE_ROOT", ".cache/vllm"),)
    log_prefixes = (LogPrefix("(", _parse_process), LogPrefix("DIWEC", _parse_body))
    distributions = ("vllm",)
    # The API server builds its engine client (which waits for the engine core's READY) before it
    # serves any route: /health's 200 means the engine is up; /v1/models lists the served model.
    health_endpoints = (
        HealthEndpoint("/health"),
        HealthEndpoint("/v1/models", json_key="data"),
    )
    markers = MARKERS
    log_signals = (
        re.compile(r"^\((?:EngineCore|APIServer|ApiServer|Worker|VllmWorker)[\w ]* pid="),
        re.compile(r"vLLM is using nccl==|Initializing an? (?:V1 )?LLM engine|vLLM API server version"),
        re.compile(r"^(?:INFO|WARNING|ERROR|DEBUG) \d{2}-\d{2} \d{2}:\d{2}:\d{2} (?:\[[\w.]+:\d+\]|[\w.]+\.py:\d+\])"),
        re.compile(r"[/\\]vllm[/\\](?:v1|entrypoints|model_executor|worker|engine)[/\\]"),
        # shm_broadcast's wait message, the V0 tokenizer hint, and process titles in a ps listing
        re.compile(r"No available shared memory broadcast block found|initializing the fast tokenizer may take"),
        re.compile(r"\bVLLM::(?:EngineCore|Worker|APIServer)"),
    )

    def _finish(self, events: list[PhaseEvent], before: tuple[PhaseEvent, ...]) -> tuple[PhaseEvent, ...]:
        engine_up = any(event.detail.get("step") in _ENGINE_UP_STEPS for event in before)
        out = []
        for event in events:
            step = event.detail.get("step")
            engine_up = engine_up or step in _ENGINE_UP_STEPS
            if step == "app_startup":
                event = replace(event, phase=Phase.READY, end=True) if engine_up else replace(event, end=True)
            out.append(event)
        return tuple(out)

    def _role(self, cmdline: str) -> tuple[str, str | None] | None:
        m = _TITLE.match(cmdline)
        if m:
            return _TITLE_ROLES[m["name"]], rank_from_name(m["suffix"] or "")
        m = _ZOMBIE_TITLE.match(cmdline)
        if m:
            roles = {role for name, role in _TITLE_ROLES.items() if name.startswith(m["name"])}
            return (roles.pop() if len(roles) == 1 else "other"), None
        if _RAY_WORKER.match(cmdline):
            return "worker", None
        if _LAUNCHER.search(cmdline):
            return "launcher", None
        return None


VLLM_ENGINE = VLLM()
