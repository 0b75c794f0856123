"""Stack dumps of every format we meet -> `ProcessStack`s.

    parse_stack_file(name, data, source) -> [ProcessStack]   picks the format by content
    parse_pyspy_json(data, label, source, sample=0) -> ProcessStack
    frame_origin(filename, function, native) -> Origin
    stack_signature(stack, depth=8) -> str;  group_by_signature(stacks) -> {signature: [labels]}

Formats: py-spy `--json`; py-spy text (with or without `--native`, `--locals`, several processes
from `--subprocesses`); Python tracebacks; faulthandler dumps; gdb `bt` / pystack backtraces;
/proc/PID/stack kernel stacks. Text formats are read line by line by one small state machine
(`hangwatch._stacktext`), because bug reports paste them mixed, truncated and with log prefixes.
Nothing here raises on bad input: an unreadable file gives `[]` and the caller records it.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import replace
from pathlib import PurePosixPath
from typing import Any, Iterable, Sequence

from hangwatch.model import Frame, Origin, ProcessStack, Source, ThreadStack

__all__ = [
    "frame_origin",
    "group_by_signature",
    "make_frame",
    "parse_pyspy_json",
    "parse_stack_file",
    "relative_file",
    "split_name",
    "stack_signature",
]

ENGINE_PACKAGES = frozenset({"sglang", "vllm"})
_STDLIB = frozenset(sys.stdlib_module_names)
# py-spy text prints paths relative to a sys.path entry, and SGLang's schedulers come out as
# `distributed/parallel_state.py` or even `scheduler.py`, with no package. These sub-packages and
# file names exist only in the engines, so such frames are still counted as engine code.
_ENGINE_DIRS = frozenset(
    "srt v1 managers model_executor model_loader model_runner_components distributed layers mem_cache "
    "entrypoints speculative disaggregation lora worker executor engine compilation attention".split()
)
_ENGINE_FILES = frozenset(
    "scheduler.py model_runner.py tp_worker.py memory_pool.py kv_cache_configurator.py http_server.py "
    "cuda_graph_runner.py gpu_model_runner.py gpu_worker.py core.py parallel_state.py launch_server.py "
    "engine.py scheduler_process.py tokenizer_manager.py detokenizer_manager.py data_parallel_controller.py".split()
)
# Well-known third-party packages: a pasted short path such as `filelock/_api.py` is theirs.
_LIBRARIES = frozenset(
    "filelock flashinfer triton transformers huggingface_hub safetensors deep_gemm sgl_kernel numpy "
    "requests urllib3 uvicorn uvloop fastapi starlette anyio tqdm zmq msgspec pydantic tokenizers "
    "xgrammar outlines ray nccl cupy jax accelerate tilelang cutlass flash_attn vllm_flash_attn "
    "torchvision torchaudio einops aiohttp httpx setuptools pkg_resources importlib_metadata".split()
)
# An engine or torch run from a source checkout (`pip install -e`): absolute, outside
# site-packages, yet the engine's own code.
_CHECKOUT = re.compile(
    r"/(?P<pkg>sglang)/(?:srt|launch_server\.py|cli|kernels|jit_kernel)/"
    r"|/(?P<vpkg>vllm)/(?:v1|engine|entrypoints|model_executor|worker|executor|distributed|attention|compilation|"
    r"config|platforms|utils|multimodal|transformers_utils)/"
    r"|/(?P<torch>torch)/(?:distributed|cuda|nn|_dynamo|_inductor|utils|multiprocessing|_ops\.py)"
)
# A library run from a source checkout (`/workspace/flashinfer/python/flashinfer/...`): its own code.
_LIBRARY_CHECKOUT = re.compile(
    r"/(?:flashinfer|triton|transformers|sgl_kernel|deep_gemm|safetensors|filelock|huggingface_hub|cutlass|"
    r"flash_attn|tilelang|xgrammar|accelerate|tokenizers|numpy)/"
)
_PACKAGE_ROOT = re.compile(r".*/(?:site|dist)-packages/")
_STDLIB_ROOT = re.compile(r".*/lib(?:64)?/python\d+(?:\.\d+)?t?/")
_SOURCE_EXT = re.compile(r"\.(?:c|cc|cpp|cxx|h|hpp|cu|cuh|rs|pyx|S)$")
# Rust's `::h0123456789abcdef` hash and glibc's `@@GLIBC_2.34` symbol version are not names
_SYMBOL_NOISE = re.compile(r"::h[0-9a-f]{16}$|@@?[\w.]+$")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]+$")
# `TP0.json`, `TP0.1.json`, and `TP0.native.1.json` as hangwatch's own capture writes them
_FILE_NAME = re.compile(r"^(?P<stem>.+?)(?:\.native)?(?:\.(?P<sample>\d{1,9}))?(?:\.(?:json|txt|log|out))?$")


# ---------------------------------------------------------------- frames


def relative_file(filename: str) -> str:
    """A path relative to its package root: site-packages and the stdlib directory are cut off."""
    cut = _PACKAGE_ROOT.match(filename)
    if cut:
        return filename[cut.end() :]
    cut = _STDLIB_ROOT.match(filename)
    return filename[cut.end() :] if cut else filename


def _top_package(rel: str) -> str:
    first = rel.split("/", 1)[0]
    return first[:-3] if first.endswith(".py") else first


def frame_origin(filename: str | None, function: str = "", native: bool = False) -> Origin:
    """Whose code a frame runs: engine, torch, another library (or the stdlib), the user, native."""
    if native:
        return Origin.NATIVE
    if not filename or filename.startswith("<"):
        return Origin.LIBRARY  # `<string>` / `<frozen runpy>`: multiprocessing spawn and runpy shims
    rel = relative_file(filename)
    top = _top_package(rel)
    if top in ENGINE_PACKAGES:
        return Origin.ENGINE
    if top == "torch":
        return Origin.TORCH
    if rel != filename:  # under site-packages or the stdlib directory
        return Origin.LIBRARY
    if filename.startswith("/"):
        return _checkout_origin(filename)
    if top in _STDLIB or top in _LIBRARIES:
        return Origin.LIBRARY
    if ("/" in rel and top in _ENGINE_DIRS) or rel in _ENGINE_FILES:
        return Origin.ENGINE
    return Origin.USER


def _checkout_origin(filename: str) -> Origin:
    """An absolute path outside site-packages: the user's, unless it is a source checkout."""
    found = _CHECKOUT.search(filename)
    if not found:
        return Origin.LIBRARY if _LIBRARY_CHECKOUT.search(filename) else Origin.USER
    return Origin.TORCH if found.group("torch") else Origin.ENGINE


