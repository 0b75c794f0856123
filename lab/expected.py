"""The right verdict for every lab scenario: one table for the lab tests and bench/bench_live.py."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Expected:
    states: tuple[str, ...]  # a verdict in one of these states (with `cause`) is right
    cause: str | None
    culprits: tuple[str, ...] = ()  # ranks the verdict must name
    blocker: str | None = None  # the rank the final blocker must name
    # a start that reaches ready: never `stalled`, timed from the lab's `ready` instead of an onset
    recovers: bool = False
    # the lab makes the hang end this long after its onset (a late node joins): a stall that ends
    # after that is no flap
    ends_after_s: float | None = None
    # the cause is there before the lab's onset (port-taken: the port is held before the launch,
    # the onset is the bind failing), so a right stall before the onset is not early
    known_before_onset: bool = False


_READY = Expected(("ready",), None, recovers=True)

EXPECTED: dict[str, Expected] = {
    "healthy": _READY,
    "healthy-tp2": _READY,
    "kv-slow": _READY,  # the KV pool takes ~10 s to zero-fill: slow, not hung
    "two-node-missing": Expected(("stalled",), "multinode_rendezvous"),
    # node 1 comes 25 s after the onset: stalled on the rendezvous, then ready (no flap)
    "two-node-late": Expected(("stalled",), "multinode_rendezvous", ends_after_s=25.0),
    # two-node-missing whose soft watchdog logs "... watchdog timeout" every 5 s: a repeated line
    # is no progress, so the rendezvous rules' holds pass as in two-node-missing
    "two-node-watchdog": Expected(("stalled",), "multinode_rendezvous"),
    "weights-fifo": Expected(("stalled",), "weight_loading_io"),
    # node 1's TP1 reads weights from a FIFO while TP0 waits in the post-load barrier
    "tp2-one-rank-loading": Expected(("stalled",), "weight_loading_io", blocker="TP1"),
    # node 1's SIGKILLed TP1 is seen exiting through node 1's launcher, a peer on this host, while
    # node 0 waits for it in the rendezvous: node 0 is stalled, on a dead rank
    "rank-killed": Expected(("stalled",), "dead_rank", culprits=("TP1",)),
    # on CPU, TP0 fails on the reset gloo socket and SGLang takes the tree down within half a
    # second, so it may be seen stalled or crashed a tick before the rest is gone
    "rank-killed-one-node": Expected(("stalled", "crashed"), "dead_rank", culprits=("TP1",)),
    "hs-dump-patch": Expected(("stalled",), "patch_or_user_code"),
    # the holder is seen before uvicorn fails to bind; then SGLang takes its tree down
    "port-taken": Expected(("stalled", "crashed"), "port_in_use", known_before_onset=True),
    "vllm-healthy": _READY,
    "vllm-healthy-tp2": _READY,
    "vllm-two-node-missing": Expected(("stalled",), "multinode_rendezvous"),
    # --data-parallel-size 2 --data-parallel-size-local 1, the remote DP rank never started: the
    # local engine repeats its wait every 10 s (a wait, not progress) on remote peers
    "vllm-dp-remote-missing": Expected(("stalled",), "multinode_rendezvous"),
    "vllm-weights-fifo": Expected(("stalled",), "weight_loading_io"),
    "vllm-warmup-blocked": Expected(("stalled",), "patch_or_user_code"),
    # vLLM takes its tree down within seconds: the dead worker (or the failed port) may be seen a
    # tick before the rest is gone
    "vllm-master-port-taken": Expected(("stalled", "crashed"), "port_in_use"),
    "vllm-worker-killed": Expected(("stalled", "crashed"), "dead_rank"),
}


def is_right(scenario: str, verdict: dict) -> bool:
    """Whether a `--json` verdict line is the right one for the scenario."""
    want = EXPECTED[scenario]
    return verdict["state"] in want.states and (want.cause is None or verdict.get("cause") == want.cause)
