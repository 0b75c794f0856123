"""From the launch command and what the host said (a `HostSnapshot`) to the named facts the
preflight checks compare (`host.NAME` atoms). Pure: no I/O.

    probe_plan(flags, env, home) -> ProbePlan          which paths and names to look at
    derive(snapshot, flags, env, engine, tables) -> (facts, unknown)

A yes/no fact is present only when it holds; a fact whose inputs could not be read is named in
`unknown` with the reason, so a check that needs it is reported as skipped, never as passed.
"""

from __future__ import annotations

import ipaddress
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hangwatch.classify.preflight.versions import KnownBad, known_bad
from hangwatch.engines import engines, server_port
from hangwatch.model import GpuInfo, HostFact
from hangwatch.parse.hostinfo import HostSnapshot, LockFile, PathProbe, ProbePlan, filesystem_of

__all__ = ["FLASHINFER_DISTS", "NCCL_DISTS", "cache_dirs", "derive", "local_ranks", "probe_plan"]

MIB = 1 << 20
NCCL_DISTS = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")
FLASHINFER_DISTS = ("flashinfer-python", "flashinfer")
# (environment variable, default under $HOME) of each JIT / download cache a start may wait on
_CACHES = (
    ("FLASHINFER_WORKSPACE_BASE", ".cache/flashinfer"), ("TRITON_CACHE_DIR", ".triton/cache"),
    ("TORCH_EXTENSIONS_DIR", ".cache/torch_extensions"), ("TORCHINDUCTOR_CACHE_DIR", None),
    ("DG_JIT_CACHE_DIR", ".deep_gemm"), ("HF_HUB_CACHE", None), ("HF_HOME", ".cache/huggingface"),
)  # fmt: skip  (each engine adds its own: Engine.cache_dirs)

Facts = dict[str, HostFact]


# ---------------------------------------------------------------- what to probe


def cache_dirs(env: Mapping[str, str], home: str) -> tuple[str, ...]:
    dirs = []
    xdg = env.get("XDG_CACHE_HOME")
    for var, default in (*_CACHES, *(cache for engine in engines() for cache in engine.cache_dirs)):
        value = env.get(var)
        if value:
            dirs.append(value)
        elif default:
            base = os.path.join(xdg, default.split("/", 1)[1]) if xdg and default.startswith(".cache/") else os.path.join(home, default)
            dirs.append(base)
    return tuple(dict.fromkeys(os.path.normpath(d) for d in dirs))


def _model_paths(flags: Mapping[str, Any], env: Mapping[str, str], home: str) -> tuple[str, ...]:
    """The model folder as given and, for a hub id (`org/name`), its snapshots in the hub cache:
    the engine tries the path first and downloads into the cache otherwise."""
    model = flags.get("model")
    if not isinstance(model, str) or not model:
        return ()
    paths = [os.path.expanduser(model)]
    if model.count("/") == 1 and not model.startswith(("/", ".", "~")):
        hub = env.get("HF_HUB_CACHE") or os.path.join(env.get("HF_HOME") or os.path.join(home, ".cache/huggingface"), "hub")
        paths.append(os.path.join(hub, "models--" + model.replace("/", "--"), "snapshots"))
    return tuple(paths)


def _dist_host(flags: Mapping[str, Any]) -> tuple[str | None, int | None]:
    value = flags.get("dist-init-addr")
    if not isinstance(value, str) or not value:
        return None, None
    host, _, port = value.rpartition(":")
    host = host.strip("[]") or value
    return (host, int(port)) if port.isdigit() else (value.strip("[]"), None)


def probe_plan(flags: Mapping[str, Any], env: Mapping[str, str], home: str) -> ProbePlan:
    host, _ = _dist_host(flags)
    return ProbePlan(weights=_model_paths(flags, env, home), caches=cache_dirs(env, home),
                     hostnames=(host,) if host else ())  # fmt: skip


# ---------------------------------------------------------------- derived facts


def _int(value: Any, default: int | None = None) -> int | None:
    try:
        return int(str(value).split(",")[0]) if value not in (None, True, False, "") else default
    except ValueError:
        return default


