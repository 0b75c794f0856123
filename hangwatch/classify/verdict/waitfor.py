"""Who waits for whom: a wait-for graph from every rank's stacks, and the final blocker.

    blocker = final_blocker(evidence, wait_since={"TP1": 40.0})

Each rank's latest stack (and its threads' kernel wait channels) says what it waits on:

| wait        | seen as                                                          | waits on           |
|-------------|------------------------------------------------------------------|--------------------|
| collective  | all_reduce / broadcast / barrier / monitored_barrier / send/recv | the ranks not in it |
| rendezvous  | TCPStore, `_create_c10d_store`, store-based barrier              | ranks not yet here |
| child       | `Popen.wait`, `communicate`, waitpid in the stack                | its children       |
| file lock   | flock / lockf / FileLock (`locks_lock_inode_wait`)               | the lock's holder  |
| FIFO / pipe | `wait_for_partner` (open), `pipe_read` / `pipe_write`            | the other end      |
| GPU         | a CUDA synchronize                                               | the GPU            |

What a thread waits on is decided in classify.waiton, which the user-code rule shares: a
rendezvous or collective the user's script called is a wait on the peers, never the user's code.

Following the edges from any waiting rank ends at the *final blocker*: a rank or process that
waits on nothing in the graph (a FIFO nobody writes, the GPU, a child still running, a rank still
computing), or a rank that is dead or absent, or a cycle. A cycle, or a wait on a dead or absent
rank, is `definite`: it cannot end by itself, so the watch loop calls it a stall without a hold.
Pure: evidence and the per-rank wait times in, a `Blocker` out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from hangwatch.classify.verdict.context import Context, label_order
from hangwatch.classify.verdict.waiton import Wait, blamed_frame, thread_wait
from hangwatch.engines import rank_roles
from hangwatch.model import Blocker, Evidence, Origin, ProcessRecord, ProcessStack, ThreadStack

__all__ = ["Wait", "process_wait", "final_blocker", "wait_graph"]

_PY_WAIT_FILE = re.compile(r"(^|/)(threading|queue|selectors|concurrent/futures/[a-z_]+|multiprocessing/[a-z_]+)\.py$")
# kernel wait channels (/proc/PID/task/*/wchan) that say what a blocked thread waits on
_WCHAN = (
    (re.compile(r"wait_for_partner"), "fifo", "a FIFO: open() waits for the other end, which nobody has opened"),
    (re.compile(r"pipe_read|pipe_wait|pipe_write|anon_pipe"), "pipe", "a pipe: the other end writes nothing"),
    (re.compile(r"locks_lock_inode_wait|flock_lock_inode_wait|posix_lock|fcntl_setlk|locks_"), "lock",
     "a file lock held by another process"),
)  # do_wait is not here: some helper thread of every server waits on a child (a resource tracker)
_BLOCKING = frozenset({"fifo", "pipe", "lock", "gpu", "child", "collective", "rendezvous"})


def _blocked_thread(stack: ProcessStack) -> ThreadStack | None:
    """The thread most likely blocked in the kernel: idle, and not in one of Python's own waits
    (a loader thread in open() while the main thread waits for it in threading.py)."""
    threads = sorted(stack.threads, key=lambda th: th is not stack.main)
    idle = [th for th in threads if th.top is not None and th.active is not True]
    outside = [th for th in idle if not (th.top and th.top.file and _PY_WAIT_FILE.search(th.top.file))]
    chosen = outside or idle or threads
    return chosen[0] if chosen else None


def process_wait(stack: ProcessStack, proc: ProcessRecord | None) -> Wait:
    """What one process waits on, from its stack's threads (main first) and its wait channels."""
    main = stack.main
    ordered = sorted(stack.threads, key=lambda th: th is not main)
    for thread in ordered:
        found = thread_wait(thread)
        if found is not None:
            return found
        if thread is main and _in_user_code(thread):
            break  # the main thread sits in the user's frames: a helper thread's wait is not the rank's
    for pattern, kind, what in _WCHAN:
        if proc is not None and any(pattern.search(w) for w in proc.wchan):
            blocked = _blocked_thread(stack)
            return Wait(kind, what, blocked.top if blocked else None)
    if main is not None and main.active:
        return Wait("running", f"nothing: it runs {main.top.display if main.top else '?'}", main.top)
    where = main.top.display if main is not None and main.top is not None else "?"
    return Wait("idle", f"no peer: it sits idle in {where}", main.top if main else None)


def _in_user_code(thread: ThreadStack) -> bool:
    frame = blamed_frame(thread)
    return frame is not None and frame.origin is Origin.USER


