"""The engines' own stack dumps in the log (issue 19, item 8): faulthandler output as CPython prints
it, and SGLang's scheduler watchdog printing py-spy's text, read like py-spy stacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hangwatch.bundle import read_bundle
from hangwatch.classify import classify, load_rules
from hangwatch.classify.verdict.pasted import with_pasted
from hangwatch.model import LogLine
from hangwatch.parse.logdumps import dumps_in, stacks_in
from helpers.paths import FIXTURES

# A real process that dumps every thread with faulthandler while one of them waits, as a
# `dump_traceback_later` watchdog or `faulthandler.dump_traceback` on SIGUSR1 prints it.
FAULTHANDLER_SCRIPT = """
import faulthandler, sys, threading, time
def init_process_group(ev):
    ev.wait()
ev = threading.Event()
threading.Thread(target=init_process_group, args=(ev,), daemon=True).start()
time.sleep(0.2)
print("[2025-05-01 10:00:00 TP0] Init torch distributed begin.", file=sys.stderr, flush=True)
faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
ev.set()
"""


def real_faulthandler_log(tmp_path: Path) -> str:
    script = tmp_path / "fh.py"
    script.write_text(FAULTHANDLER_SCRIPT, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True)
    return done.stderr


def lines_of(text: str) -> tuple[LogLine, ...]:
    return tuple(LogLine(i, line) for i, line in enumerate(text.splitlines(), 1))


def bundle(tmp_path: Path, log: str, engine: str = "sglang") -> Path:
    root = tmp_path / "bundle"
    root.mkdir()
    (root / "meta.json").write_text(json.dumps({"format": "hangwatch-bundle/1", "engine": engine, "tp": 1}))
    (root / "server.log").write_text(log, encoding="utf-8")
    return root


def test_real_faulthandler_output_reads_as_threads(tmp_path: Path) -> None:
    # GIVEN what a real CPython printed with faulthandler
    log = real_faulthandler_log(tmp_path)
    # WHEN the log is cut into dumps
    dumps = dumps_in(lines_of(log))
    stacks = stacks_in(lines_of(log))
    # THEN one dump with both threads, the waiting one with its frames innermost first
    assert len(dumps) == 1
    assert len([t for s in stacks for t in s.threads]) == 2
    threads = [t for s in stacks for t in s.threads]
    waiting = [t for t in threads if any(f.function == "init_process_group" for f in t.frames)]
    assert waiting and waiting[0].frames[0].function == "wait"
    assert all(s.source.file == "server.log" and s.source.line for s in stacks)


def test_faulthandler_dump_in_a_bundle_log_becomes_stacks_for_the_rules(tmp_path: Path) -> None:
    log = real_faulthandler_log(tmp_path)
    evidence = read_bundle(bundle(tmp_path, log))
    assert not evidence.stacks  # no stack files in the bundle
    filled = with_pasted(evidence)
    assert any(f.function == "init_process_group" for s in filled.stacks for t in s.threads for f in t.frames)


SGLANG_PREFIX = "[2025-05-01 10:05:00 TP0] "


def watchdog_log() -> str:
    """SGLang's scheduler watchdog: `Pyspy dump for PID N:` then py-spy's own text of the
    scheduler (a recorded py-spy dump of a real SGLang rank in the TCPStore rendezvous)."""
    dump = (FIXTURES / "stacks" / "sglang_tcpstore.txt").read_text(encoding="utf-8")
    return "\n".join([
        "[2025-05-01 10:00:00 TP0] Init torch distributed begin.",
        f"{SGLANG_PREFIX}Pyspy dump for PID 12368:",
        dump.rstrip("\n"),
        "",
        f"{SGLANG_PREFIX}Watchdog timeout (self.watchdog_timeout=300)",
    ]) + "\n"  # fmt: skip


def test_sglang_watchdog_pyspy_text_reads_as_the_scheduler_stack(tmp_path: Path) -> None:
    evidence = with_pasted(read_bundle(bundle(tmp_path, watchdog_log())))
    labels = {s.label for s in evidence.stacks}
    assert "TP0" in labels  # py-spy's process title names the rank
    frames = [f.function for s in evidence.stacks for t in s.threads for f in t.frames]
    assert "_create_c10d_store" in frames


def test_a_dump_in_the_log_lets_stack_rules_decide(tmp_path: Path) -> None:
    # GIVEN no stack files, only py-spy's text of the rank in the log (announced as the watchdog
    # announces it), and no line that says why
    log = watchdog_log().replace(f"{SGLANG_PREFIX}Watchdog timeout (self.watchdog_timeout=300)\n", "")
    verdict = classify(read_bundle(bundle(tmp_path, log)), load_rules())
    # THEN the rule that reads stacks names the wait, quoting the frame from the log
    assert (verdict.cause, verdict.rule) == ("nccl_init", "nccl-init-stack")
    assert any(fact.source.file == "server.log" and "_create_c10d_store" in fact.text for fact in verdict.evidence)


def test_a_plain_traceback_is_a_failure_not_a_dump() -> None:
    log = lines_of('Traceback (most recent call last):\n  File "/x/y.py", line 3, in f\n    g()\nRuntimeError: boom\n')
    assert dumps_in(log) == []
    assert stacks_in(log) == ()


def test_measured_stacks_win_over_dumps_in_the_log(tmp_path: Path) -> None:
    root = bundle(tmp_path, watchdog_log())
    (root / "stacks").mkdir()
    (root / "stacks" / "TP0.txt").write_text((FIXTURES / "stacks" / "sleeper.txt").read_text(encoding="utf-8"))
    evidence = read_bundle(root)
    assert with_pasted(evidence).stacks == evidence.stacks
