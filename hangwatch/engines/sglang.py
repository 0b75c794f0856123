"""SGLang: log markers for 0.4.6, 0.5.9 and 0.5.23, process titles, default port.

Strings and regexes come from ../shared/reference/sglang-startup.md §2-§4 and §8; each row is the
union over the three versions of one mechanism (a phase's begin line, its end line, its bar).
"""

from __future__ import annotations

import re
from functools import lru_cache

from hangwatch.engines.base import Engine, LogPrefix, Marker, ParsedPrefix, bar, marker, strip_uvicorn
from hangwatch.engines.endpoints import HealthEndpoint
from hangwatch.model import Phase, normalise_rank, rank_from_name

# `[2026-11-29 23:43:26.123 DP0 TP3] msg`; rank tags in any order (0.4.6 wrote DP TP PP),
# date-less stamps (`[23:17:01 TP7]`) from 2024 logs.
_PREFIX = re.compile(
    r"\[(?P<ts>(?:\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?)"
    r"(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] ?(?P<msg>.*)",
    re.S,
)


def _parse_prefix(text: str) -> ParsedPrefix | None:
    m = _PREFIX.match(text)
    if m is None:
        return None
    ts, ranks, msg = m.group("ts", "ranks", "msg")
    return _rank(ranks), None, ts, strip_uvicorn(msg), None


@lru_cache(maxsize=1024)
def _rank(ranks: str) -> str | None:
    """` TP3 DP0` -> `DP0_TP3`; cached: a log has a handful of distinct prefixes."""
    return normalise_rank(ranks.split()) if ranks else None


_GRAPH = r"(?:piecewise )?(?:cuda|CUDA|cpu|CPU|npu|NPU|xpu|XPU) graph"
_CAPTURE_NAME = rf"^Capture (?:(?:target|draft) (?:prefill|decode|verify) )?{_GRAPH}"

