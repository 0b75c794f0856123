"""Atoms over the machine: GPUs (NVML or meta.json), processes, listening ports."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from hangwatch.classify.language.atoms.facts import NO, QUANTIFIERS, clip
from hangwatch.classify.language.conditions import AtomFn, AtomResult
from hangwatch.classify.language.values import (
    ArgParser,
    Site,
    ValueSpec,
    check_keys,
    holds,
    parse_bool,
    parse_choice,
    parse_comparison,
    parse_names,
    parse_regex,
    parse_value,
)
from hangwatch.classify.verdict.context import Context, GpuView
from hangwatch.engines import COMMON_ROLES, rank_roles, role_names
from hangwatch.errors import RuleError
from hangwatch.model import Fact, ProcessRecord, Source


def _dead_default_roles() -> frozenset[str]:
    """Compilers exit when done and `other` is anything; neither dying says the server broke."""
    return frozenset(role_names()) - set(COMMON_ROLES)

TRENDS = ("rising", "flat", "falling")
# Parts without NVLink between GPUs: GeForce / TITAN / workstation RTX, L4/L20/L40(S), A2/A10/A16/A40, T4,
# Tesla P4/P40, any "PCIe" SKU.
PCIE_ONLY = re.compile(
    r"(?i)geforce|\bTITAN\b|\bRTX\b|\bL40S?\b|\bL[24]\b|\bL20\b|\bA(?:2|10G?|16|40)\b|\bT4\b|\bTesla P40?\b|PCI-?E"
)


@dataclass(frozen=True)
class UtilArg:
    spec: ValueSpec
    gpus: str = "any"


@dataclass(frozen=True)
class ProcArg:
    roles: frozenset[str]
    states: frozenset[str] = frozenset()
    wchan: re.Pattern[str] | None = None


# ---------------------------------------------------------------- argument parsers


def _name_spec(raw: Any, site: Site) -> ValueSpec:
    return parse_value(raw, site, scalar="matches")


def _value_spec(raw: Any, site: Site) -> ValueSpec:
    return parse_value(raw, site)


def _util_arg(raw: Any, site: Site) -> UtilArg:
    if not isinstance(raw, dict):
        raise RuleError(f"'{site.name}' needs {{gte: N, gpus: any|all|none|outlier}}", site.loc)
    gpus = parse_choice(raw.get("gpus", "any"), QUANTIFIERS, "GPU quantifier", site.value("gpus"))
    return UtilArg(parse_comparison(raw, site, ignore=("gpus",)), gpus)


def _trend_arg(raw: Any, site: Site) -> str:
    return parse_choice(raw, TRENDS, "memory trend", site.loc)


def _roles(raw: dict[str, Any], site: Site, default: frozenset[str]) -> frozenset[str]:
    return parse_names(raw["roles"], "roles", site.value("roles"), role_names()) if "roles" in raw else default


def _dead_arg(raw: Any, site: Site) -> ProcArg:
    if raw is True:
        return ProcArg(_dead_default_roles())
    if not isinstance(raw, dict):
        raise RuleError(f"'{site.name}' needs true or {{roles: [..]}}", site.loc)
    check_keys(raw, site, ("roles",))
    return ProcArg(_roles(raw, site, _dead_default_roles()))


def _state_arg(raw: Any, site: Site) -> ProcArg:
    if not isinstance(raw, dict):
        raise RuleError(f"'{site.name}' needs {{in: [D], roles: [..]}}", site.loc)
    check_keys(raw, site, ("in", "roles"), required=("in",))
    states = parse_names(raw["in"], "in", site.value("in"), ("R", "S", "D", "Z", "T", "I"))
    return ProcArg(_roles(raw, site, frozenset(role_names())), states)


def _wchan_arg(raw: Any, site: Site) -> ProcArg:
    if isinstance(raw, str):
        raw = {"matches": raw}
    if not isinstance(raw, dict):
        raise RuleError(f"'{site.name}' needs a regex or {{matches: REGEX, roles: [..]}}", site.loc)
    check_keys(raw, site, ("matches", "roles"), required=("matches",))
    return ProcArg(_roles(raw, site, frozenset(role_names())), wchan=parse_regex(raw["matches"], site.value("matches")))


def _children_arg(raw: Any, site: Site) -> ProcArg:
    if isinstance(raw, dict):
        check_keys(raw, site, ("in",), required=("in",))
        return ProcArg(parse_names(raw["in"], "in", site.value("in"), role_names()))
    return ProcArg(parse_names(raw, "role", site.loc, role_names()))


# ---------------------------------------------------------------- GPUs


def _gpu_fact(gpu: GpuView, ctx: Context, what: str) -> Fact:
    return Fact(f"{ctx.gpu_label(gpu)}: {gpu.name or 'GPU'}{what}", gpu.source)


def _gpu_values(gpu: GpuView) -> dict[str, Any]:
    return {"gpu.name": gpu.name, "gpu.compute_capability": gpu.compute_capability}


def gpu_compute_capability(spec: ValueSpec, ctx: Context) -> AtomResult:
    held = [gpu for gpu in ctx.gpus if gpu.compute_capability is not None and holds(spec, gpu.compute_capability)]
    if not held:
        return NO
    fact = _gpu_fact(held[0], ctx, f", compute capability {held[0].compute_capability}")
    return AtomResult(True, [fact], values=_gpu_values(held[0]))


def gpu_name(spec: ValueSpec, ctx: Context) -> AtomResult:
    held = [gpu for gpu in ctx.gpus if gpu.name is not None and holds(spec, gpu.name)]
    if not held:
        return NO
    return AtomResult(True, [_gpu_fact(held[0], ctx, "")], values=_gpu_values(held[0]))


def gpu_pcie_only(expected: bool, ctx: Context) -> AtomResult:
    named = [gpu for gpu in ctx.gpus if gpu.name]
    if not named or all(PCIE_ONLY.search(gpu.name or "") for gpu in named) != expected:
        return NO
    what = " (PCIe only, no NVLink)" if expected else " (NVLink-capable)"
    return AtomResult(True, [_gpu_fact(named[0], ctx, what)], values=_gpu_values(named[0]))


def gpu_util(arg: UtilArg, ctx: Context) -> AtomResult:
    measured = {ctx.gpu_label(gpu): gpu for gpu in ctx.gpus if gpu.utilization_pct is not None}
    hits = [label for label, gpu in measured.items() if holds(arg.spec, gpu.utilization_pct)]
    held, culprits = QUANTIFIERS[arg.gpus](hits, list(measured))
    if not held:
        return NO
    shown = hits or list(measured)
    facts = [_gpu_fact(measured[x], ctx, f" at {measured[x].utilization_pct:g}% utilisation") for x in shown[:4]]
    return AtomResult(True, facts, culprits)


def gpu_memory(direction: str, ctx: Context) -> AtomResult:
    trend = ctx.gpu_trend
    if trend is None or trend.direction != direction:
        return NO
    text = f"GPU memory {direction}: {trend.first_mib:.0f} → {trend.last_mib:.0f} MiB over {trend.seconds:.0f}s"
    return AtomResult(True, [Fact(text, Source("gpus.json"))])


# ---------------------------------------------------------------- processes


def _who(proc: ProcessRecord) -> str:
    rank = f" {proc.rank}" if proc.rank else ""
    return f"{proc.role}{rank} (pid {proc.pid})"


def _culprit(proc: ProcessRecord) -> str:
    return proc.rank or f"pid {proc.pid}"


def _proc_fact(proc: ProcessRecord, what: str) -> Fact:
    return Fact(f"{_who(proc)} {what}", Source("procs.json", detail=proc.rank or str(proc.pid)))


def _death(proc: ProcessRecord) -> str:
    if proc.alive and proc.state == "Z":
        return "is a zombie"
    return "exited" if proc.exit_code is None else f"exited with code {proc.exit_code}"


def proc_dead(arg: ProcArg, ctx: Context) -> AtomResult:
    dead = [p for p in ctx.evidence.procs if p.role in arg.roles and p.exited]
    if not dead:
        return NO
    roles = ctx.exit_roles
    # the process that went first leads, and is the culprit when the rest were torn down after it
    dead.sort(key=lambda p: roles.get(p.pid) != "root")
    facts = [replace(_proc_fact(p, _death(p)), role=roles.get(p.pid)) for p in dead]
    first = [p for p in dead if roles.get(p.pid) == "root"]
    return AtomResult(True, facts, tuple(dict.fromkeys(map(_culprit, first or dead))))


def proc_state(arg: ProcArg, ctx: Context) -> AtomResult:
    found = [p for p in ctx.evidence.procs if p.alive and p.role in arg.roles and p.state in arg.states]
    if not found:
        return NO
    return AtomResult(True, [_proc_fact(p, f"in state {p.state}") for p in found[:4]])


def proc_wchan(arg: ProcArg, ctx: Context) -> AtomResult:
    assert arg.wchan is not None
    found = [
        (p, hits) for p in ctx.evidence.procs
        if p.alive and p.role in arg.roles and (hits := [w for w in p.wchan if arg.wchan.search(w)])
    ]
    if not found:
        return NO
    return AtomResult(True, [_proc_fact(p, f"has threads asleep in the kernel in {', '.join(hits)}") for p, hits in found[:4]])


def proc_children(arg: ProcArg, ctx: Context) -> AtomResult:
    found = [p for p in ctx.evidence.procs if p.alive and p.role in arg.roles]
    if not found:
        return NO
    return AtomResult(True, [_proc_fact(p, f"alive: {clip(p.cmdline)}") for p in found[:4]])


def proc_threads(spec: ValueSpec, ctx: Context) -> AtomResult:
    ranks = [p for p in ctx.evidence.procs if p.role in rank_roles() and p.num_threads is not None]
    found = [p for p in ranks if holds(spec, p.num_threads)]
    if not found:
        return NO
    return AtomResult(True, [_proc_fact(p, f"has {p.num_threads} threads") for p in found[:4]])


# ---------------------------------------------------------------- ports


def port_listening(expected: bool, ctx: Context) -> AtomResult:
    port = ctx.server_port
    if port is None or not ctx.ports_known:
        return NO
    holders = [sock for sock in ctx.evidence.ports if sock.port == port]
    if bool(holders) != expected:
        return NO
    text = f"port {port} is listening" if holders else f"nothing listens on port {port}"
    return AtomResult(True, [Fact(text, Source("ports.txt"))])


def port_conflict(expected: bool, ctx: Context) -> AtomResult:
    port, ours = ctx.server_port, set(ctx.procs_by_pid)
    if port is None or not ctx.ports_known or not ours or not ctx.port_read:
        return NO  # an assumed port accuses nobody: the server may listen on one hangwatch did not read
    strangers = [s for s in ctx.evidence.ports if s.port == port and s.pid is not None and s.pid not in ours]
    if bool(strangers) != expected:
        return NO
    if not strangers:
        return AtomResult(True)
    sock = strangers[0]
    text = f"port {port} is held by {sock.process or 'another process'} (pid {sock.pid}), not by the server"
    return AtomResult(True, [Fact(text, Source("ports.txt"))])


ATOMS: dict[str, AtomFn] = {
    "gpu.compute_capability": gpu_compute_capability,
    "gpu.name": gpu_name,
    "gpu.pcie_only": gpu_pcie_only,
    "gpu.util": gpu_util,
    "gpu.memory": gpu_memory,
    "proc.dead": proc_dead,
    "proc.state": proc_state,
    "proc.wchan": proc_wchan,
    "proc.children": proc_children,
    "proc.threads": proc_threads,
    "port.listening": port_listening,
    "port.conflict": port_conflict,
}

ARGS: dict[str, ArgParser] = {
    "gpu.compute_capability": _value_spec,
    "gpu.name": _name_spec,
    "gpu.pcie_only": parse_bool,
    "gpu.util": _util_arg,
    "gpu.memory": _trend_arg,
    "proc.dead": _dead_arg,
    "proc.state": _state_arg,
    "proc.wchan": _wchan_arg,
    "proc.children": _children_arg,
    "proc.threads": _value_spec,
    "port.listening": parse_bool,
    "port.conflict": parse_bool,
}
