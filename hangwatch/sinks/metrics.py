"""Prometheus metrics from the latest verdict, built fresh at every scrape.

A custom collector (client_python's "Each scrape calls collect() fresh") on a registry the daemon
owns, not the global REGISTRY: two watchers in one process (tests, the bench) never clash, and
nothing else in the process leaks into hangwatch's /metrics. Every series carries `server`, so
alert rules and dashboards can say which server stalled, and `host`, so one Prometheus can watch
many nodes; Prometheus adds `instance` and `job`.

`hangwatch_agent_info` says where the agent's API is and which multi-node start its server belongs
to, and `hangwatch_verdict_info` the state, phase and cause in one series: `hangwatch fleet
--prometheus` reads a whole fleet from these in a few queries (docs/fleet.md).
"""

from __future__ import annotations

import socket
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
    StateSetMetricFamily,
)

from hangwatch._version import __version__
from hangwatch.model import GpuSample, Phase, State, Verdict
from hangwatch.sinks.launchid import AgentLabels, launch_of
from hangwatch.watch.observation import Observation
from hangwatch.watch.published import WatchView

__all__ = ["VerdictCollector", "make_registry"]

_MIB = 1024 * 1024


_ALERTING = (State.STALLED, State.CRASHED)


class VerdictCollector:
    """Yields hangwatch_* families from `view` at scrape time; never raises on missing data.

    Every series carries `server` and `host` (DESIGN "Multi-node": each agent labels its own series,
    so a cluster view needs no relabelling in the scrape config).
    """

    def __init__(self, view: WatchView, *, host: str | None = None, agent: AgentLabels | None = None) -> None:
        self._view = view
        self._host = host or socket.gethostname()
        self._agent = agent or AgentLabels()

    def collect(self) -> Iterable[Metric]:
        key, latest = [self._view.server_name, self._host], self._view.latest()
        verdict = latest.verdict
        yield _info(key)
        yield self._agent_info(key, latest.observation)
        yield _ticks(key, latest.tick)
        yield _state(key, verdict)
        if verdict is not None:
            yield from _verdict_info(key, verdict)
            yield from _since(key, verdict)
            yield _rank_phases(key, verdict)
            yield from _cause(key, verdict)
            yield from _stalled(key, verdict)
            yield from _live(key, verdict)
        yield from _gpus(key, list(latest.gpu_samples))
        yield _latencies(key, dict(latest.sampler_latencies))


    def _agent_info(self, key: list[str], observation: Observation | None) -> Metric:
        server = observation.server if observation is not None else None
        launch = launch_of(server.engine if server else None, server.flags if server else {}, self._agent.launch_label)
        info = InfoMetricFamily("hangwatch_agent", "Where this agent's API is, and the multi-node start its server "
                                "belongs to (launch: '' for a single-node server).", labels=_KEY)
        info.add_metric(key, {"url": self._agent.url, "launch": launch.launch, "node_rank": launch.node_rank,
                              "nnodes": launch.nnodes})
        return info


_KEY = ["server", "host"]


def _verdict_info(key: list[str], verdict: Verdict) -> Iterable[Metric]:
    info = InfoMetricFamily("hangwatch_verdict", "The verdict in one series: state, phase and cause ('' if none).",
                            labels=_KEY)
    info.add_metric(key, {"state": verdict.state.value, "phase": verdict.phase.value if verdict.phase else "",
                          "cause": verdict.cause or ""})
    yield info
    # a number, so an alert rule can pick the node furthest behind in a launch (bottomk by launch)
    index = GaugeMetricFamily("hangwatch_phase_index", "The verdict's phase as its place in the startup order "
                              "(0 launch ... 8 ready); -1 when no phase is known.", labels=_KEY)
    index.add_metric(key, verdict.phase.order if verdict.phase else -1)
    yield index


def _info(key: list[str]) -> Metric:
    info = InfoMetricFamily("hangwatch", "The hangwatch agent and the server it watches.", labels=_KEY)
    info.add_metric(key, {"version": __version__})
    return info


def _ticks(key: list[str], ticks: int) -> Metric:
    family = CounterMetricFamily("hangwatch_ticks", "Watch-loop ticks completed.", labels=_KEY)
    family.add_metric(key, ticks)
    return family


def _state(key: list[str], verdict: Verdict | None) -> Metric:
    family = StateSetMetricFamily("hangwatch_state", "The verdict's state (all false before the first verdict).",
                                  labels=_KEY)
    current = verdict.state if verdict is not None else None
    family.add_metric(key, {state.value: state is current for state in State})
    return family


def _since(key: list[str], verdict: Verdict) -> Iterable[Metric]:
    # The loop decides a fresh verdict every tick, so since_s is at most one tick old.
    if verdict.since_s is None:
        return
    family = GaugeMetricFamily("hangwatch_seconds_since_progress",
                               "Seconds since the server last showed a progress signal.", labels=_KEY)
    family.add_metric(key, verdict.since_s)
    yield family


