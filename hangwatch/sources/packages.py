"""Installed package versions as the launch's own Python sees them, and the CUDA toolkit's version.

    launch_interpreter(argv) -> path | None       the python the launch command runs
    read_versions(python, names, env) -> {dist: version}
    cuda_toolkit_version(env) -> "12.8" | None

Versions come from distribution metadata (importlib.metadata) in a child interpreter with a
timeout: neither torch nor the engine is imported, and hangwatch's own environment (which has
neither) is never mistaken for the server's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence

from hangwatch.errors import SourceUnavailable

__all__ = ["LIBRARIES", "cuda_toolkit_version", "launch_interpreter", "read_versions"]

# Libraries whose releases decide known hangs (the engines add their own distributions).
LIBRARIES = (
    "torch", "nvidia-nccl-cu11", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "flashinfer-python", "flashinfer",
    "flashinfer-cubin", "flashinfer-jit-cache", "triton", "nvidia-cuda-nvcc-cu12", "nvidia-cuda-nvcc",
)  # fmt: skip
TIMEOUT_S = 20.0
_SCRIPT = """
import json, sys
from importlib import metadata
out = {}
for name in sys.argv[1:]:
    try:
        out[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        pass
print(json.dumps(out))
"""
_PYTHON = re.compile(r"(?:^|/)(?:python|pypy)[\d.]*$")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def launch_interpreter(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """`python -m sglang.launch_server` -> the python on PATH; `sglang serve` -> its script's shebang."""
    args = list(argv)
    if args and os.path.basename(args[0]) == "env":
        args = [a for a in args[1:] if not _ASSIGN.match(a) and not a.startswith("-")]
    while args and _ASSIGN.match(args[0]):
        args = args[1:]
    if not args:
        return None
    found = shutil.which(args[0], path=env.get("PATH")) or (args[0] if os.path.isfile(args[0]) else None)
    if found is None:
        return None
    if _PYTHON.search(found):
        return found
    return _shebang_python(found)


def _shebang_python(script: str) -> str | None:
    try:
        with open(script, "rb") as fh:
            first = fh.readline(512).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if words and os.path.basename(words[0]) == "env" and len(words) > 1:
        return shutil.which(words[1])
    return words[0] if words and _PYTHON.search(words[0]) else None


def read_versions(python: str, names: Sequence[str], env: Mapping[str, str], timeout_s: float = TIMEOUT_S) -> dict[str, str]:
    """{distribution: version} for those installed in `python`'s environment."""
    try:
        done = subprocess.run([python, "-c", _SCRIPT, *names], check=False, env=dict(env), capture_output=True,
                              timeout=timeout_s, text=True, stdin=subprocess.DEVNULL)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SourceUnavailable("packages", f"cannot run {python}: {exc}") from exc
    if done.returncode != 0:
        raise SourceUnavailable("packages", f"{python} exited {done.returncode}: {done.stderr.strip()[-200:]}")
    try:
        versions = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        raise SourceUnavailable("packages", f"{python} printed no version table") from exc
    return {str(k): str(v) for k, v in versions.items()}


def cuda_toolkit_version(env: Mapping[str, str]) -> str | None:
    """The CUDA toolkit a JIT would compile with: $CUDA_HOME (or /usr/local/cuda)/version.json."""
    for home in (env.get("CUDA_HOME"), env.get("CUDA_PATH"), "/usr/local/cuda"):
        if not home:
            continue
        try:
            with open(os.path.join(home, "version.json"), encoding="utf-8") as fh:
                doc = json.load(fh)
        except (OSError, ValueError):
            continue
        version = (doc.get("cuda_nvcc") or doc.get("cuda") or {}).get("version")
        if isinstance(version, str):
            return ".".join(version.split(".")[:2])
    return None