MARKERS: tuple[Marker, ...] = (
    # launcher, while resolving arguments (before any rank starts): LAUNCH, backend in detail
    marker(
        Phase.LAUNCH,
        "Attention backend not",
        r"Attention backend not (?:specified|set)\. Use (?P<attention_backend>\w+) backend by default\.",
    ),
    # 1. distributed init (0.5.23 "Init parallel"; 0.4.6/0.5.9 "Init torch distributed")
    marker(Phase.DIST_INIT, "Init ", r"^Init (?:parallel|torch distributed) begin\."),
    marker(Phase.DIST_INIT, "Init ", r"^Init (?:parallel|torch distributed) ends\.", end=True),
    marker(Phase.DIST_INIT, "Memory baseline taken", r"^Memory baseline taken\.", end=True, step="memory_baseline"),
    marker(Phase.DIST_INIT, "Gated launch", r"^Gated launch (?:waiting for activation|activated)"),
    marker(Phase.DIST_INIT, "warmup completed in", r"^(?:NCCL|RCCL|HCCL)(?:/\w+)* warmup completed in"),
    marker(Phase.DIST_INIT, "Custom allreduce failed", r"Setup Custom allreduce failed", step="custom_allreduce"),
    # 2. weights
    marker(Phase.WEIGHT_LOAD, "Load weight begin", r"^Load weight begin\."),
    marker(Phase.WEIGHT_LOAD, "Load weight end", r"^Load weight end\.", end=True),
    marker(Phase.WEIGHT_LOAD, "Found local HF snapshot", r"^Found local HF snapshot"),
    # 3. KV pool
    marker(
        Phase.KV_CACHE,
        "KV Cache ",
        r"KV Cache (?:is allocated|VA upper bound)\. (?:dtype: (?P<kv_dtype>[^,]+), )?#tokens: (?P<tokens>\d+)",
    ),
    marker(Phase.KV_CACHE, "Memory pool end", r"^Memory pool end\.", end=True),
    marker(Phase.KV_CACHE, "Using KV cache dtype", r"^Using KV cache dtype: (?P<kv_dtype>\S+)"),
    marker(Phase.KV_CACHE, "available memory for KV cache", r"The available memory for KV cache is"),
    # 4-5. attention backend, kernel JIT, autotune, torch.compile (FlashInfer rows are common)
    marker(Phase.ATTN_BACKEND, "DeepGEMM JIT Pre-Compile", r"Entering DeepGEMM JIT Pre-Compile session", jit="deep_gemm"),
    marker(Phase.ATTN_BACKEND, "DeepGEMM JIT Compiling", r"Try DeepGEMM JIT Compiling for <(?P<kernel>\w+)>", jit="deep_gemm"),
    bar(Phase.ATTN_BACKEND, "DeepGEMM warmup", r"DeepGEMM warmup", jit="deep_gemm"),
    marker(Phase.ATTN_BACKEND, "Cached JIT module", r"Cached JIT module (?P<jit>\S+) failed to load; rebuilding"),
    bar(Phase.ATTN_BACKEND, "Compiling num tokens", r"Compiling num tokens \(num_tokens=\d+\)", jit="torch_compile"),
    # 6. CUDA graph capture
    marker(Phase.CUDA_GRAPH, "Capture ", _CAPTURE_NAME + r" begin\."),
    marker(Phase.CUDA_GRAPH, "Capture ", _CAPTURE_NAME + r" end\.", end=True),
    marker(Phase.CUDA_GRAPH, "Capture cuda graph bs", r"^Capture cuda graph bs "),
    marker(Phase.CUDA_GRAPH, "Capture cuda graph failed", r"Capture cuda graph failed", step="capture_failed"),
    bar(Phase.CUDA_GRAPH, "Capturing ", r"Capturing batches \((?:bs=\d+ )?avail_mem=[\d.]+ GB\)"),
    bar(Phase.CUDA_GRAPH, "Capturing ", r"Capturing (?:prefill shape|num tokens) \(num_tokens=\d+ avail_mem=[\d.]+ GB\)"),
    marker(Phase.CUDA_GRAPH, "cuda graph addresses", r"Registering \d+ cuda graph addresses"),
    # 7. the scheduler's summary: it has finished its init and is about to report ready
    marker(Phase.CUDA_GRAPH, "max_total_num_tokens=", r"^max_total_num_tokens=", end=True, step="scheduler_ready"),
    # 8. launcher: every scheduler ready, uvicorn next (uvicorn rows are common)
    marker(Phase.HTTP_UP, "Engine startup timings", r"^Engine startup timings \(s\):"),
    marker(
        Phase.HTTP_UP,
        "Granian",
        r"Starting embedded Granian HTTP/2 server on (?P<host>\[[^\]]+\]|[^\s:]+):(?P<port>\d+)",
        end=True,
    ),
    # 9. warm-up request (access-log lines reach the log only when stdout is captured too)
    marker(Phase.WARMUP, "Warmup ended", r"^Warmup ended"),
    marker(Phase.WARMUP, "warmup error", r"Initialization failed\. warmup error", step="warmup_error"),
    marker(Phase.WARMUP, " HTTP/", r'"(?:GET|POST) /(?:get_model_info|model_info|generate|encode|v1/chat/completions) HTTP/'),
    marker(Phase.READY, "fired up", r"The server is fired up and ready to roll!", end=True),
)

# `sglang::scheduler_DP0_TP3`, `sglang::detokenizer`, `sglang::tokenizer_worker:4242`
_TITLE = re.compile(
    r"^sglang::(?P<name>[A-Za-z_]+?)"
    r"(?:_(?P<ranks>(?:(?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+_?)+))?(?::(?P<arg>\S+))?(?:\s|$)"
)
_TITLE_ROLES = {
    "scheduler": "scheduler",
    "detokenizer": "detokenizer",
    "detokenizer_router": "detokenizer",
    "data_parallel_controller": "dp_controller",
    "tokenizer_worker": "tokenizer",
}
# A zombie has no command line: procs shows its comm, the title cut to 15 characters, in brackets
# (`[sglang::schedul]`); the rank is lost with the rest of the title.
_ZOMBIE_TITLE = re.compile(r"^\[sglang::(?P<name>[A-Za-z_]+)\]$")
_LAUNCHER = re.compile(
    r"(?:^|\s)(?:-m\s+)?(?:\S*/)?sglang[./](?:launch_server|srt\.server)\b"  # python -m sglang.launch_server
    r"|(?:^|\s|/)sglang\s+serve\b"  # the `sglang serve` CLI
)


