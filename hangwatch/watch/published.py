"""What the watch loop shows its sinks (HTTP API, the page, metrics, alerts, history): one frozen value a tick.

The loop owns the evidence; sinks only read. Each tick it builds one immutable `Published` and
`LatestView.publish` swaps the reference under a lock held for one assignment; a sink takes
`view.latest()` once and reads every field from that one value, so what it shows is one tick's,
never a verdict of one tick beside the stacks of another, and the loop never waits on a sink.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from hangwatch.model import GpuSample, Verdict
from hangwatch.watch.observation import Observation

__all__ = ["BundleFiles", "LatestView", "Published", "WatchView"]

BundleFiles = Mapping[str, bytes]


@dataclass(frozen=True)
class Published:
    """One tick's state of a watched server, as every sink sees it."""

    verdict: Verdict | None = None
    verdict_time: float | None = None  # wall clock (time.time()) at which the verdict's state and cause began
    observation: Observation | None = None  # None before the first tick (or for a hand-made view)
    # Rank label ("TP0", or a pid as text) -> JSON-able threads, each with its frames.
    stacks: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    stack_tree: Mapping[str, Any] = field(default_factory=dict)  # every rank's stack merged (classify.stacktree)
    # Rank -> phases in order: [{"phase": "weight_load", "at": t0, "end": t1 | None}, ...].
    timeline: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    gpu_samples: tuple[GpuSample, ...] = ()
    sampler_latencies: Mapping[str, float] = field(default_factory=dict)  # source -> seconds its last read took
    # The files of a bundle of this state (docs/bundle-format.md): building one is costly, so this
    # is a function that runs only when someone asks for GET /bundle.
    bundle: Callable[[], BundleFiles] | None = None
    tick: int = 0  # how many loop ticks had published when this was (set by LatestView.publish)

    def bundle_files(self) -> BundleFiles:
        return self.bundle() if self.bundle is not None else {}


@runtime_checkable
class WatchView(Protocol):
    """The latest state of one watched server, as the sinks see it."""

    server_name: str
    started_at: float | None  # epoch seconds when the watch began: the clock of timeline and GPU times

    def latest(self) -> Published: ...

    def tick_age_s(self) -> float:
        """Seconds since the loop last ticked: /healthz reports stale past a bound."""
        ...


class LatestView:
    """A thread-safe `WatchView`: the `Published` value the loop last swapped in."""

    def __init__(self, server_name: str, *, started_at: float | None = None) -> None:
        self.server_name = server_name
        self.started_at = started_at
        self._lock = threading.Lock()
        self._latest = Published()
        self._tick_at = time.monotonic()  # a loop that never ticks goes stale like one that stopped

    def publish(self, published: Published, *, tick: bool = False) -> None:
        """Swap in the new value; `tick=True` counts one loop tick. A verdict without a
        `verdict_time` is stamped with the current time."""
        if published.verdict is not None and published.verdict_time is None:
            published = replace(published, verdict_time=time.time())
        with self._lock:
            published = replace(published, tick=self._latest.tick + tick)
            self._latest = published
            if tick:
                self._tick_at = time.monotonic()

    def latest(self) -> Published:
        with self._lock:
            return self._latest

    def tick_age_s(self) -> float:
        with self._lock:
            return time.monotonic() - self._tick_at