def local_ranks(flags: Mapping[str, Any]) -> int:
    """Rank processes this node starts: tp x pp (x dp unless DP attention shares the TP ranks) / nnodes."""
    tp, pp, dp = (_int(flags.get(k), 1) or 1 for k in ("tp", "pp", "dp"))
    nnodes = _int(flags.get("nnodes"), 1) or 1
    if flags.get("enable-dp-attention"):
        dp = 1
    return max(1, math.ceil(tp * pp * dp / nnodes))


@dataclass(frozen=True)
class Launch:
    """What the command line says, as the facts need it."""

    flags: Mapping[str, Any]
    env: Mapping[str, str]
    engine: Any  # an Engine or None
    ranks: int

    @property
    def port(self) -> int | None:
        return server_port(self.flags, self.engine)


def derive(snap: HostSnapshot, flags: Mapping[str, Any], env: Mapping[str, str], engine: Any,
           tables: Mapping[str, Sequence[KnownBad]]) -> tuple[Facts, dict[str, str]]:  # fmt: skip
    launch = Launch(flags, env, engine, local_ranks(flags))
    facts: Facts = {"local_ranks": HostFact(launch.ranks, f"{launch.ranks} rank process(es) on this node", "command line")}
    unknown: dict[str, str] = {}
    for part in (_ports, _shm, _cpus, _paths, _locks, _gpus, _pci, _versions):
        part(snap, launch, facts, unknown, tables)
    return facts, unknown


def _missing(snap: HostSnapshot, key: str) -> str:
    return snap.unknown.get(key) or f"{key} not read"


def _ports(snap: HostSnapshot, launch: Launch, facts: Facts, unknown: dict[str, str], _: Any) -> None:
    port = launch.port
    if snap.listening is None:
        unknown["http_port_taken"] = unknown["dist_port_taken"] = _missing(snap, "ports")
    elif port is not None:
        facts["http_port"] = HostFact(port, f"the server will listen on port {port}", "command line")
        _taken(snap, port, "http_port_taken", "--port" if launch.flags.get("port") else "the default port", facts)
    host, dist_port = _dist_host(launch.flags)
    node_rank = _int(launch.flags.get("node-rank"), 0)
    resolved = snap.resolved.get(host or "", ())
    local = _is_local(resolved, snap.local_addresses)
    if snap.listening is not None and dist_port is not None and node_rank == 0 and (local or not host):
        _taken(snap, dist_port, "dist_port_taken", "--dist-init-addr", facts)
    nccl_port = _int(launch.flags.get("nccl-port"))
    if snap.listening is not None and nccl_port is not None and "dist_port_taken" not in facts:
        _taken(snap, nccl_port, "dist_port_taken", "--nccl-port", facts)
    _dist_addr(snap, launch, host, resolved, facts, unknown)


def _taken(snap: HostSnapshot, port: int, name: str, what: str, facts: Facts) -> None:
    holders = [s for s in snap.listening or () if s.port == port]
    if holders:
        sock = next((s for s in holders if s.pid is not None), holders[0])
        who = f"{sock.process or 'a process'} (pid {sock.pid})" if sock.pid else "a process hangwatch cannot see"
        facts[name] = HostFact(port, f"port {port} ({what}) is already listened on at {sock.host} by {who}", "listening sockets (ss -tlnp or /proc/net/tcp)")


def _is_local(addresses: Sequence[str], local: Sequence[str]) -> bool:
    return any(a in local or _loopback(a) for a in addresses)


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _dist_addr(snap: HostSnapshot, launch: Launch, host: str | None, resolved: Sequence[str],
               facts: Facts, unknown: dict[str, str]) -> None:  # fmt: skip
    nnodes = _int(launch.flags.get("nnodes"), 1) or 1
    if not host or nnodes < 2:
        return
    if f"resolve:{host}" in snap.unknown:
        unknown["dist_init_loopback"] = unknown["dist_init_unresolved"] = snap.unknown[f"resolve:{host}"]
        return
    if not resolved:
        facts["dist_init_unresolved"] = HostFact(host, f"--dist-init-addr host {host} does not resolve on this node", "getaddrinfo")
    elif all(_loopback(a) for a in resolved):
        text = f"--dist-init-addr {host} resolves to loopback ({', '.join(resolved)}) on a {nnodes}-node launch: other nodes cannot reach it"
        facts["dist_init_loopback"] = HostFact(host, text, "getaddrinfo")


