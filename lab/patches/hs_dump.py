"""A user's hidden-state dump patch (the kind people drop into a server to debug numerics).

Wraps the Hugging Face `LlamaModel.forward` (what SGLang's `--model-impl transformers` backend
runs) so that every forward saves its last hidden state under $HS_DUMP_DIR and streams it to a
dump consumer through a FIFO. The consumer was never started, so the first forward (SGLang's
warm-up request) blocks in open() of the FIFO for writing: the server never becomes ready.

With HS_DUMP_TARGET=vllm it wraps vLLM's own `LlamaForCausalLM.forward` instead (outside the
torch.compile'd `LlamaModel`), whose first call is the worker's compile warm-up
(`Warming up model for the compilation...`): the engine never reports READY.

Loaded by patches/site/sitecustomize.py; nothing under site-packages is modified.
"""
from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# module -> the class whose forward is wrapped
TARGETS = {
    "transformers": ("transformers.models.llama.modeling_llama", "LlamaModel"),
    "vllm": ("vllm.model_executor.models.llama", "LlamaForCausalLM"),
}
TARGET, CLASS = TARGETS[os.environ.get("HS_DUMP_TARGET", "transformers")]
DUMP_DIR = Path(os.environ.get("HS_DUMP_DIR", f"/dev/shm/hangwatch-hsdump-{os.getpid()}"))
_step = 0


def _log(msg: str) -> None:
    print(f"[HS_DUMP] pid={os.getpid()} {msg}", flush=True)


def _dump(hidden: Any) -> None:
    import torch

    global _step
    _step += 1
    DUMP_DIR.mkdir(parents=True, exist_ok=True)
    path = DUMP_DIR / f"hs-step{_step:04d}.pt"
    torch.save(hidden.detach().to("cpu").clone(), path)
    _log(f"step={_step} shape={tuple(hidden.shape)} dtype={hidden.dtype} -> {path}")
    fifo = DUMP_DIR / "consumer.fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    _log(f"waiting for consumer on {fifo}")
    with open(fifo, "wb") as out:  # blocks until a reader opens it: none ever does
        torch.save(hidden.detach().to("cpu"), out)


def _wrap(forward: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(forward)
    def dump_forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = forward(self, *args, **kwargs)
        if hasattr(out, "shape"):  # vLLM returns the hidden states tensor itself
            _dump(out)
        else:
            _dump(out[0] if isinstance(out, tuple) else out.last_hidden_state)
        return out

    return dump_forward


def _patch(module: Any) -> None:
    cls = getattr(module, CLASS)
    cls.forward = _wrap(cls.forward)
    _log(f"patched {TARGET}.{CLASS}.forward; dumps go to {DUMP_DIR}")


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patch the module right after it is first imported, in whichever process imports it."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module: Any) -> None:
            exec_module(module)
            _patch(module)

        spec.loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


def install() -> None:
    if not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())
