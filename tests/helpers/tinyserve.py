"""TinyServe, a toy engine: everything hangwatch needs to know about a new server, in one file.

It is registered by one line, `hangwatch.engines.register(TINYSERVE)` (tests/unit/engines/
test_plugin_engine.py), and then gets discovery, process roles, log prefixes and phases, flag
aliases, its default port and its environment variables like SGLang and vLLM do.
"""

from __future__ import annotations

import re

from hangwatch.engines import Engine, LogPrefix, ParsedPrefix
from hangwatch.engines.base import marker
from hangwatch.model import Phase, rank_from_name

# `<tiny 12:00:01 TP1> loading weights 3/8`
_PREFIX = re.compile(r"<tiny (?P<ts>\d{2}:\d{2}:\d{2})(?: (?P<rank>TP\d+))?> (?P<msg>.*)", re.S)
_TITLE = re.compile(r"^tinyserve::(?P<name>worker|router)(?P<ranks>_TP\d+)?(?:\s|$)")
_LAUNCHER = re.compile(r"(?:^|\s)(?:-m\s+)?tinyserve\.serve\b|(?:^|\s|/)tinyserve\s+serve\b")


def _parse(text: str) -> ParsedPrefix | None:
    m = _PREFIX.match(text)
    return (m["rank"], None, m["ts"], m["msg"], None) if m else None


class TinyServe(Engine):
    name = "tinyserve"
    title = "TinyServe"
    packages = frozenset({"tinyserve"})
    checkout = r"core|serve\.py"
    roles = ("launcher", "worker", "router")
    rank_roles = frozenset({"worker"})
    program = r"tinyserve\.serve"
    serve_command = "tinyserve"
    launch_hint = "python -m tinyserve.serve, tinyserve serve"
    flag_aliases = {"workers": "tp"}
    default_port = 7000
    env_prefixes = ("TINYSERVE_",)
    log_prefixes = (LogPrefix("<", _parse),)
    markers = (
        marker(Phase.WEIGHT_LOAD, "loading weights", r"^loading weights (?P<n>\d+)/(?P<total>\d+)"),
        marker(Phase.WEIGHT_LOAD, "weights loaded", r"^weights loaded", end=True),
        marker(Phase.READY, "serving on", r"^serving on :(?P<port>\d+)", end=True),
    )
    log_signals = (re.compile(r"^<tiny \d"),)

    def _role(self, cmdline: str) -> tuple[str, str | None] | None:
        m = _TITLE.match(cmdline)
        if m:
            return m["name"], rank_from_name(m["ranks"] or "")
        return ("launcher", None) if _LAUNCHER.search(cmdline) else None


TINYSERVE = TinyServe()