# ---------------------------------------------------------------- the graph


@dataclass(frozen=True)
class _Node:
    label: str
    proc: ProcessRecord | None
    wait: Wait | None  # None: dead or absent (no stack)
    dead: bool = False
    absent: bool = False


def wait_graph(evidence: Evidence) -> tuple[dict[str, _Node], dict[str, list[str]]]:
    """(nodes by label, edges label -> the labels it waits on)."""
    ctx = Context(evidence)
    stacks = ctx.rank_stacks or ctx.stacks
    nodes: dict[str, _Node] = {}
    for label, stack in stacks.items():
        proc = ctx.proc_of(stack)
        if proc is not None and proc.exited:
            nodes[label] = _Node(label, proc, None, dead=True)  # its last stack is from before it died
            continue
        nodes[label] = _Node(label, proc, process_wait(stack, proc))
    for proc in evidence.procs:
        label = proc.rank or f"pid {proc.pid}"
        if (proc.rank or proc.role in rank_roles()) and label not in nodes and proc.exited:
            nodes[label] = _Node(label, proc, None, dead=True)
    for label in _absent_ranks(evidence, nodes):
        nodes[label] = _Node(label, None, None, absent=True)
    return nodes, _edges(nodes, evidence)


def _absent_ranks(evidence: Evidence, nodes: Mapping[str, _Node]) -> list[str]:
    """Ranks a one-node start must have (TP0..TP{tp-1}) that no process is (not even a dead one).
    Across nodes the others' ranks live elsewhere: they are not absent, only not seen."""
    flags = evidence.flags
    tp = _int(flags.get("tp") or flags.get("tp-size") or flags.get("tensor-parallel-size"))
    nnodes = _int(flags.get("nnodes")) or 1
    labels = {p.rank for p in evidence.procs if p.rank} | set(nodes)
    if not tp or tp < 2 or nnodes != 1 or not any(label.startswith("TP") for label in labels):
        return []
    return [f"TP{i}" for i in range(tp) if f"TP{i}" not in labels]


def _edges(nodes: Mapping[str, _Node], evidence: Evidence) -> dict[str, list[str]]:
    ranks = _participants(nodes)
    dead = [r for r in ranks if nodes[r].dead or nodes[r].absent]
    edges: dict[str, list[str]] = {}
    for label, node in nodes.items():
        wait = node.wait
        if wait is None:
            continue
        if wait.kind == "collective":
            edges[label] = [r for r in ranks if r != label and not _same_call(nodes[r], wait)]
        elif wait.kind == "gpu" and len(ranks) > 1:
            # a rank synchronizing on its GPU in a multi-rank start usually waits for an NCCL kernel,
            # which waits for the peers that are not in one: a dead rank, or one elsewhere in Python
            edges[label] = dead or [r for r in ranks if r != label and not _in_device_wait(nodes[r])]
        elif wait.kind == "rendezvous":
            edges[label] = [r for r in ranks if r != label and not _in_rendezvous(nodes[r])]
        elif wait.kind == "child" and node.proc is not None:
            edges[label] = _children(node.proc, nodes, evidence)
    return {label: sorted(targets, key=label_order) for label, targets in edges.items() if targets}


def _participants(nodes: Mapping[str, _Node]) -> list[str]:
    """The processes in the collectives: every rank but one that drives other ranks as their
    parent (vLLM's EngineCore over its TP workers; with TP=1 it is the rank itself)."""
    ranks = [label for label, node in nodes.items() if _is_rank(label, node)]
    parents = {proc.ppid for r in ranks if (proc := nodes[r].proc) is not None}
    return [r for r in ranks if (proc := nodes[r].proc) is None or proc.pid not in parents]


def _is_rank(label: str, node: _Node) -> bool:
    if node.absent or (node.proc is not None and node.proc.rank):
        return True
    return node.proc is not None and node.proc.role in rank_roles()


def _in_rendezvous(node: _Node) -> bool:
    return node.wait is not None and node.wait.kind == "rendezvous"


def _in_device_wait(node: _Node) -> bool:
    return node.wait is not None and node.wait.kind in ("gpu", "collective")


def _same_call(node: _Node, wait: Wait) -> bool:
    return node.wait is not None and node.wait.kind == "collective" and node.wait.call == wait.call


def _children(proc: ProcessRecord, nodes: Mapping[str, _Node], evidence: Evidence) -> list[str]:
    by_pid = {n.proc.pid: label for label, n in nodes.items() if n.proc is not None}
    return [by_pid[p.pid] for p in evidence.procs if p.ppid == proc.pid and p.pid in by_pid]


