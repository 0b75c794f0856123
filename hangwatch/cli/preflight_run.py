"""Run a preflight: read the launch command and the host, evaluate the checks.

    run_preflight(argv, env, rules=None, recording=None) -> (Report, Evidence)

The launch command goes through the engine's flag parser; leading `VAR=value` words (and an
`env VAR=value ...` prefix) are taken as the launch's environment, as a shell would.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from hangwatch.classify.preflight.checks import Report, evaluate, load_checks
from hangwatch.classify.preflight.hostfacts import derive, probe_plan
from hangwatch.classify.preflight.versions import load_tables
from hangwatch.engines import env_prefixes, get_engine, guess_engine
from hangwatch.errors import HangwatchError, SourceUnavailable
from hangwatch.model import Evidence, GpuSample
from hangwatch.parse.flags import parse_flags
from hangwatch.parse.hostinfo import HostSnapshot
from hangwatch.redact import filter_env, redact_cmdline
from hangwatch.sources.host import gather_host, home_dir

__all__ = ["PreflightInputError", "run_preflight", "split_env"]

_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)


class PreflightInputError(HangwatchError, ValueError):
    help_text = "Usage: hangwatch preflight [--json] -- python -m sglang.launch_server --model-path M ..."


def split_env(argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """`OMP_NUM_THREADS=32 python -m ...` / `env A=1 python ...` -> (the command, env with them)."""
    args, merged = list(argv), dict(env)
    if args and os.path.basename(args[0]) == "env":
        args = args[1:]
    while args and (m := _ASSIGN.match(args[0])):
        merged[m.group(1)] = m.group(2)
        args = args[1:]
    return args, merged


def run_preflight(argv: Sequence[str], env: Mapping[str, str], rules: Sequence[Path] | None = None,
                  recording: Path | None = None) -> tuple[Report, Evidence]:  # fmt: skip
    cmd, env = split_env(argv, env)
    if not cmd:
        raise PreflightInputError("no launch command after --")
    cmdline = shlex.join(cmd)
    flags = parse_flags(cmdline)
    name = guess_engine((), cmdline)
    engine = get_engine(name) if name else None
    # the launch's Python reads its package metadata while the host is read (a child process)
    with ThreadPoolExecutor(1) as pool:
        packages = pool.submit(_packages, cmd, env, engine)
        checks = load_checks(rules)
        snap = _with_gpus(gather_host(probe_plan(flags, env, home_dir(env))), recording)
        versions, toolkit, why = packages.result()
    snap = replace(snap, packages=versions, cuda_toolkit=toolkit,
                   unknown={**snap.unknown, **({"packages": why} if why else {})})  # fmt: skip
    facts, unknown = derive(snap, flags, env, engine, load_tables())
    unknown.update({k: v for k, v in snap.unknown.items() if k in ("gpus", "packages", "pci")})
    evidence = Evidence(
        meta={"preflight": True}, engine=name, cmdline=redact_cmdline(cmdline), flags=flags, env=filter_env(env, env_prefixes()),
        ports=snap.listening or (), gpus=(GpuSample(0.0, snap.gpus),) if snap.gpus else (),
        server_port=facts["http_port"].value if "http_port" in facts else None, host=facts, host_unknown=unknown,
    )  # fmt: skip
    return evaluate(checks, evidence), evidence


def _with_gpus(snap: HostSnapshot, recording: Path | None) -> HostSnapshot:
    from hangwatch.sources.gputopo import read_topology
    from hangwatch.sources.pci import read_pci

    unknown = dict(snap.unknown)
    if recording is not None:
        topo = _recording(recording)
        gpus, links, p2p = read_topology(topo)
        iommu, acs, why = topo.iommu, topo.acs_redirect_bridges, topo.why_unreadable
    else:
        try:
            gpus, links, p2p = read_topology()
        except SourceUnavailable as exc:
            unknown["gpus"] = unknown["pci"] = unknown["acs"] = f"{exc.reason} ({exc.hint})" if exc.hint else exc.reason
            return replace(snap, unknown=unknown)
        pci = read_pci()
        iommu, acs, why = pci.iommu, pci.acs_redirect_bridges, pci.why_unreadable
    if why:
        unknown["acs" if iommu else "pci"] = why
    names = _process_names({p.pid for g in gpus for p in g.processes})
    return replace(snap, gpus=gpus, links=links, p2p=p2p, iommu=iommu, acs_redirect_bridges=acs,
                   process_names=names, unknown=unknown)  # fmt: skip


def _recording(path: Path) -> Any:
    from hangwatch.sources.gputopo import RecordedTopology
    from hangwatch.userfile import read_user_file

    try:
        return RecordedTopology(json.loads(read_user_file(path, _MAX_RECORDING).decode("utf-8")))
    except OSError as exc:
        raise PreflightInputError(f"cannot read the GPU recording {path}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise PreflightInputError(f"cannot read the GPU recording {path}: {exc}") from None


_MAX_RECORDING = 16 << 20  # a recording of 8 GPUs' topology is tens of KiB


def _process_names(pids: set[int]) -> dict[int, str]:
    import psutil

    names = {}
    for pid in pids:
        try:
            names[pid] = " ".join(psutil.Process(pid).cmdline()[:4])[:80]
        except (psutil.Error, OSError):
            continue
    return names


def _packages(cmd: Sequence[str], env: Mapping[str, str], engine: Any) -> tuple[dict[str, str] | None, str | None, str | None]:
    """(versions, CUDA toolkit, why the versions are unknown)."""
    from hangwatch.sources.packages import (
        LIBRARIES,
        cuda_toolkit_version,
        launch_interpreter,
        read_versions,
    )

    toolkit = cuda_toolkit_version(env)
    python = launch_interpreter(cmd, env)
    if python is None:
        return None, toolkit, f"no Python interpreter found for `{cmd[0]}`"
    try:
        return read_versions(python, (*(engine.distributions if engine else ()), *LIBRARIES), env), toolkit, None
    except SourceUnavailable as exc:
        return None, toolkit, exc.reason
