"""A stop someone asked for is a stop, not a crash: Ctrl-C or SIGTERM to `hangwatch run`, an
orchestrator's SIGTERM to the server, the engine's own clean shutdown.

    stop_facts(ctx) -> facts that a stop was asked for; () when none is seen
    crash_facts(ctx) -> facts that something crashed as well (during the stop or before it)

A stop is seen as: hangwatch forwarding a signal it got (`Evidence.stop`); the launcher exiting
on SIGINT, SIGTERM or SIGHUP (status -2/-15/-1, or 130/143/129 from a shell), or with status 0
(the engine shut itself down cleanly); a `KeyboardInterrupt` as the log's last failure (Python's
SIGINT, and vLLM turns SIGTERM during its start into `KeyboardInterrupt("terminated")`). What a
stop unwinds (KeyboardInterrupt, SystemExit, a cancelled task, a peer's socket closing, ranks
SIGKILLed by their dying parent) is no crash evidence; a fatal signal (SIGSEGV, SIGABRT, ...), a
CUDA or NCCL error, std::terminate or any other exception is: a crash during a stop is a crash.
A process that exits with an error status of its own (1) crashed too, unless the log shows the
interrupt unwinding: Python's multiprocessing gives status 1 to a child that any exception ends,
KeyboardInterrupt included (an SGLang rank that Ctrl-C reaches in Python code, not in a C++ wait,
exits 1 with that traceback; a rank killed with its launcher exits -9), and a traceback cut short
(no exception line) is no crash either then: the interrupt reaches every process of the group at
once, and their tracebacks, written to one log together, interleave line by line, so each loses
its last line to the other's. A silent exit whose status
hangwatch cannot read (attached, the launcher not its child) is no stop seen: it stays `crashed`.
A rank that died before `hangwatch run` forwarded the stop makes the start a crash (the watcher
notes no stop then: Watcher.note_stop).
"""

from __future__ import annotations

import signal

from hangwatch.classify.verdict.context import Context
from hangwatch.engines import rank_roles
from hangwatch.model import Fact, ProcessRecord, Source
from hangwatch.parse.failures import Failure

__all__ = ["crash_facts", "stop_facts"]

_STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
_CRASH_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE})
# what a stop unwinds: the interrupt itself, and peers' sockets and pipes closing under the others
_UNWINDING = frozenset({
    "KeyboardInterrupt", "SystemExit", "CancelledError", "BrokenPipeError", "ConnectionResetError",
    "ConnectionAbortedError", "EOFError", "ContextTerminated", "ZMQError",
})  # fmt: skip
_STOP_EXCEPTIONS = frozenset({"KeyboardInterrupt"})


def _exit_signal(code: int | None) -> signal.Signals | None:
    """The signal a status says the process died of: -15, or 143 as a shell reports it."""
    if code is None or code == 0:
        return None
    number = -code if code < 0 else code - 128 if 128 < code < 128 + 65 else None
    try:
        return signal.Signals(number) if number is not None else None
    except ValueError:
        return None


def _who(proc: ProcessRecord) -> str:
    return f"{proc.role} {proc.rank} (pid {proc.pid})" if proc.rank else f"{proc.role} (pid {proc.pid})"


def _exc_name(failure: Failure) -> str:
    return (failure.exc_type or "").rsplit(".", 1)[-1]


def _is_interrupt(failure: Failure) -> bool:
    return not failure.warning and _exc_name(failure) in _STOP_EXCEPTIONS


def stop_facts(ctx: Context) -> tuple[Fact, ...]:
    facts: list[Fact] = []
    if ctx.evidence.stop:
        facts.append(Fact(ctx.evidence.stop, Source("hangwatch")))
    for proc in ctx.evidence.procs:
        if proc.role != "launcher" or proc.alive:
            continue
        sig = _exit_signal(proc.exit_code)
        if sig in _STOP_SIGNALS:
            facts.append(Fact(f"{_who(proc)} exited on {sig.name} (status {proc.exit_code})", Source("procs.json")))
        elif proc.exit_code == 0:
            facts.append(Fact(f"{_who(proc)} exited with status 0: the engine shut down cleanly", Source("procs.json")))
    fatal = [f for f in ctx.failures if not f.warning]
    if fatal and _is_interrupt(last := fatal[-1]):
        facts.append(Fact(f"the log ends in `{last.text}`: an interrupt", Source("server.log", last.lineno)))
    return tuple(facts)


def crash_facts(ctx: Context) -> tuple[Fact, ...]:
    facts: list[Fact] = []
    interrupted = any(_is_interrupt(f) for f in ctx.failures)
    for proc in ctx.evidence.procs:
        if proc.alive or proc.peer or proc.role not in (*rank_roles(), "launcher"):
            continue
        sig = _exit_signal(proc.exit_code)
        if sig in _CRASH_SIGNALS:
            facts.append(Fact(f"{_who(proc)} died of {sig.name} (status {proc.exit_code})", Source("procs.json")))
        elif sig is None and proc.exit_code and not (proc.exit_code == 1 and interrupted):  # it gave up on an error
            facts.append(Fact(f"{_who(proc)} exited with status {proc.exit_code}", Source("procs.json")))
    for failure in ctx.failures:
        if failure.warning or failure.consequence or _is_unwinding(failure) or (interrupted and _cut(failure)):
            continue
        facts.append(Fact(f"the log reports `{failure.text}`", Source("server.log", failure.lineno, failure.rank)))
    return tuple(facts)


def _cut(failure: Failure) -> bool:
    """A traceback without its exception line."""
    return failure.kind == "exception" and failure.exc_type is None


def _is_unwinding(failure: Failure) -> bool:
    if failure.kind == "signal":
        return failure.signal not in {s.name for s in _CRASH_SIGNALS}
    if failure.kind in ("exit", "consequence"):
        return True
    return failure.kind == "exception" and _exc_name(failure) in _UNWINDING
