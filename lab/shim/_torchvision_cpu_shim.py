"""Make the CUDA-built torchvision 0.28.0 importable beside torch+cpu.

Its `_meta_registrations.py` registers fake kernels for `torchvision::nms`/`qnms`, which fails
because the CUDA `_C.so` that defines them cannot load. Defining the two op schemas before
torchvision is imported lets the import succeed; SGLang only needs torchvision.transforms.
Loaded from `torchvision_cpu_shim.pth`, so spawned scheduler processes get it as well.
"""
import importlib.abc
import sys


class _TorchvisionCpuShim(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torchvision":
            sys.meta_path.remove(self)
            import torch

            for op in ("nms", "qnms"):
                try:
                    torch.library.define(
                        f"torchvision::{op}",
                        "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
                    )
                except Exception:
                    pass
        return None  # let the normal finders load the real torchvision


if not any(isinstance(f, _TorchvisionCpuShim) for f in sys.meta_path):
    sys.meta_path.insert(0, _TorchvisionCpuShim())
