"""Preflight checks over host facts: the shipped checks load, fire on the conditions they name,
stay quiet on healthy hosts, and say why they were skipped. GPU/PCI facts come from recordings
(tests/fixtures/preflight: H200s recorded live, RTX PRO 6000 / RTX 5090 written from public reports)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from hangwatch.classify.language.loader import load_text
from hangwatch.classify.preflight.checks import evaluate, load_checks
from hangwatch.classify.preflight.hostfacts import derive, local_ranks, probe_plan
from hangwatch.classify.preflight.versions import known_bad, load_tables
from hangwatch.errors import RuleError
from hangwatch.model import Evidence, GpuSample, ListeningSocket
from hangwatch.parse.flags import parse_flags
from hangwatch.parse.hostinfo import HostSnapshot, LockFile, Mount, PathProbe
from hangwatch.sources.gputopo import RecordedTopology, read_topology
from helpers import paths

FIXTURES = paths.FIXTURES / "preflight"
CHECKS = load_checks()
TABLES = load_tables()
HEALTHY = HostSnapshot(
    listening=(), shm_bytes=16 << 30, shm_fstype="tmpfs", cpus_affinity=32, mounts=(Mount("/", "ext4"),),
    locks=(), packages={"torch": "2.11.0", "nvidia-nccl-cu13": "2.28.9"}, paths=(PathProbe("/m", "weights", True, "dir"),),
)


def recorded(name: str) -> HostSnapshot:
    topo = RecordedTopology(json.loads((FIXTURES / name).read_text()))
    gpus, links, p2p = read_topology(topo)
    return replace(HEALTHY, gpus=gpus, links=links, p2p=p2p, iommu=topo.iommu, acs_redirect_bridges=topo.acs_redirect_bridges)


def run(snap: HostSnapshot, cmd: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    flags = parse_flags(cmd)
    from hangwatch.engines import get_engine, guess_engine

    name = guess_engine((), cmd)
    facts, unknown = derive(snap, flags, env or {}, get_engine(name) if name else None, TABLES)
    evidence = Evidence(engine=name, cmdline=cmd, flags=flags, env=env or {}, host=facts, host_unknown=unknown,
                        gpus=(GpuSample(0.0, snap.gpus),) if snap.gpus else ())  # fmt: skip
    return evaluate(CHECKS, evidence)


def causes(report) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {f.cause: f.severity for f in report.findings}


SGLANG = "python -m sglang.launch_server --model-path /m"


def test_shipped_checks_load_and_name_catalogue_causes() -> None:
    assert len(CHECKS) >= 20
    assert {"port_in_use", "shm_too_small", "cpu_thread_oversubscription", "weight_loading_io"} <= {c.cause for c in CHECKS}


def test_healthy_h200_host_has_no_findings() -> None:
    report = run(recorded("h200x2-gputopo.json"), f"{SGLANG} --tp 2")
    assert report.findings == ()
    assert "preflight-p2p-through-iommu-acs" in report.checked and report.skipped == ()


def test_earlier_server_on_the_h200s_is_a_warning() -> None:
    report = run(recorded("h200x2-earlier-server.json"), f"{SGLANG} --tp 2")
    assert causes(report) == {"gpu_memory_held": "warning"}
    assert "GPU 0 (NVIDIA H200): 22.0 of 140 GiB already in use by pid 667" in report.findings[0].evidence[0].text


def test_rtx_pro_6000_behind_iommu_and_acs() -> None:
    report = run(recorded("rtx-pro-6000-x2-iommu-acs.json"), f"{SGLANG} --tp 2")
    assert causes(report) == {"nccl_p2p_topology": "critical", "flashinfer_arch": "warning", "custom_allreduce": "info"}
    assert run(recorded("rtx-pro-6000-x2-iommu-acs.json"), f"{SGLANG} --tp 2", {"NCCL_P2P_DISABLE": "1"}).findings[0].cause != "nccl_p2p_topology"
    single = run(recorded("rtx-pro-6000-x2-iommu-acs.json"), f"{SGLANG} --attention-backend triton")
    assert single.findings == ()


def test_rtx_5090_with_nccl_2_25_is_known_bad() -> None:
    snap = replace(recorded("rtx5090-x2.json"), packages={"nvidia-nccl-cu12": "2.25.1"})
    report = run(snap, f"{SGLANG} --tp 2 --attention-backend triton")
    assert causes(report)["nccl_version_bug"] == "critical"
    assert causes(report)["nccl_p2p_topology"] == "warning"  # NVML: no P2P between GeForce parts
    text = next(f for f in report.findings if f.cause == "nccl_version_bug").evidence[0].text
    assert "2.25.1" in text and "https://github.com/NVIDIA/nccl/issues/1637" in text
    fixed = replace(snap, packages={"nvidia-nccl-cu12": "2.27.3"})
    assert "nccl_version_bug" not in causes(run(fixed, f"{SGLANG} --tp 2 --attention-backend triton"))


def test_port_shm_threads_fifo_locks() -> None:
    snap = replace(
        HEALTHY, listening=(ListeningSocket("127.0.0.1", 30000, 42, "python3"), ListeningSocket("0.0.0.0", 5000, 43, "x")),
        shm_bytes=64 << 20, cpus_affinity=2, paths=(PathProbe("/m", "weights", True, "dir", fifos=("/m/model.safetensors",)),),
        locks=(LockFile("/c/x.lock", pid=999999, pid_alive=False), LockFile("/c/y.lock", pid=1, pid_alive=True)),
        resolved={"127.0.0.1": ("127.0.0.1",)}, local_addresses=("127.0.0.1",),
    )  # fmt: skip
    report = run(snap, f"{SGLANG} --tp 2 --dist-init-addr 127.0.0.1:5000", {"OMP_NUM_THREADS": "32"})
    assert causes(report) == {"port_in_use": "critical", "shm_too_small": "critical", "cpu_thread_oversubscription": "critical",
                              "weight_loading_io": "critical", "jit_lock_deadlock": "critical"}  # fmt: skip
    texts = " ".join(fact.text for f in report.findings for fact in f.evidence)
    assert "port 30000 (the default port) is already listened on at 127.0.0.1 by python3 (pid 42)" in texts
    assert "port 5000 (--dist-init-addr)" in texts and "/dev/shm is a 64 MiB tmpfs" in texts
    assert "OMP_NUM_THREADS=32 x 2 rank(s) = 64 compute threads on 2 usable cores (32x)" in texts
    assert "/c/x.lock names pid 999999" in texts and "/c/y.lock" not in texts
    assert all(f.remedy for f in report.findings)


def test_multinode_loopback_rendezvous() -> None:
    snap = replace(HEALTHY, resolved={"localhost": ("127.0.0.1", "::1")}, local_addresses=("10.0.0.5",))
    report = run(snap, f"{SGLANG} --tp 16 --nnodes 2 --node-rank 1 --dist-init-addr localhost:5000")
    assert causes(report) == {"multinode_rendezvous": "critical"}


def test_cgroup_quota_below_visible_cpus_without_omp() -> None:
    snap = replace(HEALTHY, cpus_affinity=64, cpu_quota=4.0)
    report = run(snap, f"{SGLANG} --tp 4")
    assert causes(report) == {"cpu_thread_oversubscription": "critical"}  # 4 x 64 threads on 4 cores
    assert "cgroup limit 4 of 64 CPUs" in report.findings[0].evidence[0].text


def test_unreadable_facts_skip_their_checks() -> None:
    snap = replace(HEALTHY, shm_bytes=None, packages=None, unknown={"shm": "no /dev/shm on this host", "packages": "no python"})
    report = run(snap, f"{SGLANG} --tp 2")
    skipped = {s.check: s.why for s in report.skipped}
    assert skipped["preflight-shm-tiny"] == "shm_mib: no /dev/shm on this host"
    assert skipped["preflight-nccl-known-bad"] == "known_bad_nccl: no python"
    assert "preflight-gpu-memory-held" in skipped  # no GPUs read
    assert "preflight-http-port-taken" in report.checked


def test_live_only_keys_are_refused_with_their_position(tmp_path: Path) -> None:
    bad = tmp_path / "checks.yaml"
    bad.write_text("preflight:\n  - id: x\n    cause: port_in_use\n    title: t\n    severity: critical\n    for: 10s\n"
                   "    when: {host.http_port_taken: true}\n    remedy: r\n")  # fmt: skip
    with pytest.raises(RuleError, match=r"checks.yaml:6:5: 'for' has no meaning in a preflight check"):
        load_checks([bad])
    assert load_text(bad.read_text().replace("    for: 10s\n", "")) == []  # live loading ignores the section


def test_local_ranks_and_plan() -> None:
    assert local_ranks(parse_flags(f"{SGLANG} --tp 16 --nnodes 2")) == 8
    assert local_ranks(parse_flags(f"{SGLANG} --tp 2 --dp 2 --enable-dp-attention")) == 2
    assert local_ranks(parse_flags("vllm serve m -tp 2 --pipeline-parallel-size 2")) == 4
    plan = probe_plan(parse_flags(f"{SGLANG.replace('/m', 'Qwen/Qwen3-8B')}"), {"HF_HOME": "/hf"}, "/home/u")
    assert plan.weights == ("Qwen/Qwen3-8B", "/hf/hub/models--Qwen--Qwen3-8B/snapshots")
    assert "/home/u/.cache/flashinfer" in plan.caches and "/hf" in plan.caches


def test_known_bad_table_needs_what_it_names() -> None:
    nccl = TABLES["nccl"]
    assert [e.id for e in known_bad(nccl, "2.25.1", {"12.0"}, None, {}, {})] == ["nccl-before-2.26-on-sm120"]
    assert known_bad(nccl, "2.25.1", set(), None, {}, {}) == []  # GPUs unknown: never guessed
    assert [e.id for e in known_bad(nccl, "2.16.5", set(), None, {"CUDA_LAUNCH_BLOCKING": "1"}, {})] == ["nccl-before-2.17-with-cuda-launch-blocking"]
    fi = TABLES["flashinfer"]
    assert [e.id for e in known_bad(fi, "0.5.3", {"12.0"}, "12.8", {}, {})] == ["flashinfer-jit-sm120-toolkit-before-12.9"]
    assert known_bad(fi, "0.5.3", {"12.0"}, "13.0", {}, {}) == []
    assert all(e.sources for entries in TABLES.values() for e in entries)


def test_weights_over_the_cgroup_memory_limit() -> None:
    snap = replace(HEALTHY, memory_limit_bytes=4 << 30, paths=(PathProbe("/m", "weights", True, "dir", size_bytes=10 << 30),))
    report = run(snap, SGLANG)
    assert causes(report) == {"dead_rank": "warning"}
    assert "the weights (10.0 GiB at /m) exceed the cgroup memory limit (4.0 GiB)" in report.findings[0].evidence[0].text
    assert run(replace(snap, memory_limit_bytes=16 << 30), SGLANG).findings == ()