def split_name(name: str, native: bool = False) -> tuple[str, str]:
    """(function, qualname): `Worker.run.<locals>.inner` -> `inner`; `c10d::TCPStore::wait` -> `wait`."""
    qualname = name.strip() or "?"
    if not native:
        return qualname.rsplit(".", 1)[-1] or qualname, qualname
    qualname = _SYMBOL_NOISE.sub("", qualname) or qualname
    bare = _strip_nested(qualname)
    return bare.rsplit("::", 1)[-1] or qualname, qualname


def _strip_nested(name: str) -> str:
    """Drop template arguments and parameter lists, so `::` splits only the scope names."""
    out, depth = [], 0
    for ch in name:
        if ch in "<(":
            depth += 1
        elif ch in ">)" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).strip()


def _library(rel: str | None, origin: Origin, module: str | None) -> str | None:
    if origin is Origin.NATIVE:
        return PurePosixPath(module).name if module else None
    if origin is Origin.USER or not rel or rel.startswith("<"):
        return None
    top = _top_package(rel)
    # an engine frame recognised by a sub-package (`distributed/...`): which engine is unknown
    return None if origin is Origin.ENGINE and top not in ENGINE_PACKAGES else top


def make_frame(
    name: str, filename: str | None, line: int | None, native: bool, module: str | None = None, short: str | None = None
) -> Frame:
    """One frame, normalised: bare function, qualname, package-relative file, origin and library.

    `short` is the file to show when the full `filename` has no package root to cut at (py-spy's
    short_filename for a user script); the origin is still decided from the full path.
    """
    if native and filename and not _SOURCE_EXT.search(filename):
        module, filename = module or filename, None  # `foo (libc.so.6)`: the place is a library
    function, qualname = split_name(name, native)
    rel = None if filename is None else (PurePosixPath(filename).name if native else relative_file(filename))
    if short and not native and rel == filename:
        rel = short
    origin = frame_origin(filename, function, native)
    return Frame(
        function=function,
        qualname=qualname,
        file=rel,
        line=line or None,
        origin=origin,
        library=_library(rel, origin, module),
    )


# ---------------------------------------------------------------- py-spy JSON


def parse_pyspy_json(data: Any, label: str, source: Source, sample: int = 0) -> ProcessStack:
    """py-spy `dump --json` output (a list of thread objects, frames innermost first)."""
    threads = tuple(_json_thread(t) for t in data if isinstance(t, dict))
    pids = [t.get("pid") for t in data if isinstance(t, dict) and isinstance(t.get("pid"), int)]
    return ProcessStack(
        label=label,
        pid=pids[0] if pids else None,
        threads=threads,
        source=source,
        sample=sample,
        native=_has_native(threads),
    )


