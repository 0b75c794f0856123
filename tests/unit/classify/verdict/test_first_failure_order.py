"""Faults before their consequences (issue 19, item 6): a hardware/driver fault outranks what follows
from it; a death reported after the first failure is its consequence; a wrapper that re-raises the
first failure from the step it failed in quotes that failure."""

from __future__ import annotations

import pytest

from hangwatch.bundle import read_bundle
from hangwatch.classify import classify, load_rules
from hangwatch.classify.verdict.context import Context
from hangwatch.classify.verdict.differential import quotes_fault
from hangwatch.model import Evidence, Fact, Source
from helpers.classify_builders import logs
from helpers.paths import FIXTURES

SHIPPED = load_rules()


@pytest.mark.parametrize(
    "text",
    [
        "[12345.678] NVRM: Xid (PCI:0000:3b:00): 79, pid=15352, GPU has fallen off the bus.",
        "NVRM: Xid (PCI:0000:18:00): 48, pid=2210, An uncorrectable double bit error (DBE) has been detected",
        "NVRM: Xid (PCI:0000:c1:00): 119, pid=881, Timeout after 6s of waiting for RPC response from GPU0 GSP!",
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        "pynvml.NVMLError_GPUIsLost: GPU is lost",
    ],
)
def test_hardware_faults_are_read_as_faults(text: str) -> None:
    assert quotes_fault([Fact(text, Source("dmesg.txt"))])


@pytest.mark.parametrize(
    "text",
    [
        # raised by the application's own kernels or by the driver cleaning up after a kill
        "NVRM: Xid (PCI:0000:3b:00): 13, pid=4410, Graphics Exception: ESR 0x504648=0x80000009",
        "NVRM: Xid (PCI:0000:3b:00): 31, pid=4410, Ch 00000008, intr 10000000. MMU Fault",
        "NVRM: Xid (PCI:0000:3b:00): 43, pid=4410, Ch 00000010",
        "NVRM: Xid (PCI:0000:3b:00): 45, pid=4410, Ch 00000010",
        "Init torch distributed begin.",
    ],
)
def test_application_xids_and_plain_lines_are_not_faults(text: str) -> None:
    assert not quotes_fault([Fact(text, Source("dmesg.txt"))])


def test_xid_outranks_the_rendezvous_it_stalls() -> None:
    # GIVEN the shipped fixture: rank 0 waits for the other node's workers, and dmesg has Xid 79
    verdict = classify(read_bundle(FIXTURES / "bundles" / "sglang-dist-init"), SHIPPED)
    # THEN the fault is the cause, quoted in the evidence; the rendezvous follows at lower confidence
    assert verdict.cause == "driver_or_xid"
    assert any("Xid" in fact.text for fact in verdict.evidence)
    causes = [c.cause for c in verdict.candidates]
    assert causes[:2] == ["driver_or_xid", "multinode_rendezvous"]
    assert verdict.candidates[1].confidence < verdict.candidates[0].confidence


def test_a_death_after_the_first_failure_is_its_consequence() -> None:
    log = logs(
        "Initialization failed. warmup error: Traceback (most recent call last):",
        '  File "/x/sglang/srt/entrypoints/http_server.py", line 1546, in _execute_server_warmup',
        "    assert res.status_code == 200",
        "AssertionError: bad request",
        "Killed",
    )
    roles = Context(Evidence(engine="sglang", log=log)).failure_roles
    assert roles.get(5) == "consequence"
    verdict = classify(Evidence(engine="sglang", log=log), SHIPPED)
    assert verdict.cause == "warmup_request"


def test_a_death_before_any_failure_is_not_marked() -> None:
    log = logs("Load weight begin.", "Killed")
    assert 2 not in Context(Evidence(engine="sglang", log=log)).failure_roles


def test_a_wrapper_with_the_roots_error_on_the_next_line_quotes_the_root() -> None:
    log = logs(
        "RuntimeError: CUDA error: invalid resource handle (at /csrc/rope.cu:311)",
        "Exception: Capture cuda graph failed: CUDA error: invalid resource handle",
    )
    roles = Context(Evidence(engine="sglang", log=log)).failure_roles
    assert (roles.get(1), roles.get(2)) == ("root", "root")


def test_a_later_unrelated_error_is_not_the_root() -> None:
    log = logs(
        "RuntimeError: CUDA error: invalid resource handle (at /csrc/rope.cu:311)",
        "Load weight begin.",
        "OSError: [Errno 28] No space left on device",
    )
    roles = Context(Evidence(engine="sglang", log=log)).failure_roles
    assert roles.get(3) == "consequence"
