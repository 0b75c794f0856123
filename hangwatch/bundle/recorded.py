"""What the live watch recorded in a bundle beside the evidence, for the page (docs/bundle-format.md):
timeline.json's phases and transitions, stacktree.json, gpus.json's samples, preflight.json and
meta.json's capture time, each as the JSON the live endpoints serve. A file that is absent or
not JSON of the right shape reads as nothing (the page then shows less; `Evidence` is read by
`evidence_from_files`, which records such files as missing).
"""

from __future__ import annotations

import calendar
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Recorded", "read_recorded"]


@dataclass(frozen=True)
class Recorded:
    captured_at: float | None  # meta.json "captured_at", epoch seconds
    phases: dict[str, Any] | None  # timeline.json "phases": rank -> [{"phase", "at", "end", "lineno"}]
    transitions: tuple[dict[str, Any], ...]  # timeline.json "transitions", oldest first
    stack_tree: dict[str, Any] | None  # stacktree.json
    gpu_samples: tuple[Any, ...]  # gpus.json "samples"
    preflight: Any  # preflight.json, as written


def read_recorded(files: Mapping[str, bytes]) -> Recorded:
    meta = _json(files.get("meta.json"))
    timeline = _json(files.get("timeline.json"))
    timeline = timeline if isinstance(timeline, dict) else {}
    phases, transitions = timeline.get("phases"), timeline.get("transitions")
    tree = _json(files.get("stacktree.json"))
    gpus = _json(files.get("gpus.json"))
    samples = gpus.get("samples") if isinstance(gpus, dict) else None
    return Recorded(
        captured_at=_epoch(meta.get("captured_at") if isinstance(meta, dict) else None),
        phases=phases if isinstance(phases, dict) else None,
        transitions=tuple(t for t in transitions if isinstance(t, dict)) if isinstance(transitions, list) else (),
        stack_tree=tree if isinstance(tree, dict) else None,
        gpu_samples=tuple(samples) if isinstance(samples, list) else (),
        preflight=_json(files.get("preflight.json")),
    )


def _json(data: bytes | None) -> Any:
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def _epoch(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return float(calendar.timegm(time.strptime(value, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None
