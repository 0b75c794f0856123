"""How a start ended, read from a bundle without a process view: with an error, or still waiting.

Live, a crash is the processes exiting (`classifier.is_crashed`). A bundle built from a report has
no process records; its equivalent is the log's last word. The start failed with an error when a
fatal failure — logged at error level (a warning means the writer carried on) — is the last thing
the log reports: no phase line or progress after it. The lines that unwind it (the rest of a
traceback, NCCL's `-> 1` return trail, the launcher's "child failed") belong to the failure. One
rank's error followed by other ranks' progress is a rank erroring while the rest keep going or
waiting: that start has not ended, it stalls. A stack dump a crash handler printed for a fatal
signal (`Caught signal 7 (Bus error)`) says the same of its process.
"""

from __future__ import annotations

from hangwatch.classify.verdict.context import Context
from hangwatch.model import Fact, Source
from hangwatch.parse.failures import Failure

__all__ = ["fatal_ending", "fatal_signal"]

# signals whose default action ends the process (a crash handler prints its backtrace, then dies)
_FATAL = frozenset({"SIGBUS", "SIGSEGV", "SIGABRT", "SIGILL", "SIGFPE", "SIGKILL"})


def fatal_ending(ctx: Context) -> Failure | None:
    """The failure the start ended with, when the evidence says it ended with one; else None.
    With process records the exits decide (a live crash), so this returns None."""
    if ctx.evidence.procs:
        return None
    fatal = [f for f in ctx.failures if not f.warning]
    if not fatal:
        return None
    last = fatal[-1]
    end = max((last.lineno, *last.lines))
    if any(event.lineno > end for event in ctx.evidence.phases):
        return None  # something moved after it: another rank carried on
    return ctx.root_failure if ctx.root_failure is not None and not ctx.root_failure.warning else last


def fatal_signal(ctx: Context) -> Fact | None:
    """A stack dump that a crash handler or debugger printed for a fatal signal: that process died
    of it. With process records the exits decide, so this returns None."""
    if ctx.evidence.procs:
        return None
    for label, stack in ctx.stacks.items():
        for thread in stack.threads:
            if thread.signal in _FATAL:
                top = thread.top.display if thread.top else "no frames"
                return Fact(f"{label}: {thread.signal} caught in {top}", Source(stack.source.file, stack.source.line, label))
    return None
