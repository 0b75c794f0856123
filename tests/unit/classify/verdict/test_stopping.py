"""Stops are stops: a stop someone asked for ends as `stopped`; what it unwinds is no crash
evidence; a crash during a stop is still a crash (classify.stopping through classify())."""

from __future__ import annotations

from hangwatch.classify import classify, load_rules
from hangwatch.model import Evidence, ProcessRecord, State, Verdict
from helpers.classify_builders import logs

RULES = load_rules()
INTERRUPTED = [
    "[2026-12-01 10:00:00] Init torch distributed begin.",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.11/site-packages/sglang/launch_server.py", line 12, in <module>',
    "    launch_server(server_args)",
    "KeyboardInterrupt",
]


def _procs(launcher_code: int | None, rank_code: int | None = -9) -> tuple[ProcessRecord, ...]:
    return (
        ProcessRecord(10, 1, "python -m sglang.launch_server --port 30001", "launcher", alive=False, exit_code=launcher_code),
        ProcessRecord(11, 10, "sglang::scheduler_TP0", "scheduler", "TP0", alive=False, exit_code=rank_code),
    )


def _verdict(log: list[str], procs: tuple[ProcessRecord, ...], stop: str | None = None) -> Verdict:
    ev = Evidence(engine="sglang", log=logs(*log), procs=procs, flags={"port": "30001"}, stop=stop,
                  since_last_progress_s=5.0, observed_for_s=20.0)
    return classify(ev, RULES)


def test_ctrl_c_forwarded_by_run_is_stopped_with_its_interrupt_no_evidence() -> None:
    verdict = _verdict(INTERRUPTED, _procs(-2), stop="hangwatch run got SIGINT and passed it to the server")
    assert (verdict.state, verdict.cause) == (State.STOPPED, None)
    texts = [f.text for f in verdict.evidence]
    assert texts[0] == "hangwatch run got SIGINT and passed it to the server"
    assert "launcher (pid 10) exited on SIGINT (status -2)" in texts


def test_sigterm_from_elsewhere_is_read_from_the_launchers_status() -> None:
    verdict = _verdict(INTERRUPTED[:1], _procs(-15))
    assert verdict.state is State.STOPPED
    assert [f.text for f in verdict.evidence] == ["launcher (pid 10) exited on SIGTERM (status -15)"]


def test_a_keyboard_interrupt_at_the_end_of_the_log_is_a_stop() -> None:
    # attached: the status of a launcher that is not hangwatch's child is unknown
    verdict = _verdict(INTERRUPTED, _procs(None))
    assert verdict.state is State.STOPPED


def test_a_silent_exit_of_unknown_status_is_no_stop_seen() -> None:
    assert _verdict(INTERRUPTED[:1], _procs(None)).state is State.CRASHED


def test_a_crash_during_a_stop_is_a_crash() -> None:
    stop = "hangwatch run got SIGTERM and passed it to the server"
    assert _verdict(INTERRUPTED[:1], _procs(-6), stop=stop).state is State.CRASHED  # SIGABRT
    assert _verdict(INTERRUPTED[:1], _procs(-15, rank_code=-11), stop=stop).state is State.CRASHED  # a rank's SIGSEGV
    failed = [*INTERRUPTED[:1], "Traceback (most recent call last):", '  File "x.py", line 1, in f',
              "RuntimeError: CUDA error: an illegal memory access was encountered"]
    assert _verdict(failed, _procs(-15), stop=stop).state is State.CRASHED
    assert _verdict(INTERRUPTED[:1], _procs(1), stop=stop).state is State.CRASHED  # it gave up on an error


def test_a_crash_without_a_stop_stays_a_crash() -> None:
    assert _verdict(INTERRUPTED[:1], _procs(1)).state is State.CRASHED


def test_a_rank_that_the_interrupt_ends_with_status_1_is_stopped() -> None:
    # Ctrl-C reaching a multiprocessing rank in Python code: its KeyboardInterrupt ends it with status 1
    stop = "hangwatch run got SIGINT and passed it to the server"
    rank_traceback = ["Process SpawnProcess-1:", "Traceback (most recent call last):",
                      '  File "/usr/lib/python3.11/multiprocessing/process.py", line 314, in _bootstrap',
                      "    self.run()", "KeyboardInterrupt"]
    verdict = _verdict([*INTERRUPTED, *rank_traceback], _procs(-2, rank_code=1), stop=stop)
    assert (verdict.state, verdict.cause) == (State.STOPPED, None), verdict.evidence
    # the same status without the interrupt in the log is an error it gave up on
    assert _verdict(INTERRUPTED[:1], _procs(-2, rank_code=1), stop=stop).state is State.CRASHED


def test_interrupted_tracebacks_that_interleave_in_one_log_are_stopped() -> None:
    # the launcher and a rank print their KeyboardInterrupt at once into one log (recorded from the
    # test server, tests/integration/programs): line by line, each loses its exception line
    interleaved = [
        "[2026-12-02 08:11:53 TP0] Init torch distributed begin.",
        "Traceback (most recent call last):",
        "Traceback (most recent call last):",
        '  File "/srv/programs/sglang/launch_server.py", line 91, in <module>',
        '  File "/srv/programs/rank.py", line 127, in <module>',
        "    main()",
        "    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])",
        '  File "/srv/programs/sglang/launch_server.py", line 86, in main',
        '  File "/srv/programs/rank.py", line 52, in main',
        "    channel.recv(1)  # blocks until that rank is ready (or forever)",
        "    keep = meet_peers(rank, store_port, TP)",
        "    ^^^^ ^ ^ ^ ^ ^ ^ ^ ^ ^ ^ ^^",
        "^^^^^^KeyboardInterrupt^^",
        "^^^^^^^^^^^^^^^^^^^^^^^",
        '  File "/srv/programs/rank.py", line 22, in meet_peers',
        "    peers = [server.accept()[0] for _ in range(world - 1)]",
        '  File "/usr/lib/python3.11/socket.py", line 294, in accept',
        "    fd, addr = self._accept()",
        "KeyboardInterrupt",
    ]
    stop = "hangwatch run got SIGINT and passed it to the server"
    verdict = _verdict(interleaved, _procs(-2, rank_code=-2), stop=stop)
    assert (verdict.state, verdict.cause) == (State.STOPPED, None), verdict.evidence
    # a traceback cut short with no interrupt in the log is still a failure
    cut = interleaved[:12]
    assert _verdict(cut, _procs(-2, rank_code=-2), stop=stop).state is State.CRASHED
