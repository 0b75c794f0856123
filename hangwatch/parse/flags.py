"""A launch command line -> its flags, as a flat dict.

Keys lose their leading dashes and use `-` for `_` (`--attention_backend` -> `attention-backend`).
A flag followed by another flag, or by nothing, is a boolean `True`. Parallel-size flags are also
stored under one short key (`tp`, `dp`, `pp`, `ep`) whichever spelling the engine takes, so rules
can say `tp` for both SGLang (`--tp-size`, `--tp`) and vLLM (`--tensor-parallel-size`, `-tp`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hangwatch.engines.base import Engine

__all__ = ["ALIASES", "parse_flags", "server_port"]

Flags = dict[str, "str | bool"]

ALIASES: Mapping[str, str] = {
    "tp-size": "tp",
    "tensor-parallel-size": "tp",
    "dp-size": "dp",
    "data-parallel-size": "dp",
    "pp-size": "pp",
    "pipeline-parallel-size": "pp",
    "ep-size": "ep",
    "expert-parallel-size": "ep",
    "nccl-init-addr": "dist-init-addr",
    "model-path": "model",
}

# Where the engine's own arguments start; anything before (python, -m, -u, -X ...) is the interpreter's.
_PROGRAM = re.compile(
    r"(?:^|/)(?:sglang\.launch_server|launch_server\.py|vllm\.entrypoints\.[\w.]+|api_server\.py)$"
)
_NEGATIVE_NUMBER = re.compile(r"-\.?\d")
_LIST_ITEM = re.compile(r"[\d.,:\-]+$")  # a number-like token continues a list; a model id does not


def parse_flags(cmdline: str) -> Flags:
    """`python -m sglang.launch_server --tp-size 4 --host ''` -> `{"tp-size": "4", "host": "", "tp": "4"}`.

    Further bare tokens after a flag's value are appended with a space (argparse `nargs="+"`
    lists such as `--cuda-graph-bs 1 2 4`), except the model positional of `vllm serve MODEL` /
    `sglang serve MODEL`, which may stand before or after the flags and is stored as `model`.
    """
    tokens, serve = _engine_args(_split(cmdline))
    flags: Flags = {}
    key: str | None = None
    for token in tokens:
        if token == "--":
            break
        if _is_flag(token):
            key = _store_flag(flags, token)
        elif serve and _is_model_positional(flags, key, token):
            flags["model"] = token
        elif key is not None:
            _store_value(flags, key, token)
    return _apply_aliases(flags)


def _is_model_positional(flags: Flags, key: str | None, token: str) -> bool:
    """A bare token that does not answer a waiting flag and does not look like a list item."""
    if "model" in flags or _LIST_ITEM.match(token):
        return False
    return key is None or flags.get(key) is not True


def _split(cmdline: str) -> list[str]:
    """shlex, falling back to whitespace when quotes are unbalanced (a truncated /proc cmdline)."""
    cmdline = cmdline.replace("\x00", " ")
    try:
        return shlex.split(cmdline)
    except ValueError:
        return cmdline.split()


def _engine_args(tokens: list[str]) -> tuple[list[str], bool]:
    """The tokens after the program, and whether it is a `serve` form with a model positional."""
    for i, token in enumerate(tokens):
        if _PROGRAM.search(token):
            return tokens[i + 1 :], False
        if token == "serve" and i > 0 and tokens[i - 1].rsplit("/", 1)[-1] in ("vllm", "sglang"):
            return tokens[i + 1 :], True
    return tokens, False


def _is_flag(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not _NEGATIVE_NUMBER.match(token)


def _normalise_key(raw: str) -> str:
    return raw.lstrip("-").replace("_", "-")


def _store_flag(flags: Flags, token: str) -> str | None:
    """Store `--key=value` at once, or `--key` as True until a value arrives; return the key
    that the next bare token would belong to."""
    if "=" in token:
        raw, value = token.split("=", 1)
        flags[_normalise_key(raw)] = value
        return None
    key = _normalise_key(token)
    flags[key] = True
    return key


def _store_value(flags: Flags, key: str, token: str) -> None:
    current = flags.get(key)
    flags[key] = token if current is True else f"{current} {token}"


def _apply_aliases(flags: Flags) -> Flags:
    for long_key, short_key in ALIASES.items():
        if long_key in flags:
            flags[short_key] = flags[long_key]
    return flags


def server_port(flags: Mapping[str, str | bool], engine: Engine | str) -> int:
    """The HTTP port: `--port` when it is a number, else the engine's default (30000 / 8000)."""
    value = flags.get("port")
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(engine, str):
        from hangwatch.engines import (
            get_engine,  # here, not at the top: engines need no flags
        )

        engine = get_engine(engine)
    return engine.default_port
