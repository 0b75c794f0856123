"""Verdicts and views built by hand for the serve tests (sinks: API, metrics, alerts, history).

A uniquely named module (not conftest) so that tests import it unambiguously."""

from __future__ import annotations

from hangwatch.model import (
    Fact,
    GpuInfo,
    GpuSample,
    Missing,
    Phase,
    Source,
    State,
    Verdict,
)
from hangwatch.watch.published import LatestView, Published

SECRET = "hf_SECRETSECRET123"


def make_verdict(state: State = State.STALLED, cause: str | None = "nccl_peer_exited", **kw) -> Verdict:
    fields = dict(
        confidence=0.9, rule="sglang.nccl_peer_exited", title="A rank waits on a peer that exited",
        message=f"TP1 exited; TP0 waits in ncclCommInitRank. HF_TOKEN={SECRET}",
        phase=Phase.DIST_INIT, phases={"TP0": Phase.DIST_INIT, "TP1": Phase.LAUNCH},
        evidence=(Fact("TP1 exited with code 1", Source("procs.json", detail="pid 12")),
                  Fact("TP0 in ncclCommInitRankConfig", Source("stacks/TP0.json", detail="rank TP0"))),
        remedy="Look at TP1's log for the error that made it exit.", ranks=("TP1",),
        missing=(Missing("dmesg", "not root", "run as root"),), since_s=42.0, engine="sglang",
    )
    if cause is None:
        fields.update(rule=None, title=None, message=None, evidence=(), remedy=None, ranks=(), since_s=None)
    fields.update(kw)
    return Verdict(state=state, cause=cause, **fields)


def make_view(verdict: Verdict | None = None) -> LatestView:
    view = LatestView("sglang pid 100 on localhost:30000")
    gpus = (GpuInfo(0, "H200", memory_used_mib=1024.0, memory_total_mib=143_000.0, utilization_pct=100.0),
            GpuInfo(1, "H200", memory_used_mib=512.0, memory_total_mib=143_000.0, utilization_pct=0.0))
    files = {"meta.json": b'{"format": "hangwatch-bundle/1", "cmdline": "x --hf-token ' + SECRET.encode() + b'"}',
             "env.txt": f"HF_TOKEN={SECRET}\nNCCL_DEBUG=INFO\n".encode(),
             "server.log": b"loading weights\n"}
    view.publish(Published(
        verdict=verdict, verdict_time=1_000.0 if verdict else None,
        stacks={"TP0": [{"name": "MainThread", "frames": [{"function": "ncclCommInitRankConfig", "line": 1}],
                         "cmdline": f"python -m sglang.launch_server --api-key {SECRET}"}]},
        timeline={"TP0": [{"phase": "launch", "at": 0.0, "end": 2.0}, {"phase": "dist_init", "at": 2.0, "end": None}]},
        gpu_samples=(GpuSample(t=1.0, gpus=gpus),),
        sampler_latencies={"log": 0.001, "stacks": 0.25},
        bundle=lambda: files,
    ), tick=True)
    return view
