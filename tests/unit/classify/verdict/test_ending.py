"""How a start ended, from a bundle without a process view (the dev corpus index, ../shared/corpus/dev/INDEX.md, `state`): a log whose last
word is a fatal error is a crash; one rank's error followed by others' progress, a warning the
writer carried past, or a slow cause cut by a timeout is not."""

from __future__ import annotations

import json

from hangwatch.bundle import evidence_from_files
from hangwatch.classify import classify, load_rules
from hangwatch.classify.verdict.context import Context
from hangwatch.classify.verdict.ending import fatal_ending
from hangwatch.model import Evidence, ProcessRecord, State

META = json.dumps({"format": "hangwatch-bundle/1", "engine": "vllm"}).encode()
RULES = load_rules()

WORKER_ERROR = """\
(VllmWorker TP0 pid=4401) INFO 09-02 11:20:01 [gpu_model_runner.py:1953] Starting to load model m...
(VllmWorker TP1 pid=4405) ERROR 09-02 11:21:40 [multiproc_executor.py:596] Traceback (most recent call last):
(VllmWorker TP1 pid=4405) ERROR 09-02 11:21:40 [multiproc_executor.py:596]   File "/x/dist-packages/vllm/worker.py", line 4, in load
(VllmWorker TP1 pid=4405) ERROR 09-02 11:21:40 [multiproc_executor.py:596] OSError: No such device (os error 19)
"""
PEER_CARRIES_ON = "(VllmWorker TP0 pid=4401) INFO 09-02 11:21:52 [default_loader.py:262] Loading weights took 110.83 seconds\n"


def _evidence(log: str) -> Evidence:
    return evidence_from_files({"meta.json": META, "server.log": log.encode()})


def test_a_log_ending_in_a_fatal_error_ended_the_start() -> None:
    ended = fatal_ending(Context(_evidence(WORKER_ERROR)))
    assert ended is not None and ended.text == "OSError: No such device (os error 19)"
    assert classify(_evidence(WORKER_ERROR), RULES).state is State.CRASHED


def test_an_error_followed_by_other_ranks_progress_did_not_end_it() -> None:
    evidence = _evidence(WORKER_ERROR + PEER_CARRIES_ON)
    assert fatal_ending(Context(evidence)) is None
    assert classify(evidence, RULES).state is not State.CRASHED


def test_the_lines_that_unwind_a_failure_belong_to_it() -> None:
    log = ("node:1:2 [2] transport/nvls.cc:165 NCCL WARN Cuda failure 'invalid argument'\n"
           "node:1:2 [2] NCCL INFO init.cc:1598 -> 1\nnode:1:2 [2] NCCL INFO group.cc:75 -> 1 [Async thread]\n")
    assert fatal_ending(Context(_evidence(log))) is not None


def test_a_warning_the_writer_carried_past_is_no_ending() -> None:
    log = "node:1:2 [0] include/socket.h:344 WARN Socket creation failed : Address family not supported by protocol\n"
    assert fatal_ending(Context(_evidence(log))) is None
    assert classify(_evidence(log), RULES).state is not State.CRASHED


def test_with_processes_their_exits_decide_as_live() -> None:
    alive = ProcessRecord(pid=10, ppid=1, cmdline="vllm serve m", role="launcher", rank=None, state="S",
                          cpu_percent=0.0, rss_mib=100, alive=True, exit_code=None)
    evidence = Evidence(engine="vllm", log=_evidence(WORKER_ERROR).log, procs=(alive,))
    assert fatal_ending(Context(evidence)) is None
    assert classify(evidence, RULES).state is not State.CRASHED


def test_a_slow_cause_cut_by_a_timeout_stays_progressing() -> None:
    log = ("(EngineCore_DP0 pid=9) INFO 07-01 09:30:01 [weight_utils.py:1] Loading safetensors checkpoint shards:  "
           "40% Completed | 65/163 [05:10<07:45,  4.75s/it]\n"
           "(EngineCore_DP0 pid=9) INFO 07-01 09:36:00 [weight_utils.py:1] Loading safetensors checkpoint shards:  "
           "65% Completed | 106/163 [09:00<04:50,  5.10s/it]\n"
           "(APIServer pid=7) TimeoutError: Timed out waiting for engines to send initial message on input socket.\n")
    verdict = classify(_evidence(log), RULES)
    assert fatal_ending(Context(_evidence(log))) is not None
    assert verdict.state is State.PROGRESSING, (verdict.cause, verdict.rule)


UCX_SIGBUS = b"""[host:1 :0:381] Caught signal 7 (Bus error: nonexistent physical address)
==== backtrace (tid:    381) ====
 0 0x00000000000143c0 __funlockfile()  ???:0
 1 0x0000000000068d6c ncclGroupEnd()  ???:0
 2 0x0000000000008609 start_thread()  ???:0
=================================
"""


def test_a_crash_handlers_fatal_signal_in_a_stack_file_ended_the_start() -> None:
    from hangwatch.classify.verdict.ending import fatal_signal

    evidence = evidence_from_files({"meta.json": META, "stacks/reported.txt": UCX_SIGBUS})
    signal = fatal_signal(Context(evidence))
    assert signal is not None and "SIGBUS" in signal.text and signal.source.file == "stacks/reported.txt"
    verdict = classify(evidence, RULES)
    assert (verdict.state, verdict.cause) == (State.CRASHED, "shm_too_small")
    assert "SIGBUS caught" in verdict.evidence[0].text


def test_sigbus_outside_nccl_is_a_crash_but_not_shm() -> None:
    other = UCX_SIGBUS.replace(b"ncclGroupEnd", b"memcpy_avx_unaligned")
    verdict = classify(evidence_from_files({"meta.json": META, "stacks/reported.txt": other}), RULES)
    assert verdict.state is State.CRASHED and verdict.cause != "shm_too_small"
