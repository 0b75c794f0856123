"""A launch command line -> its flags, as a flat dict.

Keys lose their leading dashes and use `-` for `_` (`--attention_backend` -> `attention-backend`).
A flag followed by another flag, or by nothing, is a boolean `True`. Parallel-size flags are also
stored under one short key (`tp`, `dp`, `pp`, `ep`) whichever spelling the engine takes, so rules
can say `tp` for both SGLang (`--tp-size`, `--tp`) and vLLM (`--tensor-parallel-size`, `-tp`).
The spellings, launcher programs and `serve` CLIs are the registered engines' (engines/).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from functools import lru_cache

from hangwatch.engines import Engine, engines, flag_aliases, server_port

__all__ = ["aliases", "parse_flags", "server_port"]

Flags = dict[str, "str | bool"]



def aliases() -> Mapping[str, str]:
    """Every registered engine's long flag spellings -> the short key (`tp-size` -> `tp`)."""
    return flag_aliases()


@lru_cache(maxsize=8)
def _programs(registered: tuple[Engine, ...]) -> tuple[re.Pattern[str], frozenset[str]]:
    """Where an engine's own arguments start (anything before, python -m -u -X ..., is the
    interpreter's), and the executables of `NAME serve MODEL` CLIs."""
    programs = "|".join(f"(?:{engine.program})" for engine in registered if engine.program) or "(?!)"
    serve = frozenset(engine.serve_command for engine in registered if engine.serve_command)
    return re.compile(f"(?:^|/)(?:{programs})$"), serve


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
    program, serve_commands = _programs(engines())
    for i, token in enumerate(tokens):
        if program.search(token):
            return tokens[i + 1 :], False
        if token == "serve" and i > 0 and tokens[i - 1].rsplit("/", 1)[-1] in serve_commands:
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
    for long_key, short_key in aliases().items():
        if long_key in flags:
            flags[short_key] = flags[long_key]
    return flags
