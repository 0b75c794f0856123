"""The classifier: evidence + rules → verdict. Pure: no I/O and no clock.

`classify` builds one `Context`, calls `match_rule` per rule in a plain loop, orders the matches
with `rank_matches`, then decides the state (docs/rules.md, "How a verdict is chosen").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hangwatch.classify.language.atoms import evidence_of
from hangwatch.classify.language.atoms.error import failure_fact
from hangwatch.classify.language.rule import Rule
from hangwatch.classify.language.template import render
from hangwatch.classify.verdict.ceilings import default_ceilings
from hangwatch.classify.verdict.context import Context, Position, label_order
from hangwatch.classify.verdict.differential import (
    candidates_for,
    cites,
    consequence_only,
    failure_tier,
    quotes_fault,
    with_priors,
)
from hangwatch.classify.verdict.ending import fatal_ending, fatal_signal
from hangwatch.classify.verdict.memo import ScanMemo
from hangwatch.classify.verdict.pasted import with_pasted
from hangwatch.classify.verdict.raise_sites import site_rules, with_site
from hangwatch.classify.verdict.stopping import crash_facts, stop_facts
from hangwatch.engines import MAIN, env_prefixes, rank_roles, ready_seen
from hangwatch.model import (
    Evidence,
    Fact,
    Missing,
    Phase,
    ProcessRecord,
    RunnerUp,
    Source,
    State,
    Verdict,
)

# Without history, how long a phase may go with nothing moving (data/ceilings.yaml, docs/live.md)
DEFAULT_BUDGETS: Mapping[Phase, float] = default_ceilings()
SLOW_AFTER_S = 30.0  # the log silent longer than this while something moves: "progressing", not "starting"
# A `state: progressing` rule says "slow but alive". Live, where the quiet time is known, that is
# refuted once nothing at all has moved for this long (a FIFO open looks like a slow read).
PROGRESSING_MAX_QUIET_S = 15.0
UNKNOWN_CONFIDENCE = 0.2
MAX_FACTS = 12
MAX_RUNNERS_UP = 5

# How to collect each kind of evidence when a rule wanted it and the bundle lacks it.
HOW_TO_COLLECT: dict[str, Missing] = {
    "log": Missing("log", "no server log", "save the server's stdout/stderr as server.log, or `hangwatch collect PID`"),
    "stacks": Missing(
        "stacks", "no stack dumps", "run `py-spy dump --pid PID --json` for each scheduler rank, or `hangwatch collect PID`"
    ),
    "gpus": Missing(
        "gpus", "no GPU samples",
        "`nvidia-smi --query-gpu=index,name,compute_cap,memory.used,utilization.gpu --format=csv` a few times, "
        "or `hangwatch collect PID`",
    ),
    "procs": Missing("procs", "no process table", "`ps -eLf` of the server's process tree, or `hangwatch collect PID`"),
    "cmdline": Missing("cmdline", "no launch command line", "put the launch command in cmdline.txt"),
    "env": Missing("env", "no environment", f"`env | grep -E '^(NCCL|CUDA|TORCH|{'|'.join(p.rstrip('_') for p in env_prefixes())}|FLASHINFER)_' > env.txt`"),
    "ports": Missing("ports", "no listening sockets", "`ss -tlnp > ports.txt`"),
    "dmesg": Missing("dmesg", "no kernel messages", "`dmesg -T > dmesg.txt` (Xid and OOM-killer lines)"),
}  # fmt: skip


@dataclass(frozen=True)
class Match:
    """A rule whose condition held, with what it found. `held`: its hold time has passed."""

    rule: Rule
    facts: tuple[Fact, ...] = ()
    culprits: tuple[str, ...] = ()
    values: Mapping[str, Any] = field(default_factory=dict)
    specificity: int = 0  # atoms that held
    held: bool = True
    tier: int = 1  # first failure wins: 0 quotes it, 1 quotes no failure, 2 quotes only what followed


def hold_passed(rule: Rule, quiet_s: float | None) -> bool:
    """Unknown quiet time counts as held: a pasted bundle is a report of a hang."""
    return rule.immediate or quiet_s is None or quiet_s >= rule.hold_s


def still_moving(rule: Rule, ctx: Context) -> bool:
    """A `progressing` rule (slow but alive) holds only while something moves, and once the log
    has been silent for its hold; a pasted bundle, where nobody measured either, is trusted."""
    if rule.state is not State.PROGRESSING or ctx.quiet_s is None:
        return True
    slow = ctx.log_quiet_s is None or ctx.log_quiet_s >= rule.hold_s
    return ctx.quiet_s < PROGRESSING_MAX_QUIET_S and slow


def match_rule(rule: Rule, ctx: Context) -> Match | None:
    if not rule.fits_engine(ctx.engine):
        return None
    if not still_moving(rule, ctx):
        return None
    outcome = rule.when.evaluate(ctx)
    if not outcome.held:
        return None
    # a progressing rule's hold is on the log's silence (still_moving), not on the quiet time
    held = rule.state is State.PROGRESSING or hold_passed(rule, ctx.quiet_s)
    facts = tuple(_with_role(fact, ctx) for fact in outcome.facts)
    tier = failure_tier(facts)
    root = ctx.root_failure
    if tier == 0 and root is not None:
        if root.consequence:
            tier = 1  # the first failure only reports a death: quoting it decides nothing more
        elif not any(f.role == "root" and f.source.file == "server.log" for f in facts):
            tier = 1  # a process exit follows the error the log reports; the error is the root
    if tier != 0 and quotes_fault(facts):
        tier = 0  # a hardware/driver fault comes before what follows from it, whatever the log says
    return Match(rule, facts, outcome.culprits, outcome.values, outcome.atoms, held, tier)


def _with_role(fact: Fact, ctx: Context) -> Fact:
    """A log fact on a failure's lines says whether that failure started it or followed."""
    if fact.role is not None or fact.source.file != "server.log" or fact.source.line is None:
        return fact
    role = ctx.failure_roles.get(fact.source.line)
    return replace(fact, role=role) if role else fact


