"""`hangwatch run --remedy`: stop a stalled or crashed server, relaunch it with one known-safe change.

`RemedyLoop` is consulted by the session every tick (`handoff`): on a stalled or crashed verdict whose
cause has a safe change for this engine (hangwatch/data/remedies.yaml, watch/relaunch.py) it ends the
session; `run` then stops the server cleanly (`stop_server`: the engine's own shutdown signal, the
process group, then what it left in /dev/shm and lock files it held), says what changes (terminal
diff, a `{"relaunch": ...}` JSON line, one alert) and starts it again. At most `max_relaunches`
times; never for a cause without a safe change (the remedy text stands). Once a relaunched server is
ready, its verdict names the change and its cost (`annotate`), and the history keeps it for this
setup so that the next `run`/`preflight` of the same setup proposes it before the launch.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

import psutil

from hangwatch.cli.launch import signal_group
from hangwatch.model import State, Verdict
from hangwatch.redact import redact_obj, redact_text, terminal_safe
from hangwatch.sources.modelid import model_identity
from hangwatch.watch.budgets import SetupKey, setup_key_of
from hangwatch.watch.relaunch import HostProbe, LiveHost, Plan, Refusal, apply_change, command_diff, plan_relaunch
from hangwatch.watch.remedies import Remedies, SafeChange, Shutdown, shipped_remedies

__all__ = ["RemedyLoop", "stop_server", "setup_key", "proposals", "print_proposals", "attach_hint", "default_history_path"]

_LEFTOVER = re.compile(r"^/dev/shm/|(?:^|/)lock$|\.lock$")


@dataclass
class RemedyLoop:
    """The relaunch decisions of one `run --remedy` (or, with `enabled=False`, what it would do)."""

    argv: list[str]
    env: dict[str, str]  # the variables the relaunches set (on top of hangwatch's environment)
    max_relaunches: int = 2
    enabled: bool = True
    json_out: bool = False
    err: TextIO = field(default_factory=lambda: sys.stderr)
    out: TextIO = field(default_factory=lambda: sys.stdout)
    remedies: Remedies = field(default_factory=shipped_remedies)
    host: HostProbe = field(default_factory=LiveHost)
    store: Any = None  # the history (sinks.store.HistoryStore): changes that made this setup start
    key: SetupKey | None = None
    applied: list[Plan] = field(default_factory=list)  # before the launch (learned) and each relaunch
    relaunches: int = 0
    pending: Plan | None = None
    trigger: Verdict | None = None
    onset_at: float | None = None  # wall time of the verdict that caused the last relaunch
    _recorded: bool = False
    _said: set[str] = field(default_factory=set)
    _tried: set[str] = field(default_factory=set)

    @property
    def engine(self) -> str | None:
        from hangwatch.sources.discover import launcher_engine

        return launcher_engine(shlex.join(self.argv))

    def handoff(self, verdict: Verdict) -> bool:
        """Session hook: True ends the session for a relaunch with `self.pending`."""
        if verdict.state not in (State.STALLED, State.CRASHED) or not self.enabled:
            return False
        if self.relaunches >= self.max_relaunches:
            self._say(f"limit:{verdict.cause}", f"not relaunching for {verdict.cause}: --max-relaunches {self.max_relaunches} reached")
            return False
        found = plan_relaunch(verdict, self.engine, self.argv, {**os.environ, **self.env}, self.remedies, self.host,
                              skip=frozenset(self._tried))
        if isinstance(found, Refusal):
            self._say(f"refuse:{verdict.cause}", f"no relaunch: {found.reason}")
            return False
        self.pending, self.trigger, self.onset_at = found, verdict, time.time()
        return True

    def annotate(self, verdict: Verdict) -> Verdict:
        """A ready verdict after a change names it and what it costs."""
        if verdict.state is not State.READY or not self.applied:
            return verdict
        done = "; ".join(f"{p.detail or p.change.describe()} (for {p.change.cause}; cost: {p.change.cost})" for p in self.applied)
        if not self._recorded:
            self._recorded = True
            record_success(self, self.store, self.key, self.err)
            self._say("ready", f"ready after the safe change {done}")
        return replace(verdict, remedy=f"Started after the safe change {done}.")

    def take(self) -> Plan:
        """The pending plan, now being applied: the command and environment become its own."""
        plan = self.pending
        assert plan is not None
        self.pending = None
        self.relaunches += 1
        self._tried.add(plan.change.id)
        self._apply(plan)
        return plan

    def relaunch(self, popen: subprocess.Popen[Any], server: str, t: float, dispatcher: Any = None) -> Plan:
        """Stop the server cleanly, apply the pending change, say so (JSON line or diff; one alert)."""
        old = list(self.argv)
        engine = self.engine
        print(f"hangwatch: stopping pid {popen.pid} to relaunch it", file=self.err, flush=True)
        removed = stop_server(popen, self.remedies.shutdown(engine))
        if removed:
            print(f"hangwatch: removed what it left: {', '.join(removed[:5])}", file=self.err, flush=True)
        plan = self.take()
        self.announce(plan, old, server, t)
        if dispatcher is not None and self.trigger is not None:
            try:
                dispatcher.relaunch(self.trigger, server, self.relaunch_info(plan), self.relaunches)
                dispatcher.flush(5.0)
            except Exception as exc:  # an alert that cannot go must not stop the relaunch
                print(f"hangwatch: warning: relaunch alert: {exc}", file=self.err)
        return plan

    def apply_learned(self) -> None:
        """Changes that made this setup start before: proposed; applied before the launch when enabled."""
        for change in proposals(self.key, self.store, self.remedies):
            result = apply_change(change, list(self.argv), {**os.environ, **self.env}, self.host)
            if not self.enabled:
                print(f"hangwatch: past starts of this setup needed {change.describe()} (for {change.cause}; cost: "
                      f"{change.cost}); `--remedy` applies it before the launch", file=self.err)
            elif isinstance(result, Plan):
                print(f"hangwatch: applying what made this setup start before: {result.detail} (for {change.cause}; "
                      f"cost: {change.cost})", file=self.err)
                self._apply(result)
                self._tried.add(change.id)

    def announce(self, plan: Plan, old_argv: Sequence[str], server: str, t: float) -> None:
        """Say what is relaunched and how: the JSON line or the terminal diff."""
        info = {"cause": plan.change.cause, "change": plan.detail or plan.change.describe(), "id": plan.change.id,
                "argv": list(plan.argv), "env": dict(plan.env), "removed": list(plan.remove), "cost": plan.change.cost,
                "source": plan.change.source}
        if self.json_out:
            body = {"relaunch": info, "n": self.relaunches, "of": self.max_relaunches, "t": round(t, 2), "server": server}
            self.out.write(json.dumps(redact_obj(body), default=str) + "\n")
            self.out.flush()
            return
        lines = [f"hangwatch: relaunch {self.relaunches}/{self.max_relaunches}: {plan.change.cause} -> {info['change']} "
                 f"(cost: {plan.change.cost})", *(f"  {line}" for line in command_diff(old_argv, plan))]
        self.err.write("".join(redact_text(terminal_safe(line)) + "\n" for line in lines))
        self.err.flush()

    def relaunch_info(self, plan: Plan) -> dict[str, Any]:
        return {"cause": plan.change.cause, "change": plan.change.id, "what": plan.detail or plan.change.describe(),
                "argv": list(plan.argv), "env": dict(plan.env), "cost": plan.change.cost}

    def _apply(self, plan: Plan) -> None:
        for path in plan.remove:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                print(f"hangwatch: warning: cannot remove {path}: {exc.strerror or exc}", file=self.err)
        self.argv = list(plan.argv)
        self.env.update(plan.env)
        self.applied.append(plan)

    def _say(self, key: str, text: str) -> None:
        if key not in self._said:
            self._said.add(key)
            print(f"hangwatch: {redact_text(terminal_safe(text))}", file=self.err, flush=True)


def attach_hint(verdict: Verdict, cmdline: str, engine: str | None, err: TextIO, said: set[str]) -> None:
    """`attach`: the server is not ours, so never relaunched: print the exact command that would be."""
    if verdict.state not in (State.STALLED, State.CRASHED) or verdict.cause in said:
        return
    try:
        argv = shlex.split(cmdline)
    except ValueError:
        return
    found = plan_relaunch(verdict, engine, argv, dict(os.environ), shipped_remedies(), LiveHost())
    if isinstance(found, Plan):
        said.add(verdict.cause or "")
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in found.env.items())
        rm = "".join(f"rm {shlex.quote(p)} && " for p in found.remove)
        err.write(f"hangwatch: not relaunching (attach: not our process). The known-safe change for {verdict.cause} is "
                  f"{found.change.describe()} ({found.detail}; cost: {found.change.cost}). Relaunch with:\n  {rm}{env + ' ' if env else ''}"
                  f"{shlex.join(found.argv)}\n")
        err.flush()


# ---------------------------------------------------------------- stopping a server cleanly


def stop_server(popen: subprocess.Popen[Any], shutdown: Shutdown) -> list[str]:
    """The engine's own shutdown signal to the launcher, again after `repeat_after_s` (vLLM swallows
    the first while it starts), SIGKILL to the process group after `grace_s`, then the /dev/shm files
    and lock files the tree held that nothing else holds. Returns the leftovers removed."""
    pid = popen.pid
    tree = _tree(pid)
    held = _held_files([pid, *(child.pid for child in tree)])
    _signal(pid, shutdown.signal)
    deadline = time.monotonic() + shutdown.grace_s
    repeat_at = time.monotonic() + shutdown.repeat_after_s if shutdown.repeat_after_s > 0 else None
    while popen.poll() is None and time.monotonic() < deadline:
        if repeat_at is not None and time.monotonic() >= repeat_at:
            _signal(pid, shutdown.signal)
            repeat_at = None
        time.sleep(0.1)
    signal_group(popen, signal.SIGKILL)
    for child in tree:  # ranks that left the group (setsid) go too
        with contextlib.suppress(psutil.Error):
            child.kill()  # psutil refuses a pid that went to a new process since
    try:
        popen.wait(timeout=shutdown.grace_s)
    except subprocess.TimeoutExpired:
        pass
    _wait_gone(tree, shutdown.grace_s)
    return _remove_leftovers(held)


def _tree(pid: int) -> list[psutil.Process]:
    """Every descendant of `pid`, each held with its start time (psutil's identity of a process)."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _wait_gone(procs: Sequence[psutil.Process], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_running(proc) for proc in procs):
        time.sleep(0.05)


def _running(proc: psutil.Process) -> bool:
    """Alive and still the same process; a zombie is gone (a container's init may never reap it)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _held_files(pids: Sequence[int]) -> set[str]:
    """/dev/shm files and lock files the tree has open or mapped."""
    found: set[str] = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if _LEFTOVER.search(target):
                found.add(target)
        try:
            with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as fh:
                found.update(line.split(None, 5)[5].strip() for line in fh if " /dev/shm/" in line and len(line.split(None, 5)) == 6)
        except OSError:
            pass
    return {path.removesuffix(" (deleted)") for path in found if not path.endswith(" (deleted)")}


def _remove_leftovers(paths: set[str]) -> list[str]:
    still = _held_files([int(p) for p in os.listdir("/proc") if p.isdigit()]) if paths else set()
    removed = []
    for path in sorted(paths - still):
        try:
            os.unlink(path)
            removed.append(path)
        except OSError:
            pass
    return removed


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


# ---------------------------------------------------------------- the history of this setup


def default_history_path() -> Path:
    """$XDG_STATE_HOME/hangwatch/history.sqlite (~/.local/state/... when unset)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "hangwatch" / "history.sqlite"


def setup_key(argv: Sequence[str]) -> SetupKey | None:
    """(engine, version, model, TP, GPU) of a command, as the watcher keys past starts."""
    from hangwatch.parse.flags import parse_flags
    from hangwatch.sources.discover import launcher_engine
    from hangwatch.watch.livesources import engine_version

    cmdline = shlex.join(argv)
    engine = launcher_engine(cmdline)
    if engine is None:
        return None
    flags = parse_flags(cmdline)
    model = flags.get("model-path") or flags.get("model") or "unknown"
    # the key the watcher gives the same start (past starts, learned changes): the model as the server,
    # started from here, will see it
    return setup_key_of(engine, engine_version(engine, cmdline), flags, model_identity(str(model), os.getpid()),
                        _gpu_model())


def _gpu_model() -> str:
    try:
        from hangwatch.sources.gpus import read_gpus

        gpus = read_gpus()
    except Exception:  # no NVML (a CPU host), no driver: the key says so
        return "cpu"
    return gpus[0].name if gpus and gpus[0].name else "cpu"


def proposals(key: SetupKey | None, store: Any, remedies: Remedies) -> list[SafeChange]:
    """The safe changes after which this setup started before (still in the shipped data)."""
    if key is None or store is None:
        return []
    try:
        records = store.remedies(key)
    except Exception:  # an unreadable history costs only the proposal
        return []
    return [c for c in (remedies.by_id(r.change_id) for r in records) if c is not None]


def print_proposals(argv: Sequence[str], store: Any, out: TextIO) -> list[dict[str, str]]:
    """`preflight`: what the history says this setup needed to start, printed and returned."""
    found = proposals(setup_key(argv), store, shipped_remedies())
    for change in found:
        out.write(f"info      {change.cause:<28} past starts of this setup needed {change.describe()}\n"
                  f"          cost: {change.cost}\n          `hangwatch run --remedy` applies it before the launch\n")
    return [{"cause": c.cause, "change": c.id, "what": c.describe(), "cost": c.cost} for c in found]


def record_success(loop: RemedyLoop, store: Any, key: SetupKey | None, err: TextIO) -> None:
    """Ready after a relaunch: the history keeps each change for this setup."""
    from hangwatch.sinks.store import RemedyRecord

    if store is None or key is None:
        return
    for plan in loop.applied:
        try:
            store.record_remedy(key, RemedyRecord(plan.change.cause, plan.change.id, plan.detail or plan.change.describe(),
                                                  plan.change.cost), at=time.time())
        except Exception as exc:  # a read-only history costs only the memory of it
            print(f"hangwatch: warning: cannot keep the change in the history: {exc}", file=err)


def env_for(extra: Mapping[str, str]) -> dict[str, str]:
    return {**os.environ, **extra}
