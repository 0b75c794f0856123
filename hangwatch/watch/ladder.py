"""When to climb the evidence ladder (docs/live.md, "What one tick does"): pure decisions, the watch loop acts on them.

Rung 1 (log, processes, ports, NVML) runs every tick and is not decided here, except a ready
server's ports and process-tree scan (below).

A ready server is the steady state of a sidecar that lives for weeks: what only a start needs
each second is then sampled rarely: Python stacks every `ready_stack_interval_s`; the listening
ports, and the scan of every process on the host for new children of the server, every
`ready_rescan_s` (bench/bench_overhead.py measured these as most of its cost: `ss` is a fork and
exec, the scan reads /proc/*/stat, a stack round runs a py-spy per rank). The log, the known
processes (a rank's death, its CPU) and NVML keep their pace, and any other state, or a known
process gone, brings the start's pace back at the next tick.

Rung 2, Python stacks: `py-spy dump --json --nonblocking` reads the target's memory without
stopping it (a few ms of the watcher's CPU per process, nothing of the target's). Taken for every
rank in parallel when the log has been quiet for a few seconds, or when there are none yet, and
never more often than `stack_interval_s`.

Rung 3, native stacks: `py-spy dump --native` must stop the target (ptrace-attach, walk every
thread's native stack with unwind tables, detach): typically 50-500 ms, and seconds for a process
with hundreds of threads or a large CUDA library mapped. A paused rank misses its own timers and
any peer waiting on it waits that long too. So native dumps are taken only when the server already
looks stalled (or a phase is about to outrun its learned budget with nothing moving), only of
ranks whose top Python frame is a call into native code (where the Python
stack cannot say what it waits for), and at most once per `native_interval_s` per rank.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from hangwatch.model import ProcessStack, ThreadStack

__all__ = ["LadderConfig", "looks_stalled", "rescan_due", "python_dump_due", "native_targets", "needs_native", "NATIVE_DECIDES"]

# Python frames that are thin wrappers around a blocking native call: only native frames tell
# what the call waits on (which NCCL step, which CUDA API, which socket).
NATIVE_DECIDES = re.compile(
    r"synchroni[sz]e|nccl|NCCL|TCPStore|_create_c10d_store|rendezvous|store_based_barrier|barrier|"
    r"ffi_call|Work\.wait|\bwait_stream\b|init_process_group|new_group|all_reduce|all_gather|"
    r"broadcast|reduce_scatter|send|recv|custom_all_reduce|capture|empty_cache|mem_get_info|"
    r"load_library|dlopen|cuInit|_lazy_init|init_memory_pool"
)
# Waits whose Python frame already says everything: a lock, a queue, a sleep, a selector.
_PYTHON_WAITS = re.compile(
    r"(^|/)(threading|queue|selectors|asyncio/[a-z_]+|multiprocessing/[a-z_]+)\.py$"
    r"|(^|/)zmq/"  # a ZMQ recv/poll: an idle detokenizer or scheduler waiting for its next message
)


@dataclass(frozen=True)
class LadderConfig:
    quiet_before_stacks_s: float = 3.0  # log silence before Python stacks are worth taking
    stack_interval_s: float = 5.0  # at most one round of Python stacks this often
    native: bool = True  # allow rung 3 at all (`--no-native` turns it off)
    native_interval_s: float = 60.0  # per rank
    native_after_quiet_s: float = 45.0  # "looks stalled" without a stalled verdict: nothing moved this long
    # ... or, with nothing moving, this close to the end of a phase's learned budget: the stall
    # about to be declared then has its native frames (which decide a CUDA graph capture or a
    # spinning kernel) instead of being refined a round later
    native_before_budget_s: float = 2.0
    ready_stack_interval_s: float = 60.0  # a ready server's Python stacks: fresh enough for a bundle
    ready_rescan_s: float = 10.0  # a ready server's ports and new children


def python_dump_due(now: float, last_dump_t: float | None, log_quiet_s: float, have_stacks: bool,
                    config: LadderConfig, *, ready: bool = False) -> bool:
    interval = config.ready_stack_interval_s if ready else config.stack_interval_s
    if last_dump_t is not None and now - last_dump_t < interval:
        return False
    return not have_stacks or log_quiet_s >= config.quiet_before_stacks_s


def rescan_due(now: float, last_t: float | None, ready: bool, config: LadderConfig) -> bool:
    """Ports and the process-tree scan: every tick while the server starts (a port taken, the
    HTTP port opening, ranks spawned); every `ready_rescan_s` once it is ready."""
    return not ready or last_t is None or now - last_t >= config.ready_rescan_s


def looks_stalled(stalled_verdict: bool, quiet_s: float, config: LadderConfig, budget_left_s: float | None = None) -> bool:
    """`budget_left_s`: what is left of the current phase's learned budget (None: none learned)."""
    near_budget = (budget_left_s is not None and budget_left_s <= config.native_before_budget_s
                   and quiet_s >= config.quiet_before_stacks_s)
    return stalled_verdict or near_budget or quiet_s >= config.native_after_quiet_s


def native_targets(latest: Mapping[str, ProcessStack], last_native_t: Mapping[str, float], now: float,
                   stalled: bool, config: LadderConfig) -> list[str]:
    """Labels of ranks to dump with native frames now (empty for a healthy-looking server)."""
    if not config.native or not stalled:
        return []
    return [
        label
        for label, stack in latest.items()
        if not stack.native and needs_native(stack) and now - last_native_t.get(label, float("-inf")) >= config.native_interval_s
    ]


def needs_native(stack: ProcessStack) -> bool:
    """True when some thread sits in a call into native code that its Python frames cannot explain:
    a known wrapper of a blocking native call on top, or an idle thread (py-spy `active: false`)
    whose top frame is not one of Python's own waits."""
    # every thread: the blocked call is often in a helper (a weight-loader pool thread in open())
    # while the main thread only waits for it in threading.py
    return any(_in_native_call(thread) for thread in stack.threads)


def _in_native_call(thread: ThreadStack) -> bool:
    top = thread.top
    if top is None or (top.file and _PYTHON_WAITS.search(top.file)):
        return False
    if NATIVE_DECIDES.search(top.qualname) or NATIVE_DECIDES.search(top.function):
        return True
    return thread.active is False