def rank_matches(matches: Iterable[Match]) -> list[Match]:
    """Held before pending; then first failure wins: a match that quotes the failure that started
    it all, then one that quotes no failure, then one that quotes only what followed the first
    failure; then confidence, specificity, severity; the rule id breaks ties."""
    return sorted(
        matches,
        key=lambda m: (
            not m.held, m.tier, -m.rule.confidence, -m.specificity, -m.rule.severity_rank, m.rule.id
        ),
    )


# ---------------------------------------------------------------- state


def is_crashed(ctx: Context) -> bool:
    """The launcher exited, or every rank process of the watched tree is gone (another node's
    rank that died, seen as a peer on this host, leaves this node waiting: a stall)."""
    procs = ctx.evidence.procs
    if any(p.role == "launcher" and not p.alive for p in procs):
        return True
    ranks = [p for p in procs if p.role in rank_roles() and not p.peer]
    return bool(ranks) and all(p.exited for p in ranks)


def budget_phase(ctx: Context) -> Phase:
    """The phase whose budget applies: the one the furthest-behind rank is in or about to begin."""
    return Phase.LAUNCH if ctx.behind is None else now_in(ctx.behind[1])


def now_in(position: Position) -> Phase:
    """The phase a rank is in: one that logged a phase's end (`Load weight end.`) is in the next one,
    so every surface names the phase the log proves, never one the rank has finished."""
    phase, ended = position
    phases = list(Phase)
    return phases[min(phase.order + 1, len(phases) - 1)] if ended else phase


def _phases(ctx: Context) -> dict[str, Phase]:
    return {rank: now_in(ctx.positions[rank]) for rank in sorted(ctx.positions, key=label_order)}


def _common(ctx: Context) -> dict[str, Any]:
    return {
        "phase": now_in(ctx.behind[1]) if ctx.behind else None,
        "phases": _phases(ctx),
        "since_s": ctx.quiet_s,
        "engine": ctx.engine,
    }