def _json_thread(obj: dict[str, Any]) -> ThreadStack:
    tid = obj.get("os_thread_id") or obj.get("thread_id")
    frames = tuple(_json_frame(f) for f in obj.get("frames") or () if isinstance(f, dict))
    active = obj.get("active")
    return ThreadStack(
        name=obj.get("thread_name") if isinstance(obj.get("thread_name"), str) else None,
        thread_id=tid if isinstance(tid, int) else None,
        frames=frames,
        active=active if isinstance(active, bool) else None,
    )


def _json_frame(obj: dict[str, Any]) -> Frame:
    # py-spy sets `module` (the .so path) only on native frames; Python frames have null
    module = obj.get("module") if isinstance(obj.get("module"), str) else None
    native = module is not None
    short = obj.get("short_filename") if isinstance(obj.get("short_filename"), str) else None
    filename = obj.get("filename") if isinstance(obj.get("filename"), str) else short
    line = obj.get("line")
    return make_frame(
        str(obj.get("name") or "?"),
        short if native else filename,
        line if isinstance(line, int) else None,
        native,
        module,
        short,
    )


def _has_native(threads: Iterable[ThreadStack]) -> bool:
    return any(f.origin is Origin.NATIVE for t in threads for f in t.frames)


# ---------------------------------------------------------------- files


def parse_stack_file(name: str, data: bytes, source: Source) -> list[ProcessStack]:
    """All processes in one stack file; `[]` when nothing in it reads as a stack."""
    label, sample = label_and_sample(name)
    text = data.decode("utf-8", "replace").lstrip("\ufeff")
    if text.lstrip()[:1] in ("[", "{"):
        stacks = _parse_json_text(text, label, source, sample)
        if stacks is not None:
            return stacks
    from hangwatch._stacktext import parse_text  # imported here: it builds frames with make_frame

    return parse_text(text, label, source, sample)


def label_and_sample(name: str) -> tuple[str, int]:
    """`TP0.json` -> ("TP0", 0); `TP0.native.1.json` -> ("TP0", 1); `stacks/1234.txt` -> ("1234", 0)."""
    base = PurePosixPath(name.replace("\\", "/")).name
    m = _FILE_NAME.match(base)
    if not m:
        return base or "?", 0
    return m["stem"], int(m["sample"]) if m["sample"] else 0


def _parse_json_text(text: str, label: str, source: Source, sample: int) -> list[ProcessStack] | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict):
        data = [data] if "frames" in data else data.get("threads")
    if not isinstance(data, list):
        return None
    groups: dict[Any, list[dict[str, Any]]] = {}
    for thread in data:
        if isinstance(thread, dict):
            groups.setdefault(thread.get("pid"), []).append(thread)
    many = len(groups) > 1
    return [
        parse_pyspy_json(threads, str(pid) if many and pid is not None else label, source, sample)
        for pid, threads in groups.items()
    ]


def with_source_line(source: Source, line: int | None, detail: str | None) -> Source:
    """The caller's source, pointed at the line where a process starts in a multi-process file."""
    return replace(source, line=line if line is not None else source.line, detail=detail or source.detail)


# ---------------------------------------------------------------- cross-rank view


def stack_signature(stack: ProcessStack, depth: int = 8) -> str:
    """The top `depth` frames of the main thread, as qualnames, innermost first.

    Line numbers, files and addresses are dropped, and native frames are skipped when Python
    frames exist: ranks on one code path then match even when only some had `--native` dumps
    or py-spy printed their paths differently (text vs JSON).
    """
    thread = stack.main
    if thread is None:
        return ""
    python = [f for f in thread.frames if f.origin is not Origin.NATIVE]
    frames = python or [f for f in thread.frames if not _ADDRESS.match(f.qualname)]
    return " < ".join(_normalise(f.qualname) for f in frames[:depth])


def _normalise(qualname: str) -> str:
    # lambdas and comprehensions are numbered differently across versions; `<lambda>` is enough
    return re.sub(r"<(lambda|genexpr|listcomp|dictcomp|setcomp)>\w*", r"<\1>", qualname)


def group_by_signature(stacks: Sequence[ProcessStack]) -> dict[str, list[str]]:
    """signature -> labels, using the latest sample of each label; biggest group first."""
    latest: dict[str, ProcessStack] = {}
    for stack in stacks:
        if stack.label not in latest or stack.sample >= latest[stack.label].sample:
            latest[stack.label] = stack
    groups: dict[str, list[str]] = {}
    for label, stack in latest.items():
        groups.setdefault(stack_signature(stack), []).append(label)
    ordered = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    return {sig: labels for sig, labels in ordered}