def _rank_phases(key: list[str], verdict: Verdict) -> Metric:
    family = StateSetMetricFamily("hangwatch_rank_phase", "The startup phase each rank is in.",
                                  labels=_KEY + ["rank"])
    for rank, phase in sorted(verdict.phases.items()):
        family.add_metric(key + [rank], {p.value: p is phase for p in Phase})
    return family


def _cause(key: list[str], verdict: Verdict) -> Iterable[Metric]:
    if verdict.cause is None:
        return
    info = InfoMetricFamily("hangwatch_cause", "The cause the verdict names, and the rule that decided it.",
                            labels=_KEY)
    info.add_metric(key, {"cause": verdict.cause, "rule": verdict.rule or "", "state": verdict.state.value})
    yield info
    confidence = GaugeMetricFamily("hangwatch_cause_confidence", "Confidence in the named cause (0..1).",
                                   labels=_KEY + ["cause", "rule"])
    confidence.add_metric(key + [verdict.cause, verdict.rule or ""], verdict.confidence)
    yield confidence


def _stalled(key: list[str], verdict: Verdict) -> Iterable[Metric]:
    """While stalled or crashed: seconds since progress for each culprit rank (or 'all')."""
    if verdict.state not in _ALERTING or verdict.since_s is None:
        return
    family = GaugeMetricFamily("hangwatch_stalled_seconds",
                               "Seconds the culprit ranks (or 'all') have been stalled, while stalled or crashed.",
                               labels=_KEY + ["rank", "phase"])
    for rank in verdict.ranks or ("all",):
        phase = verdict.phases.get(rank, verdict.phase)
        family.add_metric(key + [rank, phase.value if phase else ""], verdict.since_s)
    yield family


def _live(key: list[str], verdict: Verdict) -> Iterable[Metric]:
    """The stall episode (and how often its cause was refined), the final blocker, the ETA."""
    if verdict.episode is not None:
        episode = verdict.episode
        info = InfoMetricFamily("hangwatch_episode", "The current stall episode (docs/live.md).", labels=_KEY)
        info.add_metric(key, {"id": episode.id, "state": episode.state, "cause": episode.cause or ""})
        yield info
        refined = GaugeMetricFamily("hangwatch_episode_cause_refinements",
                                    "Times the current episode's cause was refined to a more confident one.",
                                    labels=_KEY)
        refined.add_metric(key, len(episode.refined))
        yield refined
    if verdict.blocker is not None:
        b = verdict.blocker
        blocker = InfoMetricFamily("hangwatch_blocker", "The final blocker: the rank at the end of the wait-for chain.",
                                   labels=_KEY)
        blocker.add_metric(key, {"rank": b.rank or "", "pid": str(b.pid or ""), "waits_on": b.waits_on[:200],
                                 "definite": str(b.definite).lower()})
        yield blocker
    if verdict.eta is not None and verdict.eta.ready_in_s is not None:
        eta = GaugeMetricFamily("hangwatch_ready_eta_seconds", "Seconds until ready, from past starts of this setup.",
                                labels=_KEY)
        eta.add_metric(key, verdict.eta.ready_in_s)
        yield eta


def _gpus(key: list[str], samples: list[GpuSample]) -> Iterable[Metric]:
    if not samples:
        return
    labels = _KEY + ["gpu"]
    used = GaugeMetricFamily("hangwatch_gpu_memory_used_bytes", "GPU memory in use.", labels=labels)
    total = GaugeMetricFamily("hangwatch_gpu_memory_total_bytes", "GPU memory in all.", labels=labels)
    util = GaugeMetricFamily("hangwatch_gpu_utilization_ratio", "GPU utilisation (0..1).", labels=labels)
    for gpu in samples[-1].gpus:  # the newest sample; older ones are history, not state
        values = key + [str(gpu.index)]
        if gpu.memory_used_mib is not None:
            used.add_metric(values, gpu.memory_used_mib * _MIB)
        if gpu.memory_total_mib is not None:
            total.add_metric(values, gpu.memory_total_mib * _MIB)
        if gpu.utilization_pct is not None:
            util.add_metric(values, gpu.utilization_pct / 100.0)
    yield from (used, total, util)


def _latencies(key: list[str], latencies: dict[str, float]) -> Metric:
    family = GaugeMetricFamily("hangwatch_sampler_latency_seconds", "How long each source's last read took.",
                               labels=_KEY + ["sampler"])
    for sampler, seconds in sorted(latencies.items()):
        family.add_metric(key + [sampler], seconds)
    return family


def make_registry(view: WatchView, *, host: str | None = None, process: bool = True,
                  agent: AgentLabels | None = None) -> CollectorRegistry:
    """A fresh registry with the verdict collector and (by default) this process's own CPU/RSS."""
    registry = CollectorRegistry()
    registry.register(VerdictCollector(view, host=host, agent=agent))
    if process:
        ProcessCollector(registry=registry)
    return registry
