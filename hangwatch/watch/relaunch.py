"""Plan a relaunch: from a stalled or crashed verdict and the launch command to exactly one safe change.

`plan_relaunch` picks the first change of hangwatch/data/remedies.yaml for the verdict's cause and
the engine whose conditions hold, and rewrites the command with it (`apply_change`); anything else
is a `Refusal` that says why. The rewriting touches one flag or one variable and nothing else: the
model, the parallel sizes, the node layout and the serving --host/--port are never among them
(`remedies.NEVER_FLAGS`, refused when the data is loaded and checked again here).

What the host knows (a port taken, a free port, stale locks, the Hugging Face cache, the cores) comes
through `HostProbe`, so that tests hand a recorded one and `LiveHost` reads this machine.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hangwatch.model import State, Verdict
from hangwatch.parse.flags import parse_flags
from hangwatch.watch.remedies import NEVER_FLAGS, Remedies, SafeChange, canonical_flag

__all__ = [
    "HostProbe", "LiveHost", "Plan", "Refusal", "plan_relaunch", "apply_change", "protected_flags",
    "command_diff", "RELAUNCH_STATES",
]

RELAUNCH_STATES = frozenset({State.STALLED, State.CRASHED})
_NUMBER = re.compile(r"(?<![\d.])(\d{2,5})(?![\d.])")


class HostProbe(Protocol):
    def port_taken(self, port: int) -> bool: ...

    def free_port(self) -> int: ...

    def stale_locks(self, env: Mapping[str, str]) -> tuple[str, ...]: ...

    def model_cached(self, model: str, env: Mapping[str, str]) -> bool: ...

    def cores(self) -> int: ...


@dataclass(frozen=True)
class Plan:
    change: SafeChange
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)  # variables the relaunch sets
    remove: tuple[str, ...] = ()  # stale lock files to delete before it
    detail: str = ""  # the change as done: "--nccl-port 29650 -> 31211", "removed 1 stale lock"

    def to_dict(self) -> dict[str, object]:
        return {"cause": self.change.cause, "change": self.change.id, "what": self.detail or self.change.describe(),
                "argv": list(self.argv), "env": dict(self.env), "removed": list(self.remove), "cost": self.change.cost,
                "source": self.change.source}


@dataclass(frozen=True)
class Refusal:
    reason: str


def plan_relaunch(verdict: Verdict, engine: str | None, argv: Sequence[str], env: Mapping[str, str],
                  remedies: Remedies, host: HostProbe, *, skip: frozenset[str] = frozenset()) -> Plan | Refusal:
    """The one change to relaunch with, or why there is none. `skip`: changes already tried."""
    if verdict.state not in RELAUNCH_STATES:
        return Refusal(f"the server is {verdict.state.value}, not stalled or crashed")
    if not verdict.cause or verdict.cause == "unknown":
        return Refusal("no cause is known, so no change is known to be safe")
    if engine is None:
        return Refusal("the command does not start a known engine itself (a wrapper?): its flags cannot be changed safely")
    changes = [c for c in remedies.for_cause(verdict.cause, engine) if c.id not in skip]
    if not changes:
        tried = " (the known one was tried already)" if remedies.for_cause(verdict.cause, engine) else ""
        return Refusal(f"{verdict.cause} has no safe launch change for {engine}{tried}: the remedy is for you to apply")
    reasons = []
    for change in changes:
        result = apply_change(change, list(argv), env, host, evidence_text(verdict))
        if isinstance(result, Plan) and protected_flags(result.argv) != protected_flags(argv):
            result = Refusal("it would change the model, a parallel size, the host or the port")  # never
        if isinstance(result, Plan):
            return result
        reasons.append(f"{change.describe()}: {result.reason}")
    return Refusal("; ".join(reasons))


def evidence_text(verdict: Verdict) -> str:
    return "\n".join([verdict.message or "", *(fact.text for fact in verdict.evidence)])


def apply_change(change: SafeChange, argv: list[str], env: Mapping[str, str], host: HostProbe,
                 evidence: str = "") -> Plan | Refusal:
    """The command with this one change, if its conditions hold on this command and host."""
    flags = _Flags(argv)
    for condition in change.when:
        why = _unmet(condition, change, flags, env, host, evidence)
        if why:
            return Refusal(why)
    if change.kind == "add_flag":
        return _add_flag(change, flags)
    if change.kind == "set_flag":
        return _set_flag(change, flags)
    if change.kind == "free_port":
        return _free_port(change, flags, host)
    if change.kind == "set_env":
        return _set_env(change, flags, env, host)
    stale = host.stale_locks(env)
    return Plan(change, tuple(argv), remove=stale, detail=f"removed {len(stale)} stale lock file(s): {', '.join(stale[:3])}")


def _unmet(condition: str, change: SafeChange, flags: _Flags, env: Mapping[str, str], host: HostProbe,
           evidence: str) -> str | None:
    if condition == "single_node":
        nnodes = flags.value("nnodes")
        return None if nnodes in (None, "1") else f"a {nnodes}-node launch: every node would need the same change"
    if condition == "env_unset":
        taken = [k for k in change.env if k in env]
        return f"{', '.join(taken)} is already set" if taken else None
    if condition == "model_cached":
        parsed = parse_flags(shlex.join(flags.argv))
        model = str(parsed.get("model-path") or parsed.get("model") or "")
        return None if model and host.model_cached(model, env) else "the model is not in the local cache"
    if condition == "stale_lock_found":
        return None if host.stale_locks(env) else "no stale lock file found (a live process holds them, or none is left)"
    return _port_unmet(change, flags, host, evidence)


def _port_unmet(change: SafeChange, flags: _Flags, host: HostProbe, evidence: str) -> str | None:
    """port_named_taken: the flag's port is the taken one (named in the evidence, never the serving
    port), and it is still held now that our server is gone."""
    port = _port_of(flags.value(change.flag or ""))
    if port is None:
        return f"--{change.flag} is not given with a port"
    named = {int(n) for n in _NUMBER.findall(evidence)}
    serving = _port_of(flags.value("port"))
    if port not in named and serving in named:
        return f"the evidence names the serving port {serving}, which is never changed"
    if not host.port_taken(port):
        return f"port {port} is free now (nothing to move away from)"
    return None


def _port_of(value: str | None) -> int | None:
    if not value:
        return None
    tail = value.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _add_flag(change: SafeChange, flags: _Flags) -> Plan | Refusal:
    assert change.flag
    if flags.index(change.flag) is not None:
        return Refusal(f"the command already has --{change.flag}")
    return Plan(change, (*flags.argv, f"--{change.flag}"), detail=f"added --{change.flag}")


def _set_flag(change: SafeChange, flags: _Flags) -> Plan | Refusal:
    assert change.flag and change.value is not None
    old = flags.value(change.flag)
    if old == change.value:
        return Refusal(f"the command already has --{change.flag} {change.value}")
    argv = flags.with_value(change.flag, change.value)
    return Plan(change, argv, detail=f"--{change.flag} {old or '(default)'} -> {change.value}")


def _free_port(change: SafeChange, flags: _Flags, host: HostProbe) -> Plan | Refusal:
    assert change.flag
    old = flags.value(change.flag)
    if _port_of(old) is None or old is None:
        return Refusal(f"--{change.flag} is not given with a port")
    port = host.free_port()
    new = f"{old.rsplit(':', 1)[0]}:{port}" if ":" in old else str(port)
    return Plan(change, flags.with_value(change.flag, new), detail=f"--{change.flag} {old} -> {new}")


def _set_env(change: SafeChange, flags: _Flags, env: Mapping[str, str], host: HostProbe) -> Plan | Refusal:
    ranks = max(1, _int(flags.value("tp")) * _int(flags.value("pp")))
    values = {k: v.replace("{cores_per_rank}", str(max(1, host.cores() // ranks))) for k, v in change.env.items()}
    same = all(env.get(k) == v for k, v in values.items())
    if same:
        return Refusal(f"{' '.join(f'{k}={v}' for k, v in values.items())} is already set")
    return Plan(change, tuple(flags.argv), env=values, detail=" ".join(f"{k}={v}" for k, v in values.items()))


def _int(value: str | None) -> int:
    return int(value) if value and value.isdigit() else 1


class _Flags:
    """The command's argv, read by canonical flag name (`--tp-size`, `--tensor_parallel_size` -> `tp`)."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.argv = list(argv)

    def index(self, flag: str) -> int | None:
        want = canonical_flag(flag)
        for i, token in enumerate(self.argv):
            if token.startswith("--") and canonical_flag(token.split("=", 1)[0]) == want:
                return i
        return None

    def value(self, flag: str) -> str | None:
        i = self.index(flag)
        if i is None:
            return None
        token = self.argv[i]
        if "=" in token:
            return token.split("=", 1)[1]
        nxt = self.argv[i + 1] if i + 1 < len(self.argv) else None
        return nxt if nxt is not None and not nxt.startswith("-") else None

    def with_value(self, flag: str, value: str) -> tuple[str, ...]:
        """argv with --flag's value replaced in place (the same spelling), or appended."""
        if canonical_flag(flag) in NEVER_FLAGS:  # the data was checked on load; this guards every caller
            raise ValueError(f"--{flag} is never changed by a relaunch")
        argv = list(self.argv)
        i = self.index(flag)
        if i is None:
            return (*argv, f"--{flag}", value)
        if "=" in argv[i]:
            argv[i] = f"{argv[i].split('=', 1)[0]}={value}"
        elif self.value(flag) is not None:
            argv[i + 1] = value
        else:
            argv.insert(i + 1, value)
        return tuple(argv)


