"""One frame model for every stack format: names split, paths made package-relative, and each
frame's origin (engine, torch, library, stdlib, user, native) decided from its path.

    make_frame(name, filename, line, native, module, short) -> Frame
    frame_origin(filename, function, native) -> Origin
    relative_file(filename) -> str;  split_name(name, native) -> (function, qualname)
    PYTHON_FRAME_LINE, TRACEBACK_HEAD: the Python frame line every traceback-like text shares
    keep_ends(frames) -> the innermost and outermost frames of a thread deeper than MAX_THREAD_FRAMES
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import PurePosixPath
from typing import TypeVar

from hangwatch.engines import Engine, engines
from hangwatch.model import Frame, Origin, Source

__all__ = ["MAX_THREAD_FRAMES", "PYTHON_FRAME_LINE", "TRACEBACK_HEAD", "engine_packages", "frame_origin", "keep_ends",
           "make_frame", "relative_file", "split_name", "with_source_line"]

# A real scheduler's thread is under 200 frames deep even with native ones (Python's default
# recursion limit is 1000). Deeper, the innermost frames say where it waits and the outermost what
# started it; every frame kept costs every stack rule a search, offline and on each live tick.
MAX_THREAD_FRAMES = 1024
_OUTERMOST_KEPT = 128
_T = TypeVar("_T")


def keep_ends(frames: Sequence[_T]) -> Sequence[_T]:
    """`frames` (innermost first) when at most MAX_THREAD_FRAMES, else its innermost and outermost ones."""
    if len(frames) <= MAX_THREAD_FRAMES:
        return frames
    return [*frames[: MAX_THREAD_FRAMES - _OUTERMOST_KEPT], *frames[-_OUTERMOST_KEPT:]]

TRACEBACK_HEAD = re.compile(r"Traceback \(most recent call last\):")
# `File "x.py", line 3, in f`: a traceback's frame (outermost first); without the comma,
# faulthandler's (innermost first); `(Python) File ...` / `(C) File ...`: pystack's
PYTHON_FRAME_LINE = re.compile(
    r'(?:\((?P<kind>Python|C)\) )?File "(?P<file>[^"]*)", line (?P<line>\d{1,12})(?P<comma>,?) in (?P<func>.+?)'
    r"(?: \(inlined\))?(?: \((?P<lib>[^()]*)\))?\s*$"  # pystack: `in pysleep (inlined) (/lib/libpython.so)`
)

_STDLIB = frozenset(sys.stdlib_module_names)
# Well-known third-party packages: a pasted short path such as `filelock/_api.py` is theirs.
_LIBRARIES = frozenset(
    "filelock flashinfer triton transformers huggingface_hub safetensors deep_gemm numpy "
    "requests urllib3 uvicorn uvloop fastapi starlette anyio tqdm zmq msgspec pydantic tokenizers "
    "xgrammar outlines ray nccl cupy jax accelerate tilelang cutlass flash_attn "
    "torchvision torchaudio einops aiohttp httpx setuptools pkg_resources importlib_metadata".split()
)
# A library run from a source checkout (`/workspace/flashinfer/python/flashinfer/...`): its own code.
_LIBRARY_CHECKOUT = re.compile(
    r"/(?:flashinfer|triton|transformers|deep_gemm|safetensors|filelock|huggingface_hub|cutlass|"
    r"flash_attn|tilelang|xgrammar|accelerate|tokenizers|numpy)/"
)
# Code torch.compile generated (Inductor's output modules, an engine's compile cache): torch's work,
# not the user's, although it runs from a temp or cache directory. Inductor writes under
# `$TMPDIR/torchinductor_<user>/`, engines under `<cache root>/torch_compile_cache/`.
_COMPILED = re.compile(r"/torchinductor_[^/]*/|/torch_compile_cache/|/inductor_cache/")
_PACKAGE_ROOT = re.compile(r".*/(?:site|dist)-packages/")
_STDLIB_ROOT = re.compile(r".*/lib(?:64)?/python\d+(?:\.\d+)?t?/")
_SOURCE_EXT = re.compile(r"\.(?:c|cc|cpp|cxx|h|hpp|cu|cuh|rs|pyx|S)$")
# Rust's `::h0123456789abcdef` hash and glibc's `@@GLIBC_2.34` symbol version are not names
_SYMBOL_NOISE = re.compile(r"::h[0-9a-f]{16}$|@@?[\w.]+$")
# `TP0.json`, `TP0.1.json`, and `TP0.native.1.json` as hangwatch's own capture writes them


@dataclass(frozen=True)
class _EngineCode:
    """What marks a path as engine code, from the registered engines (engines/)."""

    packages: frozenset[str]
    # py-spy text prints paths relative to a sys.path entry, and SGLang's schedulers come out as
    # `distributed/parallel_state.py` or even `scheduler.py`, with no package: sub-packages and file
    # names that exist only in the engines still count as engine code.
    dirs: frozenset[str]
    files: frozenset[str]
    # an engine or torch run from a source checkout (`pip install -e`): absolute, outside
    # site-packages, yet the engine's own code
    checkout: re.Pattern[str]
    libraries: frozenset[str]  # packages that ship with an engine (its kernels): library code
    library_checkout: re.Pattern[str]


@lru_cache(maxsize=8)
def _engine_code(registered: tuple[Engine, ...]) -> _EngineCode:
    checkouts = [f"/(?:{'|'.join(map(re.escape, sorted(e.packages)))})/(?:{e.checkout})/" for e in registered if e.packages and e.checkout]
    torch = r"/(?P<torch>torch)/(?:distributed|cuda|nn|_dynamo|_inductor|utils|multiprocessing|_ops\.py)"
    return _EngineCode(
        packages=frozenset(p for e in registered for p in e.packages),
        dirs=frozenset(d for e in registered for d in e.source_dirs),
        files=frozenset(f for e in registered for f in e.source_files),
        checkout=re.compile("|".join([*checkouts, torch])),
        libraries=frozenset(lib for e in registered for lib in e.libraries),
        library_checkout=re.compile("/(?:" + "|".join(sorted(re.escape(lib) for e in registered for lib in e.libraries)) + ")/"),
    )


def engine_packages() -> frozenset[str]:
    """Import packages of every registered engine (`sglang`, `vllm`)."""
    return _engine_code(engines()).packages



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
    code = _engine_code(engines())
    if top in code.packages:
        return Origin.ENGINE
    if top == "torch":
        return Origin.TORCH
    if rel != filename:  # under site-packages or the stdlib directory
        return Origin.LIBRARY
    if filename.startswith("/"):
        return _checkout_origin(filename, code)
    if top in _STDLIB or top in _LIBRARIES or top in code.libraries:
        return Origin.LIBRARY
    if ("/" in rel and top in code.dirs) or rel in code.files:
        return Origin.ENGINE
    return Origin.USER


def _checkout_origin(filename: str, code: _EngineCode) -> Origin:
    """An absolute path outside site-packages: the user's, unless it is a source checkout or
    code torch.compile generated."""
    if _COMPILED.search(filename):
        return Origin.TORCH
    found = code.checkout.search(filename)
    if not found:
        own = code.library_checkout.search(filename) if code.libraries else None
        return Origin.LIBRARY if own or _LIBRARY_CHECKOUT.search(filename) else Origin.USER
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
    return None if origin is Origin.ENGINE and top not in engine_packages() else top


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


def with_source_line(source: Source, line: int | None, detail: str | None) -> Source:
    """The caller's source, pointed at the line where a process starts in a multi-process file."""
    return replace(source, line=line if line is not None else source.line, detail=detail or source.detail)
