"""The classifier's state logic: ready, crashed, matches, holds, budgets, missing evidence."""

from __future__ import annotations

from hangwatch.classify import classify, match_rule, rank_matches
from hangwatch.classify.verdict.classifier import HOW_TO_COLLECT, Match
from hangwatch.classify.verdict.context import Context
from hangwatch.model import (
    Evidence,
    Fact,
    Missing,
    Phase,
    ProcessRecord,
    RunnerUp,
    Source,
    State,
)
from helpers.classify_builders import event, frame, logs, rule, stack

NCCL = rule(
    "{all: [{phase.at: dist_init}, {log.matches: 'Init torch distributed begin'}]}",
    id="nccl-init-hang", cause="nccl_init", confidence="0.7", message="'{ranks} stuck in {phase} after {quiet_s}s'",
    **{"for": "60s"},
)  # fmt: skip
DEAD = rule(
    "{proc.dead: {roles: [scheduler]}}", id="dead-rank", cause="dead_rank", confidence="0.9", immediate="true",
    message="'{ranks} died'", severity="critical",
)  # fmt: skip
JIT = rule("{proc.children: compiler}", id="jit-slow", cause="jit_compile_slow", state="progressing", confidence="0.6")
WEAK = rule("{log.matches: 'Init torch'}", id="weak", cause="multinode_rendezvous", confidence="0.3")
RULES = [NCCL, DEAD, JIT, WEAK]

LAUNCHER = ProcessRecord(1, None, "python -m sglang.launch_server", "launcher")
TP0 = ProcessRecord(10, 1, "sglang::scheduler_TP0", "scheduler", rank="TP0")
TP1 = ProcessRecord(11, 1, "sglang::scheduler_TP1", "scheduler", rank="TP1")
IN_DIST_INIT = Evidence(
    engine="sglang",
    log=logs("Init torch distributed begin.", rank="TP0"),
    phases=(event(Phase.DIST_INIT, "TP0", 1, text="Init torch distributed begin."),),
    procs=(LAUNCHER, TP0),
    stacks=(stack("TP0", frame("init_process_group")),),
)


def _with(evidence: Evidence, **changes: object) -> Evidence:
    return Evidence(**{**evidence.__dict__, **changes})


def test_pasted_bundle_is_held_and_stalled() -> None:
    verdict = classify(IN_DIST_INIT, RULES)
    assert (verdict.state, verdict.cause, verdict.rule, verdict.confidence) == (State.STALLED, "nccl_init", "nccl-init-hang", 0.7)
    assert verdict.message == "? stuck in dist_init after ?s"
    assert verdict.phase is Phase.DIST_INIT and verdict.phases == {"TP0": Phase.DIST_INIT}
    assert verdict.runners_up == (RunnerUp("multinode_rendezvous", "weak", 0.3),)
    assert verdict.evidence == (
        Fact("TP0 in dist_init: Init torch distributed begin.", Source("server.log", 1, "TP0")),
        Fact("Init torch distributed begin.", Source("server.log", 1, "TP0")),
    )
    assert verdict.since_s is None and verdict.engine == "sglang"


def test_hold_time_keeps_a_young_match_pending() -> None:
    verdict = classify(_with(IN_DIST_INIT, since_last_progress_s=20.0), [NCCL])
    assert (verdict.state, verdict.cause) == (State.STARTING, None)
    assert [r.rule for r in verdict.runners_up] == ["nccl-init-hang"]  # pending, not decided
    held = classify(_with(IN_DIST_INIT, since_last_progress_s=61.0), [NCCL])
    assert (held.state, held.cause, held.since_s) == (State.STALLED, "nccl_init", 61.0)
    assert held.message == "? stuck in dist_init after 61s"


def test_a_rule_without_hold_decides_as_soon_as_it_matches() -> None:
    verdict = classify(_with(IN_DIST_INIT, since_last_progress_s=20.0), RULES)
    assert (verdict.state, verdict.cause, verdict.rule) == (State.STALLED, "multinode_rendezvous", "weak")
    assert verdict.runners_up == (RunnerUp("nccl_init", "nccl-init-hang", 0.7),)