def protected_flags(argv: Sequence[str]) -> dict[str, str | None]:
    """What a relaunch must keep: every NEVER_FLAGS flag of the command with its value, and the
    bare words (a `serve MODEL` positional), for tests and a last check before a relaunch."""
    flags = _Flags(argv)
    kept: dict[str, str | None] = {}
    for token in argv:
        if token.startswith("--"):
            name = canonical_flag(token.split("=", 1)[0])
            if name in NEVER_FLAGS:
                kept[name] = flags.value(name)
    kept["<words>"] = " ".join(t for i, t in enumerate(argv) if not t.startswith("-") and
                               (i == 0 or not argv[i - 1].startswith("--") or "=" in argv[i - 1]))
    return kept


def command_diff(old: Sequence[str], plan: Plan) -> list[str]:
    """The change as lines for a terminal: `- --nccl-port 29650`, `+ --nccl-port 31211`, `+ VAR=1`."""
    lines = [f"+ {k}={v}" for k, v in plan.env.items()] + [f"- rm {path}" for path in plan.remove]
    before, after = list(old), list(plan.argv)
    if before != after:
        i = 0
        while i < min(len(before), len(after)) and before[i] == after[i]:
            i += 1
        j = 0
        while j < min(len(before), len(after)) - i and before[-1 - j] == after[-1 - j]:
            j += 1
        if before[i:len(before) - j]:
            lines.append("- " + shlex.join(before[max(0, i - 1):len(before) - j]))
        lines.append("+ " + shlex.join(after[max(0, i - 1):len(after) - j]))
    return lines


