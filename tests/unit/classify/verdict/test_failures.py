"""First failure wins: error atoms, roles on evidence, ranking, the differential and its calibration."""

from __future__ import annotations

import pytest

from hangwatch.classify import classify
from hangwatch.errors import RuleError
from hangwatch.model import Evidence
from hangwatch.parse.logs import read_log_lines
from helpers.classify_builders import check, rule


def log_of(text: str) -> Evidence:
    return Evidence(log=read_log_lines(text.encode()))


CRASH = (
    "[2026-01-01 10:00:01 TP0] Init torch distributed begin.\n"
    "[2026-01-01 10:00:02 TP0] Failed: Cuda error custom_all_reduce.cuh:455 'invalid argument'\n"
    "[2026-01-01 10:00:03] Received sigquit from a child process. It usually means the child failed.\n"
    "[2026-01-01 10:00:03] RuntimeError: Rank 1 scheduler died during initialization (exit code: -9).\n"
)


def test_error_root_reads_the_first_failure_by_location_and_cuda_error() -> None:
    ev = log_of(CRASH)
    held = check("error.root: {where: 'custom_all_reduce', cuda: 'invalid argument'}", ev)
    assert held.held and held.facts[0].role == "root" and held.facts[0].source.line == 2
    assert not check("error.root: 'scheduler died'", ev).held  # a consequence, not the root
    assert check("error.any: 'scheduler died'", ev).held


def test_error_atoms_refuse_unknown_keys_and_kinds() -> None:
    with pytest.raises(RuleError, match="unknown key"):
        check("error.root: {nope: x}", Evidence())
    with pytest.raises(RuleError, match="unknown 'weird'"):
        check("error.root: {kind: weird}", Evidence())


def test_error_root_is_case_insensitive_and_reads_errno_families() -> None:
    ev = log_of("zmq.error.ZMQError: ADDRESS ALREADY IN USE (addr='tcp://127.0.0.1:5557')\n")
    assert check("error.root: {errno: EADDRINUSE, type: zmqerror}", ev).held


def test_a_rule_quoting_only_consequences_ranks_below_one_quoting_the_root() -> None:
    dead = rule("log.matches: 'scheduler died'", id="dead", cause="dead_rank", confidence=0.9)
    root = rule("log.matches: 'custom_all_reduce'", id="car", cause="custom_allreduce", confidence=0.7)
    verdict = classify(log_of(CRASH), [dead, root])
    assert verdict.cause == "custom_allreduce"
    assert verdict.evidence[0].role == "root"
    # the two matched causes, then the cause the same evidence also fits (P2P between the GPUs)
    assert [c.cause for c in verdict.candidates] == ["custom_allreduce", "dead_rank", "nccl_p2p_topology"]
    neighbour = verdict.candidates[2]
    assert neighbour.rule is None and neighbour.confidence <= 0.25 and "NCCL_P2P_DISABLE" in neighbour.check
    # the consequence-only candidate is discounted and says what it does not explain
    dead_c = verdict.candidates[1]
    assert dead_c.confidence < 0.9 and any("first failure" in a for a in dead_c.evidence_against)
    assert verdict.candidates[0].check and "--disable-custom-all-reduce" in verdict.candidates[0].check


def test_the_verdict_shows_the_root_even_when_no_atom_quoted_it() -> None:
    dead = rule("log.matches: 'scheduler died'", id="dead", cause="dead_rank", confidence=0.9)
    verdict = classify(log_of(CRASH), [dead])
    assert verdict.evidence[0].role == "root" and "custom_all_reduce" in verdict.evidence[0].text
    assert verdict.confidence < 0.6  # explains only what followed


def test_candidates_are_one_per_cause_at_most_three_and_a_rule_check_overrides() -> None:
    causes = [("nccl_init", 0.7), ("nccl_init", 0.6), ("shm_too_small", 0.5), ("port_in_use", 0.4), ("dead_rank", 0.3)]
    rules = [
        rule("log.matches: 'x'", id=f"r{i}", cause=cause, confidence=conf, **({"check": "'try this'"} if i == 0 else {}))
        for i, (cause, conf) in enumerate(causes)
    ]
    verdict = classify(log_of("x\n"), rules)
    assert [c.cause for c in verdict.candidates] == ["nccl_init", "shm_too_small", "port_in_use"]
    assert verdict.candidates[0].check == "try this"
    assert verdict.to_dict()["candidates"][0].keys() == {
        "cause", "confidence", "rule", "evidence_for", "evidence_against", "check"
    }


