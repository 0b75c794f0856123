"""Engines: what hangwatch knows about one inference server (SGLang, vLLM), and the registry.

The rest of hangwatch never names an engine; it asks `get_engine(name)`, `guess_engine(...)` or
`engines()` and reads the `Engine`'s fields (packages, launcher, flags, port, env prefixes, log
prefixes, phase markers, process roles).

A new engine is one file (a subclass of `Engine`, see engines/sglang.py) plus one line in
`ENGINES` below; a plug-in outside the package calls `register(MyEngine())` instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hangwatch.engines.base import (
    COMMON_ROLES,
    MAIN,
    Engine,
    LogPrefix,
    Marker,
    ParsedPrefix,
    flag_port,
    rank_positions,
    ready_seen,
    strip_uvicorn,
)
from hangwatch.engines.sglang import SGLANG
from hangwatch.engines.vllm import VLLM_ENGINE
from hangwatch.model import LogLine

__all__ = [
    "COMMON_ROLES", "ENGINES", "MAIN", "Engine", "LogPrefix", "Marker", "ParsedPrefix", "engine_names", "engines",
    "env_prefixes", "flag_aliases", "get_engine", "guess_engine", "rank_positions", "ready_seen",
    "rank_roles", "register", "role_names", "server_port", "server_roles", "strip_uvicorn", "unregister",
]  # fmt: skip

# The registry: every engine hangwatch knows, in the order they are asked.
ENGINES: list[Engine] = [
    SGLANG,
    VLLM_ENGINE,
]

_GUESS_SCAN = 20_000  # lines: the prefixes show from the first screen of a log; bounds the cost


def register(engine: Engine) -> Engine:
    """Add an engine (or replace the one of the same name); returns it, so it can decorate."""
    if not engine.name:
        raise ValueError(f"{type(engine).__name__} has no name")
    unregister(engine.name)
    ENGINES.append(engine)
    return engine


def unregister(name: str) -> None:
    ENGINES[:] = [engine for engine in ENGINES if engine.name != name]


def engines() -> tuple[Engine, ...]:
    """The registered engines as a hashable snapshot: callers cache what they derive on it."""
    return tuple(ENGINES)


def engine_names() -> tuple[str, ...]:
    return tuple(engine.name for engine in ENGINES)


def get_engine(name: str) -> Engine:
    wanted = name.strip().lower()
    for engine in ENGINES:
        if engine.name == wanted:
            return engine
    raise ValueError(f"unknown engine {name!r}; known: {', '.join(sorted(engine_names()))}")


def server_roles() -> frozenset[str]:
    """Every role an engine's process can take (`scheduler`, `worker`, `launcher`, ...)."""
    return frozenset(role for engine in ENGINES for role in engine.roles)


def rank_roles() -> frozenset[str]:
    """Roles of rank processes, of any engine (`scheduler`, `engine_core`, `worker`)."""
    return frozenset(role for engine in ENGINES for role in engine.rank_roles)


def role_names() -> tuple[str, ...]:
    """Every role a process table can hold, as rules may name them."""
    return (*dict.fromkeys(role for engine in ENGINES for role in engine.roles), *COMMON_ROLES)


def env_prefixes() -> tuple[str, ...]:
    """Every engine's environment variable prefixes (`SGLANG_`, `VLLM_`)."""
    return tuple(prefix for engine in ENGINES for prefix in engine.env_prefixes)


def flag_aliases() -> dict[str, str]:
    """Long flag spellings of every engine -> the short key rules use (`tp-size` -> `tp`)."""
    return {long: short for engine in ENGINES for long, short in engine.flag_aliases.items()}


def server_port(flags: Mapping[str, str | bool], engine: Engine | str | None) -> int | None:
    """The server's HTTP port: the port flag, else the engine's default; None with no engine and no
    numeric flag. The one place the port is worked out (discovery, `run`, bundles, rules)."""
    if isinstance(engine, str):
        engine = get_engine(engine)
    if engine is None:
        return flag_port(flags)
    return engine.server_port(flags)


def guess_engine(lines: Sequence[LogLine], cmdline: str | None = None) -> str | None:
    """The engine's name from the command line, else from log prefixes and strings; None if no signal.

    The command line decides when it names an engine's launcher or title. The log is scored by
    lines carrying a signal only that engine prints; a tie (including 0:0) gives None.
    """
    if cmdline:
        owners = [engine.name for engine in ENGINES if engine.owns_cmdline(cmdline)]
        if len(owners) == 1:
            return owners[0]
    sample = lines[:_GUESS_SCAN]
    scores = sorted(((engine.log_score(sample), engine.name) for engine in ENGINES), reverse=True)
    if len(scores) < 2:
        return scores[0][1] if scores and scores[0][0] > 0 else None
    (best, name), (second, _) = scores[0], scores[1]
    return name if best > second else None