def _runners_up(ranked: Sequence[Match], winner: Match | None) -> tuple[RunnerUp, ...]:
    others = [m for m in ranked if m is not winner][:MAX_RUNNERS_UP]
    return tuple(RunnerUp(m.rule.cause, m.rule.id, m.rule.confidence) for m in others)


def _present(ctx: Context) -> dict[str, bool]:
    ev = ctx.evidence
    return {
        "log": bool(ev.log), "stacks": bool(ev.stacks), "gpus": bool(ev.gpus), "procs": bool(ev.procs),
        "cmdline": ctx.cmdline_known, "env": bool(ev.env), "ports": ctx.ports_known, "dmesg": bool(ev.dmesg),
    }  # fmt: skip


def missing_for(ctx: Context, rules: Iterable[Rule]) -> tuple[Missing, ...]:
    """The evidence's own gaps plus each kind these rules read that the evidence lacks."""
    wanted = {evidence_of(atom) for rule in rules for atom in rule.atoms}
    known = {m.source for m in ctx.evidence.missing}
    present = _present(ctx)
    extra = [how for kind, how in HOW_TO_COLLECT.items() if kind in wanted and not present[kind] and kind not in known]
    return (*ctx.evidence.missing, *extra)


# ---------------------------------------------------------------- verdicts


def culprits_for(winner: Match, ranked: Sequence[Match]) -> tuple[str, ...]:
    """The winner's culprits, narrowed by another match of the same cause that names fewer of
    them: when the launcher takes every rank down, `Rank 1 scheduler died` says which went first."""
    best = winner.culprits
    for match in ranked:
        narrower = match.culprits and set(match.culprits) < set(best)
        if match.rule.cause == winner.rule.cause and narrower:
            best = match.culprits
    return best


def _from_match(state: State, winner: Match, ranked: Sequence[Match], ctx: Context) -> Verdict:
    rule = winner.rule
    near = [m.rule for m in ranked]
    culprits = culprits_for(winner, ranked)
    facts = winner.facts + tuple(f for m in ranked if m is not winner and m.culprits == culprits != winner.culprits for f in m.facts)
    facts = with_site(_root_first(facts, ctx), ctx)
    candidates = candidates_for(ranked, ctx)
    if consequence_only(winner.facts):
        candidates = with_priors(candidates, ctx, "crashed" if state is State.CRASHED else "stalled")
    confidence = candidates[0].confidence if candidates and candidates[0].rule == rule.id else rule.confidence
    return Verdict(
        state=state, cause=rule.cause, confidence=confidence, rule=rule.id, title=rule.title,
        message=render(rule.message, winner.values, ctx, culprits) if rule.message else None,
        evidence=facts[:MAX_FACTS], remedy=rule.remedy, ranks=culprits,
        runners_up=_runners_up(ranked, winner), missing=missing_for(ctx, near),
        references=rule.references, candidates=candidates, **_common(ctx),
    )  # fmt: skip


def _root_first(facts: tuple[Fact, ...], ctx: Context) -> tuple[Fact, ...]:
    """The failure that started it leads the evidence, whichever atom quoted it; a root failure
    no atom quoted is added, so the verdict always shows where it began."""
    root = ctx.root_failure
    if root is None or not facts:
        return facts
    if not cites(facts, "root"):
        facts = (failure_fact(root), *facts)
    return tuple(sorted(facts, key=lambda f: 0 if f.role == "root" else 1))


def _where_it_stands(ctx: Context) -> tuple[Fact, ...]:
    """For a verdict no rule explains: the furthest-behind rank's last phase line and the last log line."""
    facts = []
    if ctx.behind:
        rank, position = ctx.behind
        event = ctx.event_for(rank, position)
        if event is not None:
            detail = None if rank == MAIN else rank
            facts.append(Fact(f"furthest behind: {event.text}", Source("server.log", event.lineno, detail)))
    if ctx.evidence.log:
        last = ctx.evidence.log[-1]
        facts.append(Fact(f"last log line: {last.text}", Source("server.log", last.lineno, last.rank)))
    return tuple(facts)


