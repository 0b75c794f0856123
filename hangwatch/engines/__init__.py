"""Engines: what hangwatch knows about one inference server (SGLang, vLLM).

The rest of hangwatch never tests engine names; it asks `get_engine(name)` or `guess_engine(...)`
and then calls the `Engine`'s methods.
"""

from __future__ import annotations

from collections.abc import Sequence

from hangwatch.engines.base import MAIN, Engine, Marker, rank_positions, ready_seen
from hangwatch.engines.sglang import SGLANG
from hangwatch.engines.vllm import VLLM_ENGINE
from hangwatch.model import LogLine

__all__ = ["MAIN", "ENGINES", "Engine", "Marker", "get_engine", "guess_engine", "rank_positions", "ready_seen"]

ENGINES: dict[str, Engine] = {SGLANG.name: SGLANG, VLLM_ENGINE.name: VLLM_ENGINE}

_GUESS_SCAN = 20_000  # lines: the prefixes show from the first screen of a log; bounds the cost


def get_engine(name: str) -> Engine:
    try:
        return ENGINES[name.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}; known: {', '.join(sorted(ENGINES))}") from None


def guess_engine(lines: Sequence[LogLine], cmdline: str | None = None) -> str | None:
    """The engine's name from the command line, else from log prefixes and strings; None if no signal.

    The command line decides when it names an engine's launcher or title. The log is scored by
    lines carrying a signal only that engine prints; a tie (including 0:0) gives None.
    """
    if cmdline:
        owners = [engine.name for engine in ENGINES.values() if engine.owns_cmdline(cmdline)]
        if len(owners) == 1:
            return owners[0]
    sample = lines[:_GUESS_SCAN]
    scores = sorted(((engine.log_score(sample), engine.name) for engine in ENGINES.values()), reverse=True)
    (best, name), (second, _) = scores[0], scores[1]
    return name if best > second else None
