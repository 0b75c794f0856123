"""How one watch runs: `WatchConfig`, and the rules as the live loop holds them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hangwatch.model import Finding, State
from hangwatch.watch.budgets import BudgetPolicy
from hangwatch.watch.ladder import LadderConfig
from hangwatch.watch.progress import Thresholds

__all__ = ["WatchConfig", "live_rules"]


@dataclass(frozen=True)
class WatchConfig:
    interval_s: float = 1.0
    ladder: LadderConfig = field(default_factory=LadderConfig)
    thresholds: Thresholds = field(default_factory=Thresholds)
    stack_timeout_s: float = 5.0
    log_path: str | None = None  # overrides the log discover() found
    initial_log_bytes: int = 8 << 20  # of an existing log, only the tail is read at start
    evidence_log_lines: int = 5_000  # newest lines handed to the classifier (phase lines always)
    recent_signals_s: float = 10.0  # a progress signal stays in the evidence this long
    proc_root: str = "/proc"
    # what `hangwatch preflight` found before this launch: evidence for the live rules
    preflight: tuple[Finding, ...] = ()
    ss: str = "ss"
    gpus: bool = True
    nvml: Any = None  # a pynvml-like module (tests: RecordedNvml); None = the real one
    max_stack_targets: int = 64
    first_stacks_wait_s: float = 1.0
    # First look: a watch that begins takes one reading of everything that can move (log, /proc
    # counters, GPU memory, a stack round) and compares the first tick's with it this much later,
    # so its first verdict already knows what moved (a late attach to a stuck server is `stalled`
    # at once, a silent compile is not). Only on the real clock (`tick()` without `now`).
    first_look_s: float = 1.0
    # Live, a rule that is not `immediate` decides "stalled" only after nothing has moved this
    # long, even without its own `for:`: at the first tick of a healthy start every rank is
    # "inside" some phase and its stack in some wait. A bundle (quiet time unknown) is unaffected.
    min_hold_s: float = 3.0
    learn: bool = True  # learned budgets and the ETA from past starts (`--no-learn`: off)
    budget_policy: BudgetPolicy = field(default_factory=BudgetPolicy)


def live_rules(rules: Sequence[Any], min_hold_s: float) -> list[Any]:
    """The rules with the live hold floor (see WatchConfig.min_hold_s); immediate and
    `state: progressing` rules keep theirs: one proves a stall, the other is not one."""
    out = []
    for rule in rules:
        if not rule.immediate and rule.state is not State.PROGRESSING and rule.hold_s < min_hold_s:
            rule = replace(rule, hold_s=min_hold_s)
        out.append(rule)
    return out
