"""The default ceiling per phase when no past start gives a budget (hangwatch/data/ceilings.yaml)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

import yaml

from hangwatch.model import Phase

__all__ = ["CEILINGS_FILE", "default_ceilings"]

CEILINGS_FILE = Path(__file__).resolve().parents[2] / "data" / "ceilings.yaml"


@lru_cache(maxsize=1)
def default_ceilings() -> Mapping[Phase, float]:
    """Phase -> seconds of no progress after which the start is stalled (a phase not listed: 120 s)."""
    raw = yaml.safe_load(CEILINGS_FILE.read_text(encoding="utf-8"))["seconds"]
    return MappingProxyType({Phase(name): float(seconds) for name, seconds in raw.items()})