def _unknown_stall(ctx: Context, ranked: Sequence[Match], rules: Sequence[Rule], message: str) -> Verdict:
    return Verdict(
        state=State.STALLED, cause="unknown", confidence=UNKNOWN_CONFIDENCE,
        title="Stalled, and no rule explains it", message=message, evidence=_where_it_stands(ctx),
        remedy="Read the evidence and the missing evidence listed with this verdict, collect what is missing, and report the bundle.",
        runners_up=_runners_up(ranked, None), missing=missing_for(ctx, rules),
        candidates=with_priors(candidates_for(ranked, ctx), ctx, "stalled"), **_common(ctx),
    )  # fmt: skip


def observed_anything(evidence: Evidence) -> bool:
    """Whether a bundle holds any observation beyond its meta.json (a log, a stack, a process, a GPU, ...)."""
    return any((evidence.log, evidence.phases, evidence.cmdline, evidence.env, evidence.procs, evidence.ports,
                evidence.ports_text, evidence.gpus, evidence.stacks, evidence.dmesg, evidence.host, evidence.preflight,
                evidence.endpoint))  # fmt: skip


def _not_enough_evidence(ctx: Context, rules: Sequence[Rule]) -> Verdict:
    """Nothing was observed and no rule matched: saying `stalled` would claim what nothing shows."""
    return Verdict(
        state=State.UNKNOWN, cause="unknown", confidence=UNKNOWN_CONFIDENCE, title="Not enough evidence to say",
        message="The bundle holds no log, stacks, processes or GPU samples: nothing shows whether the start hung.",
        remedy="Add what is listed under Missing evidence (or run `hangwatch collect PID`), then diagnose again.",
        # what such starts most often were, from the little the bundle says (engine, GPUs, nodes): a
        # guess to check, at the priors' low confidence, never a verdict
        candidates=with_priors((), ctx, "stalled"), missing=missing_for(ctx, rules), **_common(ctx),
    )  # fmt: skip


def _unknown_failure(ctx: Context, ranked: Sequence[Match], rules: Sequence[Rule]) -> Verdict:
    """The log ends in a fatal error and no rule names its cause: crashed, cause unknown."""
    root, signal = fatal_ending(ctx), fatal_signal(ctx)
    facts = ((failure_fact(root),) if root is not None else ()) + ((signal,) if signal is not None else ())
    return Verdict(
        state=State.CRASHED, cause="unknown", confidence=UNKNOWN_CONFIDENCE,
        title="The start failed with an error, and no rule explains it",
        message="The start ended in the error below; nothing moved after it.", evidence=with_site(facts, ctx) + _where_it_stands(ctx),
        remedy="Read the error below and the lines before it, collect what is missing, and report the bundle.",
        runners_up=_runners_up(ranked, None), missing=missing_for(ctx, rules),
        candidates=with_priors(candidates_for(ranked, ctx), ctx, "crashed"), **_common(ctx),
    )  # fmt: skip


def _healthy(state: State, ctx: Context, ranked: Sequence[Match], message: str | None) -> Verdict:
    return Verdict(
        state=state, cause=None, confidence=1.0 if state is State.READY else 0.5, message=message,
        evidence=_endpoint_facts(ctx) if state is State.READY else (),
        runners_up=_runners_up(ranked, None), missing=ctx.evidence.missing, **_common(ctx),
    )  # fmt: skip


def _endpoint_facts(ctx: Context) -> tuple[Fact, ...]:
    """Ready without a ready line: the engine's own endpoint said so; name it."""
    answer = ctx.evidence.endpoint
    if answer is None or not answer.ready or ready_seen(ctx.evidence.phases):
        return ()
    return (Fact(f"GET {answer.url} answered {answer.detail}", Source("endpoint", detail="no log readable")),)


def _who(proc: ProcessRecord) -> str:
    return f"{proc.role} {proc.rank} (pid {proc.pid})" if proc.rank else f"{proc.role} (pid {proc.pid})"


