"""Rungs 2 and 3 of the evidence ladder, acted on: which rounds of stacks to take, on a worker thread.

    rounds.schedule(t, targets, ...)   start a Python round (and a native one) when ladder.py says so
    rounds.finished()                  the rounds done since the last call; the tick stores them

Dumps run beside the loop, never in it: a slow py-spy never delays a tick, and its round joins
the next one. The decisions themselves are ladder.py's (pure); this keeps their clocks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait

from hangwatch.model import ProcessStack
from hangwatch.watch.ladder import LadderConfig, looks_stalled, native_targets, python_dump_due, rescan_due
from hangwatch.watch.reading import StackRound, StackTarget

__all__ = ["StackRounds"]

Dump = Callable[[Sequence[StackTarget], bool], StackRound]


class StackRounds:
    def __init__(self, dump: Dump, config: LadderConfig) -> None:
        self._dump, self.config = dump, config
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hangwatch-stacks")
        self._python: Future[StackRound] | None = None
        self._native: Future[StackRound] | None = None
        self._python_t: float | None = None  # watch time the last Python round began
        self._rescan_t: float | None = None
        self._native_t: dict[str, float] = {}  # label -> watch time of its last native round

    def rescan_due(self, t: float, ready: bool) -> bool:
        """Ports and the process-tree scan this tick (ladder.rescan_due); counted as done."""
        due = rescan_due(t, self._rescan_t, ready, self.config)
        self._rescan_t = t if due else self._rescan_t
        return due

    def schedule(self, t: float, targets: list[StackTarget], *, log_quiet_s: float, have_stacks: bool, ready: bool,
                 stalled: bool, quiet_s: float, budget_left_s: float | None, latest: Mapping[str, ProcessStack]) -> None:
        """Start the rounds due: Python stacks (rung 2) when the log is quiet or none were taken;
        native ones (rung 3) of ranks in a native call, only when the server looks stalled."""
        if self._python is None and python_dump_due(t, self._python_t, log_quiet_s, have_stacks, self.config, ready=ready):
            self._python_t = t
            self._python = self._pool.submit(self._dump, targets, False)
        if self._native is None and looks_stalled(stalled, quiet_s, self.config, budget_left_s):
            labels = set(native_targets(latest, self._native_t, t, True, self.config))
            chosen = [target for target in targets if target.label in labels]
            if chosen:
                self._native_t.update({target.label: t for target in chosen})
                self._native = self._pool.submit(self._dump, chosen, True)

    def took_python(self, t: float) -> None:
        """A Python round was taken outside the schedule (`collect`): the next is due from it."""
        self._python_t = t

    def finished(self) -> list[StackRound]:
        """The rounds that finished since the last call (Python first)."""
        done = []
        if self._python is not None and self._python.done():
            done.append(self._python.result())
            self._python = None
        if self._native is not None and self._native.done():
            done.append(self._native.result())
            self._native = None
        return done

    def python_running(self) -> bool:
        return self._python is not None and not self._python.done()

    def wait_python(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the Python round in flight; True when one finished."""
        if self._python is None:
            return False
        done, _ = wait([self._python], timeout=timeout_s)
        return bool(done)

    def wait_python_doing(self, timeout_s: float, meanwhile: Callable[[], object], every_s: float = 0.25) -> None:
        """Wait up to `timeout_s` for the Python round in flight, running `meanwhile` after each
        `every_s` of it (the first look reads the processes while its round runs)."""
        deadline = time.monotonic() + timeout_s
        while self.python_running() and time.monotonic() < deadline:
            self.wait_python(every_s)
            meanwhile()

    def forget_except(self, kept: Collection[str]) -> None:
        """Processes that are gone stop costing memory."""
        self._native_t = {k: v for k, v in self._native_t.items() if k in kept}

    def settle(self, timeout_s: float = 10.0) -> None:
        """Wait until the rounds in flight have finished (their results join the next tick)."""
        pending = [f for f in (self._python, self._native) if f is not None]
        if pending:
            wait(pending, timeout=timeout_s)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