# ---------------------------------------------------------------- the end of the chain


def _chain(start: str, edges: Mapping[str, list[str]], nodes: Mapping[str, _Node]) -> tuple[list[str], bool]:
    """Follow the first edge from `start` (a dead or absent target first) to the end; (path, cycle)."""
    path, seen = [start], {start}
    while path[-1] in edges:
        targets = sorted(edges[path[-1]], key=lambda t: (not (nodes[t].dead or nodes[t].absent), label_order(t)))
        following = targets[0]
        if following in seen:
            return path + [following], True
        path.append(following)
        seen.add(following)
    return path, False


def final_blocker(evidence: Evidence, wait_since: Mapping[str, float] | None = None) -> Blocker | None:
    """The rank or process at the end of the longest wait-for chain; None when nothing blocks
    (no stacks, or every rank runs)."""
    nodes, edges = wait_graph(evidence)
    if not nodes:
        return None
    chains = [_chain(label, edges, nodes) for label in sorted(edges, key=label_order)]
    cycles = [path for path, cycle in chains if cycle]
    if cycles:
        return _cycle_blocker(cycles[0], nodes, wait_since or {})
    if chains:
        path = max((path for path, _ in chains), key=len)
        return _end_blocker(path, nodes, wait_since or {})
    waiting = [label for label, n in nodes.items() if n.wait is not None and n.wait.kind in _BLOCKING]
    if not waiting:
        return None
    # a rank before a helper process; a wait on something outside the graph (a FIFO, the GPU) first
    first = min(waiting, key=lambda label: (not _is_rank(label, nodes[label]), _OUTSIDE.get(_kind(nodes[label]), 9),
                                            label_order(label)))
    return _end_blocker([first], nodes, wait_since or {})


_OUTSIDE = {"fifo": 0, "pipe": 0, "lock": 0, "gpu": 1, "child": 2, "collective": 3, "rendezvous": 3}


def _kind(node: _Node) -> str:
    return node.wait.kind if node.wait is not None else ""


def _end_blocker(path: list[str], nodes: Mapping[str, _Node], since: Mapping[str, float]) -> Blocker:
    node = nodes[path[-1]]
    if node.dead or node.absent:
        return Blocker(rank=_rank(node), pid=node.proc.pid if node.proc else None, waits_on=_gone(node),
                       frame=None, state="exited" if node.dead else "absent", for_s=None, chain=tuple(path),
                       definite=len(path) > 1)
    wait = node.wait
    assert wait is not None
    return Blocker(rank=_rank(node), pid=node.proc.pid if node.proc else None, waits_on=wait.what,
                   frame=wait.frame.display if wait.frame else None, state=node.proc.state if node.proc else None,
                   for_s=_since(since, node.label), chain=tuple(path))


def _cycle_blocker(path: list[str], nodes: Mapping[str, _Node], since: Mapping[str, float]) -> Blocker:
    """Ranks waiting on each other (TP0 in all_reduce, TP1 in broadcast): the first of the cycle is named."""
    loop = path[path.index(path[-1]):]
    node = nodes[loop[0]]
    wait = node.wait
    assert wait is not None
    others = ", ".join(f"{label} in {_what(nodes[label])}" for label in loop[1:-1])
    return Blocker(rank=_rank(node), pid=node.proc.pid if node.proc else None,
                   waits_on=f"{wait.what}, while {others} (a cycle: {' -> '.join(loop)})",
                   frame=wait.frame.display if wait.frame else None, state=node.proc.state if node.proc else None,
                   for_s=_since(since, node.label), chain=tuple(path), definite=True)


def _since(since: Mapping[str, float], label: str) -> float | None:
    """The watch keys stacks by their own label ("12345"); the graph names a rankless one "pid 12345"."""
    return since.get(label, since.get(label.removeprefix("pid ")))


def _what(node: _Node) -> str:
    return node.wait.what if node.wait is not None else "?"


def _gone(node: _Node) -> str:
    if node.absent:
        return "nothing: this rank was never started"
    code = node.proc.exit_code if node.proc else None
    return "nothing: it exited" + (f" (code {code})" if code is not None else "")


def _rank(node: _Node) -> str | None:
    if node.proc is not None:
        return node.proc.rank
    return None if node.label.startswith("pid ") or node.label.isdigit() else node.label


def _int(value: object) -> int | None:
    try:
        return int(value) if isinstance(value, (str, int)) and value is not True else None
    except ValueError:
        return None