def _shm(snap: HostSnapshot, launch: Launch, facts: Facts, unknown: dict[str, str], _: Any) -> None:
    if snap.shm_bytes is None:
        unknown["shm_mib"] = _missing(snap, "shm")
        return
    mib = snap.shm_bytes / MIB
    fs = f" {snap.shm_fstype}" if snap.shm_fstype else ""
    facts["shm_mib"] = HostFact(round(mib, 1), f"/dev/shm is a {mib:.0f} MiB{fs} (for {launch.ranks} rank process(es))", "statvfs(/dev/shm)")


def _cpus(snap: HostSnapshot, launch: Launch, facts: Facts, unknown: dict[str, str], _: Any) -> None:
    if snap.cpus_affinity is None:
        unknown["cpu_cores"] = unknown["cpu_oversubscription"] = _missing(snap, "cpus")
        return
    cores = float(snap.cpus_affinity if snap.cpu_quota is None else min(snap.cpus_affinity, snap.cpu_quota))
    limit = f" (cgroup limit {snap.cpu_quota:g} of {snap.cpus_affinity} CPUs)" if snap.cpu_quota is not None else ""
    facts["cpu_cores"] = HostFact(cores, f"{cores:g} usable cores{limit}", "sched_getaffinity, cgroup cpu.max")
    per_rank, why = _threads_per_rank(launch.env, snap)
    if per_rank is None:
        return
    total = per_rank * launch.ranks
    ratio = total / max(cores, 0.01)
    text = f"{why} x {launch.ranks} rank(s) = {total} compute threads on {cores:g} usable cores ({ratio:.0f}x){limit}"
    facts["cpu_oversubscription"] = HostFact(round(ratio, 1), text, "environment, sched_getaffinity, cgroup cpu.max")


def _threads_per_rank(env: Mapping[str, str], snap: HostSnapshot) -> tuple[int | None, str]:
    for name in (engine.cpu_bind_env for engine in engines() if engine.cpu_bind_env):
        bind = env.get(name)
        if bind and bind != "all":
            sizes = [_cpu_list_size(part) for part in bind.split("|")]
            return max(sizes), f"{name}={bind} ({max(sizes)} per rank)"
    omp = _int(env.get("OMP_NUM_THREADS"))
    if omp is not None and omp > 0:
        return omp, f"OMP_NUM_THREADS={env['OMP_NUM_THREADS']}"
    if snap.cpu_quota is not None and snap.cpus_affinity is not None and snap.cpu_quota < snap.cpus_affinity:
        # unset: torch sizes its pool by the CPUs it sees, not by the cgroup quota
        return snap.cpus_affinity, f"OMP_NUM_THREADS unset (torch's default: {snap.cpus_affinity} visible CPUs)"
    return None, ""


def _cpu_list_size(text: str) -> int:
    count = 0
    for part in text.split(","):
        low, _, high = part.partition("-")
        if low.strip().isdigit():
            count += (int(high) - int(low) + 1) if high.strip().isdigit() else 1
    return max(count, 1)


def _paths(snap: HostSnapshot, launch: Launch, facts: Facts, unknown: dict[str, str], _: Any) -> None:
    weights = next((p for p in snap.paths if p.role == "weights"), None)
    if weights is None:
        unknown["weights_fifo"] = unknown["weights_network_fs"] = "no local model path in the command (--model-path)"
    elif weights.hung:
        facts["weights_hung"] = HostFact(weights.path, f"stat({weights.path}) did not return within 2 s: its filesystem hangs", "stat in a thread with a timeout")
    elif weights.fifos:
        shown = ", ".join(weights.fifos[:3])
        facts["weights_fifo"] = HostFact(shown, f"{shown} is a FIFO: the loader's open() blocks until something writes to it", "stat (file type)")
    if weights is not None and weights.exists and snap.mounts is not None:
        mount = filesystem_of(os.path.abspath(weights.path), snap.mounts)
        if mount is not None and mount.network:
            size = f" ({weights.size_bytes / (1 << 30):.1f} GiB of weights)" if weights.size_bytes else ""
            text = f"the weights at {weights.path}{size} are on {mount.fstype} ({mount.source} at {mount.mount_point})"
            facts["weights_network_fs"] = HostFact(mount.fstype, text, "/proc/self/mountinfo")
    elif snap.mounts is None:
        unknown["weights_network_fs"] = unknown["cache_network_fs"] = _missing(snap, "mounts")
    _cache_fs(snap, facts)
    _memory(snap, weights, facts, unknown)


