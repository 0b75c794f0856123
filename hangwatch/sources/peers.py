"""The other nodes of a multi-node launch that run on this same host (a CPU lab, a test box).

`--nnodes 2` on one machine starts two launchers, one per node rank; a rank of node 1 that holds
node 0 in a barrier is under the other launcher, so watching node 0's tree never samples it. A
peer is another launcher of the same engine, on this host, whose rendezvous (nnodes and
`--dist-init-addr`, or vLLM's master address and port; the flag names come from engines/) is the
watched one's, with a different node rank. Its rank processes are sampled like the watched ones
(process records, stacks, wait channels); it is never signalled. Peers on other hosts are not
seen (docs/live.md).
"""

from __future__ import annotations

import os

from hangwatch.engines import get_engine
from hangwatch.parse.flags import parse_flags
from hangwatch.sources.discover import launcher_engine, read_cmdline
from hangwatch.sources.procs import parent_pid

__all__ = ["MAX_PEERS", "find_peers"]

MAX_PEERS = 16  # launchers kept at most: nnodes - 1 on one host, bounded against a crowded host
_MAX_SCANNED = 65536  # pids looked at in one scan


def find_peers(launcher_pid: int, engine: str | None, cmdline: str, *, proc_root: str = "/proc") -> tuple[int, ...]:
    """Launcher pids of the same launch's other node ranks on this host, sorted; () for a
    single-node launch or an unknown engine."""
    if engine is None:
        return ()
    spec = get_engine(engine)
    flags = parse_flags(cmdline)
    key = spec.rendezvous(flags)
    if key is None:
        return ()
    own_rank = spec.node_rank(flags)
    matching: dict[int, str] = {}  # pid -> node rank
    try:
        names = os.listdir(proc_root)
    except OSError:
        return ()
    for name in names[:_MAX_SCANNED]:
        if not name.isdigit() or int(name) == launcher_pid:
            continue
        other = read_cmdline(int(name), proc_root=proc_root) or ""
        if launcher_engine(other) != engine:
            continue
        other_flags = parse_flags(other)
        if spec.rendezvous(other_flags) == key and spec.node_rank(other_flags) != own_rank:
            matching[int(name)] = spec.node_rank(other_flags)
    # a wrapper (`sh -c "python -m sglang.launch_server ..."`) carries the same command line as the
    # launcher it starts: keep the outermost of each chain, its tree holds the inner one
    outer = [pid for pid in matching if parent_pid(pid, proc_root) not in matching]
    return tuple(sorted(outer)[:MAX_PEERS])
