"""Which multi-node start ("launch") an agent's server belongs to, and the agent's own URL.

A fleet groups nodes by launch, so every node of one start must name it alike without talking to
the others. The engine's own arguments already do: every node's launcher is given the same
rendezvous (SGLang's `--dist-init-addr`, vLLM's `--master-addr` + `--master-port`) and `--nnodes`,
and its own `--node-rank`. A user who launches otherwise (Ray, a scheduler's own rendezvous) sets
`--launch-label` on every node's agent instead. A single-node server has no launch: the fleet makes
each such node a launch of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from hangwatch.engines import engine_names, get_engine
from hangwatch.redact import redact_string

__all__ = ["AgentLabels", "LaunchId", "launch_of"]


@dataclass(frozen=True)
class LaunchId:
    launch: str  # "" when the server is no node of a multi-node start
    node_rank: str  # "" when unknown
    nnodes: str  # "" when unknown


def launch_of(engine: str | None, flags: Mapping[str, str | bool], label: str | None = None) -> LaunchId:
    """The launch from the engine's arguments (`engine:rendezvous/nnodes`), or the user's label."""
    known = engine if engine in engine_names() else None
    spec = get_engine(known) if known else None
    rank = spec.node_rank(flags) if spec is not None and isinstance(flags.get(spec.node_rank_flag), str) else ""
    nnodes = flags.get(spec.nnodes_flag if spec is not None else "nnodes")
    count = nnodes if isinstance(nnodes, str) and nnodes.isdigit() else ""
    if label:
        return LaunchId(label, rank, count)
    rendezvous = spec.rendezvous(flags) if spec is not None else None
    if rendezvous is None:
        return LaunchId("", "", count)
    nodes, *address = rendezvous
    return LaunchId(f"{known}:{':'.join(address)}/{nodes}", spec.node_rank(flags) if spec else "", nodes)


class AgentLabels:
    """The agent's URL (known once its API is bound) and the user's launch label, for /metrics."""

    def __init__(self, *, url: str = "", launch_label: str | None = None) -> None:
        self.launch_label = launch_label
        self._url = url
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        with self._lock:
            return self._url

    def set_url(self, url: str) -> None:
        clean = redact_string(url)  # a --public-url with credentials in it: /metrics is read by many
        with self._lock:
            self._url = clean