def test_immediate_rule_decides_at_once_and_names_culprits() -> None:
    dead = ProcessRecord(11, 1, "sglang::scheduler_TP1", "scheduler", rank="TP1", alive=False, exit_code=-9)
    verdict = classify(_with(IN_DIST_INIT, procs=(LAUNCHER, TP0, dead), since_last_progress_s=1.0), RULES)
    assert (verdict.state, verdict.cause, verdict.ranks, verdict.message) == (State.STALLED, "dead_rank", ("TP1",), "TP1 died")


def test_progressing_rule() -> None:
    ninja = ProcessRecord(12, 10, "ninja", "compiler")
    verdict = classify(_with(IN_DIST_INIT, procs=(LAUNCHER, TP0, ninja), since_last_progress_s=5.0), [JIT])
    assert (verdict.state, verdict.cause) == (State.PROGRESSING, "jit_compile_slow")


def test_ready_wins_over_matches() -> None:
    phases = (*IN_DIST_INIT.phases, event(Phase.READY, None, 9, end=True))
    verdict = classify(_with(IN_DIST_INIT, phases=phases), RULES)
    assert (verdict.state, verdict.cause, verdict.confidence) == (State.READY, None, 1.0)


def test_crashed_when_the_launcher_exited_even_after_ready() -> None:
    gone = ProcessRecord(1, None, "python -m sglang.launch_server", "launcher", alive=False, exit_code=1)
    phases = (*IN_DIST_INIT.phases, event(Phase.READY, None, 9, end=True))
    verdict = classify(_with(IN_DIST_INIT, phases=phases, procs=(gone, TP0)), [])
    assert (verdict.state, verdict.cause) == (State.CRASHED, None)
    assert verdict.evidence == (Fact("launcher (pid 1) exited, code 1", Source("procs.json")),)


def test_crashed_when_every_rank_is_gone_keeps_the_best_cause() -> None:
    dead = [ProcessRecord(p.pid, 1, p.cmdline, "scheduler", rank=p.rank, alive=False) for p in (TP0, TP1)]
    verdict = classify(_with(IN_DIST_INIT, procs=(LAUNCHER, *dead)), RULES)
    assert (verdict.state, verdict.cause, verdict.ranks) == (State.CRASHED, "dead_rank", ("TP0", "TP1"))


def test_no_match_and_unknown_quiet_is_an_unknown_stall() -> None:
    verdict = classify(IN_DIST_INIT, [])
    assert (verdict.state, verdict.cause, verdict.confidence) == (State.STALLED, "unknown", 0.2)
    assert verdict.evidence == (
        Fact("furthest behind: Init torch distributed begin.", Source("server.log", 1, "TP0")),
        Fact("last log line: Init torch distributed begin.", Source("server.log", 1, "TP0")),
    )


def test_budget_of_the_phase_furthest_behind() -> None:
    # dist_init's budget is 60 s
    assert classify(_with(IN_DIST_INIT, since_last_progress_s=61.0), []).cause == "unknown"
    assert classify(_with(IN_DIST_INIT, since_last_progress_s=59.0), []).state is State.STARTING
    longer = classify(_with(IN_DIST_INIT, since_last_progress_s=61.0), [], budgets={Phase.DIST_INIT: 600})
    assert longer.state is State.STARTING


def test_an_ended_phase_uses_the_next_budget() -> None:
    # weight_load ended, nothing began: the kv_cache budget (120 s) applies, not weight_load's
    phases = (event(Phase.WEIGHT_LOAD, "TP0", 1), event(Phase.WEIGHT_LOAD, "TP0", 2, end=True))
    evidence = Evidence(phases=phases, since_last_progress_s=100.0)
    assert classify(evidence, [], budgets={Phase.WEIGHT_LOAD: 10}).state is State.STARTING


def test_slow_but_moving_is_progressing() -> None:
    # GIVEN a log silent for 45 s while GPU memory moved 2 s ago
    evidence = _with(IN_DIST_INIT, since_last_progress_s=2.0, log_quiet_s=45.0, progress_signals=("gpu_memory",))
    verdict = classify(evidence, [])
    assert (verdict.state, verdict.cause, verdict.message) == (State.PROGRESSING, None, "Slow in dist_init, still moving: gpu_memory.")


