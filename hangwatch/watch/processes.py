"""The server's processes as the watch knows them: each reading's tree, and who a process was once it exits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hangwatch.engines import rank_roles
from hangwatch.model import Missing, ProcessRecord
from hangwatch.watch.reading import Reading

__all__ = ["ProcessTable", "pin_launcher"]


class ProcessTable:
    def __init__(self, root_pid: int) -> None:
        self.root_pid = root_pid
        self.procs: list[ProcessRecord] = []
        self.missing: Missing | None = None  # the launcher gone before any process was seen

    def take(self, reading: Reading) -> None:
        """A reading's tree (a reading without one changes nothing). The launcher gone: whatever
        was seen stays, marked exited: that is a crash to report."""
        if reading.procs is not None:
            self.procs, self.missing = pin_launcher(list(reading.procs), self.root_pid, self.procs), None
        elif reading.launcher_gone is not None:
            self.procs = [replace(p, alive=False, state=None) if p.alive else p for p in self.procs]
            self.missing = self.missing if self.procs else reading.launcher_gone

    def rank_died(self) -> bool:
        """A rank has exited (a stop asked for after that is no stop's end: it had crashed)."""
        return any(p.exited and p.role in rank_roles() for p in self.procs)


def pin_launcher(records: list[ProcessRecord], root_pid: int, previous: Sequence[ProcessRecord]) -> list[ProcessRecord]:
    """Keep who a process was once it exits: a zombie's command line is gone (its title with it),
    so without this a dead scheduler reads as "other" and the launcher we started as not one.
    The root we watch is the launcher, whatever its command line says (`run` may start a wrapper)."""
    before = {(p.pid, p.create_time): p for p in previous}
    out = []
    for record in records:
        known = before.get((record.pid, record.create_time))
        if not record.alive and known is not None:
            record = replace(record, cmdline=known.cmdline, role=known.role, rank=known.rank)
        if record.pid == root_pid and record.role != "launcher":
            record = replace(record, role="launcher", rank=None)
        out.append(record)
    return out