class LiveHost:
    """This machine: ports by binding, locks from the engines' cache folders, the HF cache on disk."""

    def port_taken(self, port: int) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("", port))
            except OSError:
                return True
        return False

    def free_port(self) -> int:
        # below the ephemeral range, as SGLang picks its own: a port the kernel hands out to
        # outgoing connections could be taken again before the server binds it
        for port in range(20000 + os.getpid() % 9000, 30000):
            if not self.port_taken(port):
                return port
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])

    def stale_locks(self, env: Mapping[str, str]) -> tuple[str, ...]:
        from hangwatch.classify.preflight.hostfacts import cache_dirs
        from hangwatch.sources.host import home_dir, scan_locks

        return tuple(lock.path for lock in scan_locks(cache_dirs(env, home_dir(env))) if lock.stale)

    def model_cached(self, model: str, env: Mapping[str, str]) -> bool:
        if Path(model).expanduser().is_dir():
            return True
        hub = env.get("HF_HUB_CACHE") or os.path.join(env.get("HF_HOME") or os.path.join(
            env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or str(Path.home()), ".cache"), "huggingface"), "hub")
        snapshots = Path(hub) / f"models--{model.replace('/', '--')}" / "snapshots"
        try:
            return any(any(s.iterdir()) for s in snapshots.iterdir())
        except OSError:
            return False

    def cores(self) -> int:
        try:
            return len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            return os.cpu_count() or 1