def _memory(snap: HostSnapshot, weights: PathProbe | None, facts: Facts, unknown: dict[str, str]) -> None:
    if snap.memory_limit_bytes is None:
        if "memory_limit" in snap.unknown:
            unknown["weights_over_memory_limit"] = snap.unknown["memory_limit"]
        return
    limit = snap.memory_limit_bytes
    facts["memory_limit_mib"] = HostFact(limit // MIB, f"cgroup memory limit {limit / MIB:.0f} MiB", "cgroup memory.max")
    if weights is not None and weights.size_bytes and weights.size_bytes > limit:
        text = f"the weights ({weights.size_bytes / (1 << 30):.1f} GiB at {weights.path}) exceed the cgroup memory limit ({limit / (1 << 30):.1f} GiB)"
        facts["weights_over_memory_limit"] = HostFact(round(weights.size_bytes / limit, 2), text, "cgroup memory.max, stat of the weight files")


def _cache_fs(snap: HostSnapshot, facts: Facts) -> None:
    if snap.mounts is None:
        return
    remote = []
    for probe in snap.paths:
        if probe.role == "cache" and probe.exists:
            mount = filesystem_of(os.path.abspath(probe.path), snap.mounts)
            if mount is not None and mount.network:
                remote.append(f"{probe.path} ({mount.fstype})")
    if remote:
        facts["cache_network_fs"] = HostFact(len(remote), "JIT/cache directories on a network filesystem: " + ", ".join(remote), "/proc/self/mountinfo")


def _locks(snap: HostSnapshot, launch: Launch, facts: Facts, unknown: dict[str, str], _: Any) -> None:
    if snap.locks is None:
        unknown["stale_locks"] = _missing(snap, "locks")
        return
    stale = [lock for lock in snap.locks if _stale(lock)]
    if stale:
        text = "; ".join(_lock_text(lock) for lock in stale[:3]) + (f"; and {len(stale) - 3} more" if len(stale) > 3 else "")
        facts["stale_locks"] = HostFact(len(stale), text, "lock files in the cache directories, /proc/locks")


def _stale(lock: LockFile) -> bool:
    return not lock.held and (lock.pid_alive is False or (lock.existence_lock and lock.pid is None))


def _lock_text(lock: LockFile) -> str:
    if lock.pid is not None:
        return f"{lock.path} names pid {lock.pid}, which is gone, and nothing holds it"
    return f"{lock.path} is a build lock left behind (no build holds it)"


def _used_gpus(gpus: Sequence[GpuInfo], launch: Launch) -> list[GpuInfo]:
    visible = launch.env.get("CUDA_VISIBLE_DEVICES")
    chosen = list(gpus)
    if visible is not None:
        wanted = [v.strip() for v in visible.split(",") if v.strip()]
        chosen = [g for w in wanted for g in gpus if str(g.index) == w or (g.uuid and g.uuid.startswith(w))]
    base = _int(launch.flags.get("base-gpu-id"), 0) or 0
    return chosen[base : base + launch.ranks] or chosen


def _gpus(snap: HostSnapshot, launch: Launch, facts: Facts, unknown: dict[str, str], _: Any) -> None:
    if snap.gpus is None:
        for name in ("gpu_memory_held_pct", "nvlink", "p2p_unsupported"):
            unknown[name] = _missing(snap, "gpus")
        return
    used = _used_gpus(snap.gpus, launch)
    facts["gpu_count"] = HostFact(len(used), f"{len(used)} GPU(s) for this launch of {len(snap.gpus)}", "NVML")
    _held(used, snap, facts)
    active = {link.index: link.nvlinks_active for link in snap.links}
    if any(active.get(g.index) for g in used):
        facts["nvlink"] = HostFact(True, "NVLink links are active between the GPUs", "NVML nvmlDeviceGetNvLinkState")
    ids = {g.index for g in used}
    bad = [pair for pair, status in snap.p2p.items() if status != "ok" and {int(x) for x in pair.split("-")} <= ids]
    if bad and len(used) > 1:
        facts["p2p_unsupported"] = HostFact(len(bad), "NVML reports no P2P between GPUs " + ", ".join(f"{p} ({snap.p2p[p]})" for p in bad), "NVML nvmlDeviceGetP2PStatus")


def _held(used: Sequence[GpuInfo], snap: HostSnapshot, facts: Facts) -> None:
    worst, texts = 0.0, []
    for gpu in used:
        if gpu.memory_used_mib is None or not gpu.memory_total_mib:
            continue
        pct = 100.0 * gpu.memory_used_mib / gpu.memory_total_mib
        if gpu.memory_used_mib >= 2048:
            owners = ", ".join(f"pid {p.pid}" + (f" {snap.process_names.get(p.pid)}" if snap.process_names.get(p.pid) else "")
                               for p in gpu.processes[:3]) or "processes hangwatch cannot see"  # fmt: skip
            texts.append(f"GPU {gpu.index} ({gpu.name}): {gpu.memory_used_mib / 1024:.1f} of {gpu.memory_total_mib / 1024:.0f} GiB already in use by {owners}")
            worst = max(worst, pct)
    if texts:
        facts["gpu_memory_held_pct"] = HostFact(round(worst, 1), "; ".join(texts), "NVML memory and compute processes")


def _pci(snap: HostSnapshot, launch: Launch, facts: Facts, unknown: dict[str, str], _: Any) -> None:
    if snap.iommu is None:
        unknown["iommu_translated"] = _missing(snap, "pci")
    elif snap.iommu == "translated":
        facts["iommu_translated"] = HostFact(True, "the IOMMU translates GPU DMA (not off, not passthrough): peer writes go through it", "/sys/kernel/iommu_groups, /proc/cmdline")
    if snap.acs_redirect_bridges is None:
        unknown["acs_redirect"] = _missing(snap, "acs")
    elif snap.acs_redirect_bridges:
        bridges = ", ".join(snap.acs_redirect_bridges)
        facts["acs_redirect"] = HostFact(bridges, f"PCIe ACS redirects peer-to-peer traffic at {bridges}, above the GPUs", "PCI config space (ACS control)")


def _versions(snap: HostSnapshot, launch: Launch, facts: Facts, unknown: dict[str, str],
              tables: Mapping[str, Sequence[KnownBad]]) -> None:  # fmt: skip
    if snap.packages is None:
        for name in ("known_bad_nccl", "known_bad_flashinfer"):
            unknown[name] = _missing(snap, "packages")
        return
    for dist in (*(launch.engine.distributions if launch.engine else ()), "torch"):
        if dist in snap.packages:
            facts[f"version_{dist.replace('-', '_')}"] = HostFact(snap.packages[dist], f"{dist} {snap.packages[dist]}", "package metadata")
    ccs = {g.compute_capability for g in snap.gpus or () if g.compute_capability}
    for package, dists in (("nccl", NCCL_DISTS), ("flashinfer", FLASHINFER_DISTS)):
        dist = next((d for d in dists if d in snap.packages), None)
        if dist is None:
            continue
        version = snap.packages[dist]
        facts[f"version_{package}"] = HostFact(version, f"{dist} {version}", "package metadata")
        if snap.gpus is None:
            unknown[f"known_bad_{package}"] = _missing(snap, "gpus")
        hits = known_bad(tables.get(package, ()), version, ccs, snap.cuda_toolkit, launch.env, launch.flags)
        if hits:
            worst = max(hits, key=lambda h: ("info", "warning", "critical").index(h.severity))
            text = " | ".join(f"{dist} {version} on sm_{'/'.join(sorted(ccs)) or '?'}: {h.why} Remedy: {h.remedy} ({h.id}; {', '.join(h.sources)})" for h in hits)
            facts[f"known_bad_{package}"] = HostFact(worst.severity, text, "known-bad table hangwatch/data/known_bad.yaml")
