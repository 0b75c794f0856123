"""Drives a `Watcher` for `attach` and `run`: ticks, outputs, sinks, and when to stop.

Output is one of: a rich live view (a terminal), one plain line per verdict change (a pipe), or
one JSON object per verdict change (`--json`). `exit_on` + `timeout_s` make it a readiness gate:
exit 0 on ready, 1 on any other awaited state or on the timeout, printing the verdict either way.
Sinks (alerts, history, the HTTP view) are called every tick and never block it.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from rich.console import Console

from hangwatch.model import State, Verdict
from hangwatch.sinks.report import print_verdict
from hangwatch.sinks.terminal import render, verdict_json, verdict_line
from hangwatch.watch import Watcher
from hangwatch.watch.observation import Observation

__all__ = ["SessionOptions", "Session", "parse_exit_on", "next_wait", "EXIT_READY", "EXIT_NOT_READY", "EXIT_RELAUNCH"]

EXIT_READY, EXIT_NOT_READY, EXIT_INTERRUPTED = 0, 1, 130
EXIT_RELAUNCH = -1  # `run --remedy`: the session ends so that the server is relaunched (cli/remedy.py)
VerdictCallback = Callable[[Observation, Verdict], None]  # called every tick; must not block


def parse_exit_on(text: str | None) -> frozenset[State]:
    """"ready,stalled" -> {READY, STALLED}; raises ValueError naming a bad state."""
    if not text:
        return frozenset()
    states = set()
    for word in (w.strip().lower() for w in text.split(",") if w.strip()):
        try:
            states.add(State(word))
        except ValueError:
            raise ValueError(f"unknown state '{word}' (expected {', '.join(s.value for s in State)})") from None
    return frozenset(states)


@dataclass(frozen=True)
class SessionOptions:
    json: bool = False
    exit_on: frozenset[State] = frozenset()
    timeout_s: float | None = None
    interval_s: float = 1.0
    live: bool | None = None  # None: a live view when stdout is a terminal


@dataclass
class Session:
    watcher: Watcher
    options: SessionOptions
    sinks: Sequence[VerdictCallback] = ()
    out: TextIO = field(default_factory=lambda: sys.stdout)
    child_pid: int | None = None  # `run`: our own child; its exit ends the session
    pump: Callable[[Callable[[str], None]], None] | None = None  # `run`: copies server output
    # `run --remedy` (cli/remedy.py): `annotate` may add to each verdict (the change that made it
    # start); `handoff` True ends the session with EXIT_RELAUNCH
    annotate: Callable[[Verdict], Verdict] | None = None
    handoff: Callable[[Verdict], bool] | None = None
    _observation: Observation | None = None
    _stop_signal: int | None = None
    _child_gone: bool = False
    _timed_out: bool = False

    def run(self) -> int:
        live = self.options.live if self.options.live is not None else (self.out.isatty() and not self.options.json)
        previous = signal.signal(signal.SIGINT, self._on_sigint) if self.child_pid is None else None
        try:
            return self._run_live() if live else self._run_plain()
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)

    def _on_sigint(self, signum: int, frame: object) -> None:
        self._stop_signal = signum

    # ---------------------------------------------------------------- the two loops

    def _run_plain(self) -> int:
        while True:
            verdict, changed = self._step(self._echo_plain)
            if changed:
                self._emit(verdict)
            code = self._finished(verdict)
            if code is not None:
                self._drain(self._echo_plain)
                return self._final(verdict, code)
            self._sleep()

    def _run_live(self) -> int:
        from rich.live import Live

        console = Console(file=self.out)
        with Live(console=console, refresh_per_second=4, transient=False) as live:

            def echo(text: str) -> None:
                live.console.print(text, end="", markup=False, highlight=False, soft_wrap=True)

            while True:
                verdict, _ = self._step(echo)
                assert self._observation is not None
                live.update(render(self._observation, verdict))
                code = self._finished(verdict)
                if code is not None:
                    self._drain(echo)
                    break
                self._sleep()
        return self._final(verdict, code, printed=True)

    def _step(self, echo: Callable[[str], None]) -> tuple[Verdict, bool]:
        if self.pump is not None:
            self.pump(echo)
        before = len(self._observation.transitions) if self._observation else 0
        observation, verdict = self.watcher.tick()
        if self.annotate is not None:
            verdict = self.annotate(verdict)
        self._observation = observation
        for sink in self.sinks:
            sink(observation, verdict)
        return verdict, len(observation.transitions) != before

    def _drain(self, echo: Callable[[str], None]) -> None:
        """The server's output up to the verdict that ends the session: the tick read the log after
        this step's copy, so the line that decided it (a ready line) may not have been copied yet."""
        if self.pump is not None:
            self.pump(echo)

    def _echo_plain(self, text: str) -> None:
        # `--json` keeps stdout for verdicts: the server's own output goes to stderr then
        stream = sys.stderr if self.options.json else self.out
        stream.write(text)
        stream.flush()

    # ---------------------------------------------------------------- stopping

    def _finished(self, verdict: Verdict) -> int | None:
        if self.handoff is not None and self.handoff(verdict):
            return EXIT_RELAUNCH
        if verdict.state in self.options.exit_on:
            return EXIT_READY if verdict.state is State.READY else EXIT_NOT_READY
        if verdict.state is State.STOPPED and self.options.exit_on:
            return EXIT_NOT_READY  # a gate ends: a stopped server never becomes ready
        if self._stop_signal is not None:
            return EXIT_INTERRUPTED
        if self.child_pid is not None and child_exited(self.child_pid):
            # finish on the tick after the exit was seen: that tick's verdict already has the status
            if self._child_gone:
                return EXIT_NOT_READY
            self._child_gone = True
        if self.options.timeout_s is not None and self.watcher.observed_for() >= self.options.timeout_s:
            self._timed_out = True
            return EXIT_NOT_READY
        return None

    def _final(self, verdict: Verdict, code: int, *, printed: bool = False) -> int:
        timed_out = self._timed_out
        t = self.watcher.observed_for()
        if code == EXIT_RELAUNCH and self.options.json:
            return code  # not final: the relaunch line and the next server's verdicts follow
        if self.options.json:
            if timed_out or verdict.state not in self.options.exit_on:
                self._write(verdict_json(verdict, t, self._server_name, final=True, timeout=timed_out))
        else:
            if timed_out:
                self._write(f"hangwatch: timed out after {self.options.timeout_s:g}s, the server is {verdict.state.value}")
            if not printed:  # the report diagnose prints, in the same colours on a terminal
                print_verdict(verdict, Console(file=self.out, highlight=False, soft_wrap=True))
                self.out.flush()
        return code

    def _emit(self, verdict: Verdict) -> None:
        t = self.watcher.observed_for()
        if self.options.json:
            self._write(verdict_json(verdict, t, self._server_name))
        else:
            self._write(verdict_line(verdict, t))

    @property
    def _server_name(self) -> str:
        return self._observation.server.name if self._observation else self.watcher.view.server_name

    def _write(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def _sleep(self) -> None:
        interval = 0.2 if self._child_gone else self.options.interval_s
        time.sleep(next_wait(interval, self.watcher.observed_for(), self.watcher.until_budget_end()))


_PAST_BUDGET_S = 0.05


def next_wait(interval: float, observed: float, until_budget_end: float | None) -> float:
    """Seconds to the next tick: on a steady cadence (the time a tick took comes off the sleep), or
    just past the end of the phase's learned budget when that comes first, so that a phase outrunning
    its budget is decided at the budget and not up to an interval later."""
    wait = max(0.05, interval - observed % interval)
    if until_budget_end is not None and 0 <= until_budget_end + _PAST_BUDGET_S < wait:
        return max(0.05, until_budget_end + _PAST_BUDGET_S)
    return wait


def child_exited(pid: int) -> bool:
    """True once our child has exited, without reaping it (the process sampler still reads it)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True  # already reaped
    return info is not None