def test_a_quiet_log_with_something_moving_recently_is_still_starting() -> None:
    evidence = _with(IN_DIST_INIT, since_last_progress_s=2.0, log_quiet_s=5.0, progress_signals=("gpu_memory",))
    assert classify(evidence, []).state is State.STARTING


def test_a_progressing_rule_is_refuted_once_nothing_moves() -> None:
    # GIVEN a slow-but-alive rule that matches
    slow = rule("{log.matches: 'Init torch'}", id="slow", state="progressing")
    moving = _with(IN_DIST_INIT, since_last_progress_s=3.0, log_quiet_s=40.0, progress_signals=("rss:TP0",))
    frozen = _with(IN_DIST_INIT, since_last_progress_s=40.0, log_quiet_s=40.0)
    # THEN it holds while something moves, and not once nothing has moved for a while
    assert classify(moving, [slow]).state is State.PROGRESSING
    assert match_rule(slow, Context(frozen)) is None
    # and a pasted bundle (nothing measured) trusts the rule
    assert classify(_with(IN_DIST_INIT, since_last_progress_s=None), [slow]).state is State.PROGRESSING


def test_engine_filter() -> None:
    vllm_only = rule("{log.matches: 'Init torch'}", id="v", engines="[vllm]")
    assert match_rule(vllm_only, Context(IN_DIST_INIT)) is None
    assert match_rule(vllm_only, Context(_with(IN_DIST_INIT, engine=None))) is not None


def test_rank_matches_orders_by_hold_confidence_specificity_severity() -> None:
    a = rule("{log.matches: x}", id="a", confidence="0.5")
    b = rule("{log.matches: x}", id="b", confidence="0.5", severity="critical")
    c = rule("{log.matches: x}", id="c", confidence="0.9")
    matches = [Match(a, specificity=3), Match(b, specificity=1), Match(b, specificity=3), Match(c, held=False)]
    ranked = rank_matches(matches)
    assert [(m.rule.id, m.specificity, m.held) for m in ranked] == [("b", 3, True), ("a", 3, True), ("b", 1, True), ("c", 0, False)]


def test_missing_lists_what_the_near_rules_wanted() -> None:
    gpu_rule = rule("{any: [{log.matches: 'Init torch'}, {gpu.util: {gte: 90}}]}", id="g")
    verdict = classify(Evidence(log=logs("Init torch distributed begin."), missing=(Missing("ports", "no ss"),)), [gpu_rule])
    assert verdict.missing == (Missing("ports", "no ss"), HOW_TO_COLLECT["gpus"])


def test_classify_is_pure_and_repeatable() -> None:
    assert classify(IN_DIST_INIT, RULES) == classify(IN_DIST_INIT, RULES)


def test_a_log_line_naming_the_dead_rank_narrows_the_culprits() -> None:
    # GIVEN the launcher took every rank down after TP1 died, and logged which one it was
    dead = (
        ProcessRecord(10, 1, "sglang::scheduler_TP0", "scheduler", "TP0", alive=False, exit_code=-9),
        ProcessRecord(11, 1, "sglang::scheduler_TP1", "scheduler", "TP1", alive=False, exit_code=-9),
    )
    by_proc = rule("{proc.dead: true}", id="by-proc", cause="dead_rank", confidence=0.9, immediate="true")
    by_log = rule("{log.matches: 'Rank (?P<tp>\\d+) scheduler died'}", id="by-log", cause="dead_rank", confidence=0.8)
    evidence = _with(IN_DIST_INIT, procs=dead, log=logs("Rank 1 scheduler died during initialization (exit code: -9)."))
    # WHEN classified
    verdict = classify(evidence, [by_proc, by_log])
    # THEN the winner is the process evidence, and the culprit is the rank the log names
    assert (verdict.rule, verdict.ranks) == ("by-proc", ("TP1",))
    assert any("Rank 1 scheduler died" in fact.text for fact in verdict.evidence)
