"""Where a thread waits: the one decision the classifier's user-code rule and the wait-for graph share.

    thread_wait(thread) -> Wait | None      what the thread waits on (a collective, the rendezvous, ...)
    blamed_frame(thread) -> Frame | None    the frame that decides whose the wait is

A rank whose innermost blocking frame is a rendezvous, a store, a collective or a peer's socket
waits on its peers, whoever called it: the user's script calling `init_process_group` is the way
down to the wait, not the wait. The user's code is where a thread waits only when the thread is
in the user's own frames (blocked on something the user opened, or spinning there) with no such
wait inside them. The frames outside the innermost user frame are its callers: a wait they name
(an engine's `init_process_group` that called a user hook) is not where the thread is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hangwatch.model import Frame, Origin, ThreadStack

__all__ = ["PASS_THROUGH", "PEER_WAITS", "Wait", "blamed_frame", "thread_wait"]

# the TCPStore and its clients, c10d rendezvous handlers, gloo's full mesh of peer sockets
_RENDEZVOUS = re.compile(r"_create_c10d_store|TCPStore|waitForWorkers|store_based_barrier|_tcp_rendezvous|"
                         r"rendezvous|init_process_group|TCPClient|PrefixStore|connectFullMesh|"
                         r"createAndConnectAllPairs")
_COLLECTIVE = re.compile(r"\b(all_reduce|allreduce|all_gather\w*|broadcast\w*|reduce_scatter\w*|barrier|"
                         r"monitored_barrier|all_to_all\w*|send|recv|isend|irecv)\b|nccl(AllReduce|Broadcast|"
                         r"AllGather|ReduceScatter|Send|Recv)|gloo::")
_DISTRIBUTED_FILE = re.compile(r"torch/distributed|distributed_c10d|parallel_state|communication_op|nccl|gloo|"
                               r"custom_all_reduce|pynccl|libnccl|libgloo")
_CHILD = re.compile(r"Popen\.(wait|communicate|_wait)|\bwaitpid\b|check_output|check_call|subprocess\.run|"
                    r"\bwait4\b|os\.wait")
_LOCK = re.compile(r"\bflock\b|\blockf\b|FileLock|filelock|SoftFileLock|fcntl")
_GPU = re.compile(r"synchroni[sz]e|cudaStreamSynchronize|cudaDeviceSynchronize|cuStreamSynchronize|"
                  r"cudaEventSynchronize|cuEventSynchronize|cudaMemcpy(?!Async)")
# a wait on the peers: it ends when they arrive, so the cause is where they are (the distributed family)
PEER_WAITS = frozenset({"collective", "rendezvous"})
# Frames that are only the way down to a wait: the stdlib, torch, other libraries, native code.
PASS_THROUGH = frozenset({Origin.LIBRARY, Origin.TORCH, Origin.NATIVE})


@dataclass(frozen=True)
class Wait:
    """What one process waits on: `kind`, a phrase, and the frame it sits in."""

    kind: str  # collective, rendezvous, child, lock, fifo, pipe, gpu, running, idle
    what: str
    frame: Frame | None = None
    call: str | None = None  # the collective's function name: ranks in different ones wait on each other


def _text(frame: Frame) -> str:
    return f"{frame.qualname} {frame.function} {frame.file or frame.library or ''}"


def _frame_wait(frame: Frame) -> Wait | None:
    text = _text(frame)
    if _GPU.search(frame.qualname) or _GPU.search(frame.function):
        return Wait("gpu", "the GPU (a CUDA synchronize)", frame)
    if frame.origin is not Origin.USER:  # the user's own names (`def rendezvous()`) are no peer wait
        if _RENDEZVOUS.search(text):
            return Wait("rendezvous", "the distributed rendezvous (TCPStore)", frame)
        found = _COLLECTIVE.search(frame.function) or _COLLECTIVE.search(frame.qualname)
        if found and _DISTRIBUTED_FILE.search(text):
            return Wait("collective", f"a collective ({frame.function})", frame, frame.function)
    if _CHILD.search(frame.qualname) or _CHILD.search(f"{frame.file}:{frame.function}"):
        return Wait("child", "a child process to exit", frame)
    if _LOCK.search(text):
        return Wait("lock", "a file lock", frame)
    return None


def thread_wait(thread: ThreadStack) -> Wait | None:
    """The thread's innermost frame that names a wait, up to its innermost user frame; None when none does."""
    return _frames_wait(thread.frames)


def _frames_wait(frames: Sequence[Frame]) -> Wait | None:
    for frame in frames:  # innermost first
        found = _frame_wait(frame)
        if found is not None:
            return found
        if frame.origin is Origin.USER:
            return None  # the frames below are the user's callers, not where the thread waits
    return None


def blamed_frame(thread: ThreadStack, top: int | None = None) -> Frame | None:
    """Where the thread waits, not who called it: a wait on the peers inside the thread's own
    frames (that wait's frame: torch or native code, never the user's), else the innermost frame
    that is engine or user code. `top` limits the frames looked at, innermost first."""
    frames = thread.frames[:top]
    wait = _frames_wait(frames)
    if wait is not None and wait.kind in PEER_WAITS:
        return wait.frame
    return next((f for f in frames if f.origin not in PASS_THROUGH), None)
