"""Write a bundle: a directory, or a `.tar.gz` (also the bytes `GET /bundle` serves), and the
documents of its files that more than one writer makes (gpus.json: the watch's bundle and a GPU recording)."""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hangwatch.bundle.archive import safe_name
from hangwatch.errors import BundleError
from hangwatch.model import GpuInfo, GpuSample
from hangwatch.redact import redact_files

__all__ = ["bundle_tarball_bytes", "gpus_json", "write_bundle"]


def write_bundle(files: Mapping[str, bytes], dest: Path) -> Path:
    """Write `files` as a directory at `dest`, or as a `.tar.gz` when its name ends so."""
    dest = Path(dest)
    prepared = _prepare(files)
    if dest.name.endswith((".tar.gz", ".tgz")):
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(bundle_tarball_bytes(prepared, top=_top_name(dest)))
        return dest
    for name, data in prepared.items():
        path = dest / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return dest


def bundle_tarball_bytes(files: Mapping[str, bytes], top: str = "hangwatch-bundle", mtime: float | None = None) -> bytes:
    """A `.tar.gz` of `files` under one top-level folder `top`, secrets redacted."""
    prepared = _prepare(files)
    stamp = int(time.time() if mtime is None else mtime)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in sorted(prepared):
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mtime, info.mode = len(prepared[name]), stamp, 0o644
            tar.addfile(info, io.BytesIO(prepared[name]))
    return buf.getvalue()


def gpus_json(samples: Sequence[GpuSample]) -> dict[str, Any]:
    """The gpus.json document of docs/bundle-format.md."""
    return {"samples": [{"t": s.t, "gpus": [_gpu_dict(gpu) for gpu in s.gpus]} for s in samples]}


def _gpu_dict(gpu: GpuInfo) -> dict[str, Any]:
    return {**asdict(gpu), "processes": [asdict(p) for p in gpu.processes]}  # lists, as JSON reads back


def _prepare(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """Names checked, every file redacted (a bundle goes into public bug reports)."""
    if "meta.json" not in files:
        raise BundleError("refusing to write a bundle without meta.json")
    return redact_files({safe_name(name): data for name, data in files.items()})


def _top_name(dest: Path) -> str:
    name = dest.name
    for suffix in (".tar.gz", ".tgz"):
        name = name.removesuffix(suffix)
    return name or "hangwatch-bundle"
