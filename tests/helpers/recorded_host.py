"""A recorded host for relaunch planning (watch/relaunch.HostProbe): the facts a test wants, no probing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class RecordedHost:
    """A host for planning without touching this machine (the facts a test wants)."""

    taken: set[int] = field(default_factory=set)
    locks: tuple[str, ...] = ()
    cached: bool = True
    ncores: int = 16
    next_port: int = 24311

    def port_taken(self, port: int) -> bool:
        return port in self.taken

    def free_port(self) -> int:
        return self.next_port

    def stale_locks(self, env: Mapping[str, str]) -> tuple[str, ...]:
        return self.locks

    def model_cached(self, model: str, env: Mapping[str, str]) -> bool:
        return self.cached

    def cores(self) -> int:
        return self.ncores