def _crashed(ctx: Context, ranked: Sequence[Match]) -> Verdict:
    if ranked:
        return _from_match(State.CRASHED, ranked[0], ranked, ctx)
    dead = [p for p in ctx.evidence.procs if not p.alive and p.role in (*rank_roles(), "launcher")]
    facts = with_site(tuple(Fact(f"{_who(p)} exited, code {p.exit_code}", Source("procs.json")) for p in dead), ctx)
    return Verdict(
        state=State.CRASHED, cause=None, confidence=1.0, title="The server exited", evidence=facts[:MAX_FACTS],
        remedy="Read the end of the server log and `dmesg -T` for why it exited.",
        missing=missing_for(ctx, []), candidates=with_priors((), ctx, "crashed"), **_common(ctx),
    )  # fmt: skip


def _stopped(ctx: Context, facts: Sequence[Fact]) -> Verdict:
    return Verdict(
        state=State.STOPPED, cause=None, confidence=1.0, title="The server was stopped",
        message="A stop was asked for and the server exited; nothing crashed.", evidence=tuple(facts)[:MAX_FACTS],
        **_common(ctx),
    )  # fmt: skip


def _without_match(
    ctx: Context, ranked: Sequence[Match], rules: Sequence[Rule], budgets: Mapping[Phase, float]
) -> Verdict:
    quiet = ctx.quiet_s
    if quiet is None and not observed_anything(ctx.evidence):
        return _not_enough_evidence(ctx, rules)
    if quiet is None:
        return _unknown_stall(ctx, ranked, rules, "The bundle reports a hang, and no rule matched its evidence.")
    phase = budget_phase(ctx)
    budget = budgets.get(phase, DEFAULT_BUDGETS.get(phase, 120.0))
    if quiet > budget:
        text = f"Nothing has moved for {quiet:.0f}s in {phase.value} (budget {budget:.0f}s), and no rule explains it."
        return _unknown_stall(ctx, ranked, rules, text)
    signals = ctx.evidence.progress_signals
    # slow: the log has been silent a while; alive: something else still moves
    log_quiet = ctx.log_quiet_s if ctx.log_quiet_s is not None else quiet
    if log_quiet > SLOW_AFTER_S and quiet < PROGRESSING_MAX_QUIET_S and signals:
        text = f"Slow in {phase.value}, still moving: {', '.join(signals)}."
        return _healthy(State.PROGRESSING, ctx, ranked, text)
    return _healthy(State.STARTING, ctx, ranked, None)


def classify(
    evidence: Evidence,
    rules: Sequence[Rule],
    now: float | None = None,
    budgets: Mapping[Phase, float] | None = None,
    memo: ScanMemo | None = None,
) -> Verdict:
    """Decide the verdict for `evidence`. `now` is accepted for callers that replay a history;
    evidence already carries its times relative to the observation (`since_last_progress_s`).
    `memo` is the caller's cache for classifying one growing log tick after tick (the watcher
    keeps one per server): it saves work, never changes the verdict; None keeps nothing."""
    ctx = Context(with_pasted(evidence), memo)
    # the engine's own raise site of the first failure, where the table maps it to a cause, is one more rule
    ranked = rank_matches(m for rule in (*rules, *site_rules(ctx)) if (m := match_rule(rule, ctx)) is not None)
    if is_crashed(ctx):
        stop = stop_facts(ctx)
        if stop and not crash_facts(ctx):
            return _stopped(ctx, stop)
        return _crashed(ctx, ranked)
    if ctx.ready:
        return _healthy(State.READY, ctx, ranked, None)
    winner = ranked[0] if ranked and ranked[0].held else None
    ended = fatal_ending(ctx) is not None or fatal_signal(ctx) is not None
    if winner is not None:
        # a slow cause stays `progressing` even when a timeout cut the start short: it was moving
        if winner.rule.state is State.PROGRESSING:
            return _from_match(State.PROGRESSING, winner, ranked, ctx)
        return _from_match(State.CRASHED if ended else State.STALLED, winner, ranked, ctx)
    if ended:
        return _unknown_failure(ctx, ranked, rules)
    return _without_match(ctx, ranked, rules, {**DEFAULT_BUDGETS, **(budgets or {})})