class SGLang(Engine):
    name = "sglang"
    title = "SGLang"
    packages = frozenset({"sglang"})
    checkout = r"srt|launch_server\.py|cli|kernels|jit_kernel"
    source_dirs = frozenset(
        "srt managers model_executor model_loader model_runner_components distributed layers mem_cache "
        "entrypoints speculative disaggregation lora".split()
    )
    source_files = frozenset(
        "scheduler.py model_runner.py tp_worker.py memory_pool.py http_server.py cuda_graph_runner.py "
        "parallel_state.py launch_server.py engine.py scheduler_process.py tokenizer_manager.py "
        "detokenizer_manager.py data_parallel_controller.py".split()
    )
    roles = ("launcher", "scheduler", "detokenizer", "tokenizer", "dp_controller")
    rank_roles = frozenset({"scheduler"})
    libraries = frozenset({"sgl_kernel"})
    program = r"sglang\.launch_server|launch_server\.py"
    serve_command = "sglang"
    launch_hint = "python -m sglang.launch_server, sglang serve"
    flag_aliases = {
        "tp-size": "tp",
        "dp-size": "dp",
        "pp-size": "pp",
        "ep-size": "ep",
        "nccl-init-addr": "dist-init-addr",
        "model-path": "model",
    }
    default_port = 30000
    rendezvous_flags = ("dist-init-addr",)
    env_prefixes = ("SGLANG_",)
    cache_dirs = (("SGLANG_CACHE_DIR", ".cache/sglang"),)
    cpu_bind_env = "SGLANG_CPU_OMP_THREADS_BIND"
    log_prefixes = (LogPrefix("[", _parse_prefix),)
    distributions = ("sglang", "sgl-kernel")
    # /ready (0.5+): 200 once the warm-up request passed, 503 before; never generates.
    # /health: 503 while starting (0.4.7+; older ones answer 200 as soon as HTTP is up); once up it
    # runs a one-token health generation (SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION), so it is asked
    # only where /ready is missing, and no more once it said ready.
    # /get_model_info answers as soon as HTTP serves, before the warm-up: "up", not ready.
    health_endpoints = (
        HealthEndpoint("/ready"),
        HealthEndpoint("/health"),
        HealthEndpoint("/get_model_info", proves="up", json_key="model_path"),
    )
    markers = MARKERS
    log_signals = (
        re.compile(r"^\[[\d\-: .]+ (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+(?: \w+\d+)*\] "),
        re.compile(r"Init (?:parallel|torch distributed) begin\.|Load weight begin\. avail mem="),
        re.compile(r"sglang is using nccl==|The server is fired up and ready to roll!|server_args=ServerArgs\("),
        re.compile(r"[/\\]sglang[/\\]srt[/\\]|\bsglang::(?:scheduler|detokenizer)"),
    )

    def _role(self, cmdline: str) -> tuple[str, str | None] | None:
        m = _TITLE.match(cmdline)
        if m:
            return _TITLE_ROLES.get(m["name"], "other"), rank_from_name(m["ranks"] or "")
        m = _ZOMBIE_TITLE.match(cmdline)
        if m:
            roles = {role for name, role in _TITLE_ROLES.items() if name.startswith(m["name"])}
            return (roles.pop() if len(roles) == 1 else "other"), None
        if _LAUNCHER.search(cmdline):
            return "launcher", None
        return None


SGLANG = SGLang()
