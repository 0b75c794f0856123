"""What the watch loop shows its sinks (HTTP API, metrics, alerts, history).

The loop owns the evidence; sinks only read. `WatchView` is the read-only door between them, so a
sink never reaches into the loop's state and the loop never waits on a sink: the loop builds new
immutable values each tick and `StaticView.publish` swaps references under a lock held for a few
assignments only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from hangwatch.model import GpuSample, Verdict
from hangwatch.watch.observation import Observation

__all__ = ["StaticView", "WatchView"]

BundleFiles = Mapping[str, bytes]


@runtime_checkable
class WatchView(Protocol):
    """The latest state of one watched server, as the sinks see it."""

    server_name: str
    started_at: float | None  # epoch seconds when the watch began: the clock of timeline and GPU times

    def verdict(self) -> Verdict | None: ...

    def verdict_time(self) -> float | None:
        """Wall-clock time (time.time()) at which the current verdict's state and cause began."""
        ...

    def stacks(self) -> dict[str, list[dict[str, Any]]]:
        """Rank label ("TP0", or a pid as text) -> JSON-able threads, each with its frames."""
        ...

    def timeline(self) -> dict[str, list[dict[str, Any]]]:
        """Rank -> phases in order: [{"phase": "weight_load", "at": t0, "end": t1 | None}, ...]."""
        ...

    def stack_tree(self) -> dict[str, Any]:
        """Every rank's stack merged into one tree (classify.stacktree); {} before the first stacks."""
        ...

    def observation(self) -> Observation | None:
        """The latest tick's frozen observation; None before the first tick (or for a static view)."""
        ...

    def gpu_samples(self) -> list[GpuSample]: ...

    def sampler_latencies(self) -> dict[str, float]:
        """Source name ("log", "procs", "gpus", "stacks") -> seconds its last read took."""
        ...

    def bundle_files(self) -> BundleFiles:
        """The files of a bundle of the current evidence (docs/bundle-format.md names)."""
        ...

    def tick_count(self) -> int: ...


_UNSET: Any = object()


class StaticView:
    """A thread-safe `WatchView` holding whatever the loop last published.

    Values are replaced, never mutated, so readers may keep what they got without copying.
    `bundle_files` may be a mapping or a zero-argument callable: building a bundle is costly, so the
    loop can hand over a function that runs only when someone asks for GET /bundle.
    """

    def __init__(self, server_name: str, *, started_at: float | None = None) -> None:
        self.server_name = server_name
        self.started_at = started_at
        self._lock = threading.Lock()
        self._verdict: Verdict | None = None
        self._verdict_time: float | None = None
        self._stacks: dict[str, list[dict[str, Any]]] = {}
        self._timeline: dict[str, list[dict[str, Any]]] = {}
        self._tree: dict[str, Any] = {}
        self._observation: Observation | None = None
        self._gpus: list[GpuSample] = []
        self._latencies: dict[str, float] = {}
        self._bundle: BundleFiles | Callable[[], BundleFiles] = {}
        self._ticks = 0
        self._tick_at = time.monotonic()  # a loop that never ticks goes stale like one that stopped

    def publish(
        self,
        *,
        verdict: Verdict | None = _UNSET,
        verdict_time: float | None = _UNSET,
        stacks: dict[str, list[dict[str, Any]]] = _UNSET,
        timeline: dict[str, list[dict[str, Any]]] = _UNSET,
        stack_tree: Mapping[str, Any] = _UNSET,
        observation: Observation | None = _UNSET,
        gpu_samples: list[GpuSample] = _UNSET,
        sampler_latencies: dict[str, float] = _UNSET,
        bundle_files: BundleFiles | Callable[[], BundleFiles] = _UNSET,
        tick: bool = False,
    ) -> None:
        """Replace the given values (others keep theirs); `tick=True` counts one loop tick.

        A new verdict without `verdict_time` is stamped with the current time.
        """
        with self._lock:
            if verdict is not _UNSET:
                self._verdict = verdict
                self._verdict_time = time.time() if verdict_time is _UNSET else verdict_time
            elif verdict_time is not _UNSET:
                self._verdict_time = verdict_time
            if stacks is not _UNSET:
                self._stacks = stacks
            if timeline is not _UNSET:
                self._timeline = timeline
            if stack_tree is not _UNSET:
                self._tree = dict(stack_tree)
            if observation is not _UNSET:
                self._observation = observation
            if gpu_samples is not _UNSET:
                self._gpus = gpu_samples
            if sampler_latencies is not _UNSET:
                self._latencies = sampler_latencies
            if bundle_files is not _UNSET:
                self._bundle = bundle_files
            if tick:
                self._ticks += 1
                self._tick_at = time.monotonic()

    def verdict(self) -> Verdict | None:
        with self._lock:
            return self._verdict

    def verdict_time(self) -> float | None:
        with self._lock:
            return self._verdict_time

    def stacks(self) -> dict[str, list[dict[str, Any]]]:
        with self._lock:
            return self._stacks

    def timeline(self) -> dict[str, list[dict[str, Any]]]:
        with self._lock:
            return self._timeline

    def stack_tree(self) -> dict[str, Any]:
        with self._lock:
            return self._tree

    def observation(self) -> Observation | None:
        with self._lock:
            return self._observation

    def gpu_samples(self) -> list[GpuSample]:
        with self._lock:
            return self._gpus

    def sampler_latencies(self) -> dict[str, float]:
        with self._lock:
            return self._latencies

    def bundle_files(self) -> BundleFiles:
        with self._lock:
            bundle = self._bundle
        # Called outside the lock: a slow bundle build must not hold up `publish`.
        return bundle() if callable(bundle) else bundle

    def tick_count(self) -> int:
        with self._lock:
            return self._ticks

    def tick_age_s(self) -> float:
        """Seconds since the loop last ticked (or since this view was made): /healthz reports stale past a bound."""
        with self._lock:
            return time.monotonic() - self._tick_at