def test_no_match_keeps_pending_priors_as_candidates_and_says_unknown() -> None:
    prior = rule("flag.tp: {gt: 1}", id="p", cause="nccl_p2p_topology", confidence=0.3, **{"for": "120s"})
    ev = Evidence(flags={"--tp": "2"}, since_last_progress_s=200.0, log=read_log_lines(b"hello\n"))
    verdict = classify(ev, [prior])
    assert verdict.cause == "nccl_p2p_topology" or verdict.candidates[0].cause == "nccl_p2p_topology"


def test_user_code_only_where_the_waiting_thread_is_in_it() -> None:
    from hangwatch.model import Origin
    from helpers.classify_builders import check as check_stacks
    from helpers.classify_builders import frame, stack

    when = "stack.origin: {in: [user], ranks: any, innermost: true}"
    # an embedding script at the bottom, the rank waiting in a rendezvous inside torch and the engine
    waits = stack("TP0", frame("TCPStore.wait", "torch/distributed/store.py", Origin.TORCH),
                  frame("init_distributed_environment", "sglang/srt/distributed/parallel_state.py"),
                  frame("<module>", "/home/me/serve.py", Origin.USER))  # fmt: skip
    assert not check_stacks(when, Evidence(stacks=(waits,))).held
    # a user hook between the engine and the wait is where it waits
    hooked = stack("TP0", frame("save", "torch/serialization.py", Origin.TORCH),
                   frame("dump_hidden", "/home/me/hooks.py", Origin.USER),
                   frame("Qwen3ForCausalLM.forward", "sglang/srt/models/qwen3.py"))  # fmt: skip
    assert check_stacks(when, Evidence(stacks=(hooked,))).held


def _torn_down(with_times: bool) -> tuple:
    from hangwatch.model import ProcessRecord

    t = (lambda x: x) if with_times else (lambda x: None)
    return (
        ProcessRecord(100, 1, "python -m sglang.launch_server", "launcher", alive=False, exit_code=1, exit_time=t(12.0)),
        ProcessRecord(101, 100, "sglang::scheduler", "scheduler", "TP0", alive=False, exit_code=1, exit_time=t(10.0)),
        ProcessRecord(102, 100, "sglang::detokenizer", "detokenizer", alive=False, exit_code=-9, exit_time=t(11.0)),
    )


@pytest.mark.parametrize("with_times", [True, False])
def test_the_process_that_exited_first_is_blamed_not_the_one_the_launcher_killed(with_times: bool) -> None:
    from hangwatch.classify import load_rules

    verdict = classify(Evidence(procs=_torn_down(with_times)), load_rules())
    assert verdict.state.value == "crashed"
    assert verdict.cause == "dead_rank" and verdict.ranks == ("TP0",)
    detok = [c for c in verdict.candidates if c.cause == "tokenizer_or_detokenizer"]
    assert not detok or detok[0].confidence < verdict.confidence


def test_a_taken_dist_init_port_in_the_drained_log_outranks_every_exit() -> None:
    from hangwatch.classify import load_rules

    log = read_log_lines(
        b"[2026-01-01 10:00:01 TP0] Init torch distributed begin.\n"
        b"[E101 10:00:02.1 socket.cpp:957] [c10d] The server socket has failed to listen on any local network "
        b"address. port: 29500, code: -98, name: EADDRINUSE, message: address already in use\n"
        b"[2026-01-01 10:00:03] Received sigquit from a child process. It usually means the child failed.\n"
    )
    verdict = classify(Evidence(log=log, procs=_torn_down(True)), load_rules())
    assert verdict.cause == "port_in_use" and verdict.evidence[0].role == "root"


def test_glog_error_level_is_an_error_and_ends_a_warning_run() -> None:
    """c10d logs through glog: `[W ...]` carried on, `[E ...]` (or `E1201 ...`) is the error level."""
    from hangwatch.parse.failures import read_failures

    for error in ("[E socket.cpp:472] [c10d] The server socket has failed to listen on any local network address.",
                  "E1201 10:00:00.123456  4411 socket.cpp:472] The server socket has failed to listen on any address."):
        log = ("[W socket.cpp:436] [c10d] The server socket has failed to bind to 0.0.0.0:29400 "
               f"(errno: 98 - Address already in use).\n{error}\n")
        found = read_failures(read_log_lines(log.encode()))
        assert [f.warning for f in found] == [True, False], found


def test_a_death_logged_at_error_level_is_a_consequence_failure() -> None:
    """`Worker proc X died unexpectedly` carries no failure word; its ERROR level says it is one."""
    from hangwatch.parse.failures import read_failures

    log = b"(EngineCore_0 pid=2012) ERROR 10-11 03:11:47 [multiproc_executor.py:149] Worker proc VllmWorker-1 died unexpectedly, shutting down executor.\n"
    (found,) = read_failures(read_log_lines(log))
    assert found.consequence and found.kind == "consequence"
    info = log.replace(b" ERROR ", b" INFO ")
    assert read_failures(read_log_lines(info)) == ()
