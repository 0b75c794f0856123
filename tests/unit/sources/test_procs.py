"""read_procs / ProcessSampler on real process trees."""

from __future__ import annotations

import os
import signal
import sys
import time

import psutil
import pytest

from hangwatch.errors import SourceUnavailable
from hangwatch.model import ProcessRecord
from hangwatch.sources.procs import (
    ProcessSampler,
    keep_title,
    process_role,
    read_io_bytes,
    read_procs,
)
from helpers.liveprocs import Spawner, start_fake_server, wait_until

# a parent that starts CHILD_CODE children and writes their pids to $HW_READY
PARENT = """
import json, os, subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", code]) for code in {codes!r}]
open(os.environ["HW_READY"], "w").write(json.dumps([k.pid for k in kids]))
{after}
time.sleep(60)
"""


def by_pid(records):
    return {r.pid: r for r in records}


def test_root_and_descendants_with_fields(spawner: Spawner, tmp_path) -> None:
    # GIVEN a parent with two sleeping children
    code = PARENT.format(codes=["import time; time.sleep(60)"] * 2, after="")
    parent, kids = spawner.ready(code, tmp_path / "ready.json")
    # WHEN (once the children have finished starting and sleep)
    records = wait_until(lambda: (r := read_procs(parent.pid)) and all(p.state == "S" for p in r[1:]) and r)
    # THEN the root comes first, then both children, with their fields read
    assert records[0].pid == parent.pid and records[0].ppid == os.getpid()
    assert set(by_pid(records)) == {parent.pid, *kids}
    child = by_pid(records)[kids[0]]
    assert child.ppid == parent.pid and child.alive and child.exit_code is None
    assert child.role == "other" and child.rank is None
    assert child.cmdline.startswith(sys.executable) and "time.sleep(60)" in child.cmdline
    assert child.rss_mib and child.rss_mib > 1 and child.num_threads == 1
    assert child.cpu_time_s is not None and child.cpu_percent is None  # one sample: no rate yet
    assert child.io_read_bytes is not None and child.io_read_bytes > 0  # python read its stdlib
    assert child.create_time and abs(child.create_time - time.time()) < 60


def test_cpu_percent_from_the_delta_between_samples(spawner: Spawner) -> None:
    busy = spawner.python("while True: pass")
    idle = spawner.python("import time; time.sleep(60)")
    samplers = {proc.pid: ProcessSampler() for proc in (busy, idle)}
    time.sleep(0.3)  # past start-up
    for pid, sampler in samplers.items():
        sampler.sample(pid)
    time.sleep(1.0)
    busy_pct, idle_pct = (samplers[p.pid].sample(p.pid)[0].cpu_percent for p in (busy, idle))
    # loose bounds: CI machines are shared, and CPU time is counted in 10 ms ticks
    assert busy_pct is not None and busy_pct > 10
    assert idle_pct is not None and idle_pct < 5


def test_roles_and_ranks_of_a_fake_sglang_tree(spawner: Spawner, tmp_path) -> None:
    launcher, info = start_fake_server(spawner, tmp_path, "sglang", ["--tp", "2"])
    records = by_pid(read_procs(launcher.pid))
    assert records[launcher.pid].role == "launcher"
    assert {(records[pid].role, records[pid].rank) for pid in info["children"].values()} == {
        ("scheduler", "TP0"), ("scheduler", "TP1"), ("detokenizer", None)}
    assert records[info["children"]["sglang::scheduler_TP1"]].cmdline.startswith("sglang::scheduler_TP1 ")


def test_compiler_children_get_their_role(spawner: Spawner, tmp_path) -> None:
    # argv[0] "nvcc" on a python that sleeps: the command line is what identifies a compiler
    nvcc = spawner.start(["nvcc", "-c", "import time; time.sleep(60)"], executable=sys.executable)
    wait_until(lambda: read_procs(nvcc.pid)[0].cmdline.startswith("nvcc"))
    assert read_procs(nvcc.pid)[0].role == "compiler"
    assert process_role("/usr/local/cuda/bin/ptxas -arch=sm_90 a.ptx") == ("compiler", None)
    assert process_role("ninja -v") == ("compiler", None)
    assert process_role("bash -c true") == ("other", None)


@pytest.mark.parametrize(("code", "expected"), [("import sys; sys.exit(3)", 3), ("import os; os.kill(os.getpid(), 9)", -9)])
def test_an_unreaped_child_is_dead_with_its_exit_code(spawner: Spawner, tmp_path, code, expected) -> None:
    # GIVEN a parent that never reaps its child: the child stays a zombie in the tree
    parent, (kid,) = spawner.ready(PARENT.format(codes=[code], after=""), tmp_path / "r.json")
    wait_until(lambda: by_pid(read_procs(parent.pid))[kid].state == "Z")
    # THEN it is reported dead, with the status the kernel keeps for its parent
    record = by_pid(read_procs(parent.pid))[kid]
    assert (record.alive, record.exit_code) == (False, expected)


def test_an_exited_process_stays_in_the_list(spawner: Spawner, tmp_path) -> None:
    # GIVEN a child that its parent reaps after 0.5 s
    code = PARENT.format(codes=["import time; time.sleep(0.5)"], after="kids[0].wait()")
    parent, (kid,) = spawner.ready(code, tmp_path / "r.json")
    sampler = ProcessSampler()
    assert by_pid(sampler.sample(parent.pid))[kid].alive
    # WHEN it is gone
    wait_until(lambda: not os.path.exists(f"/proc/{kid}"))
    records = by_pid(sampler.sample(parent.pid))
    # THEN it is still listed, dead; its exit code went to its parent, so it is unknown
    assert records[kid].alive is False and records[kid].exit_code is None and records[kid].cpu_percent is None
    assert by_pid(sampler.sample(parent.pid))[kid].alive is False  # and it stays


def test_a_stepped_clock_does_not_make_live_processes_exited(spawner: Spawner, tmp_path, monkeypatch) -> None:
    """A simulation of a clock step: the boot time /proc/stat reports moves by a second between
    two samples (it does when a VM is resumed or NTP steps the clock). psutil's create_time()
    moves with it; the processes did not restart, so none may read as exited."""
    import psutil._pslinux as pslinux

    code = PARENT.format(codes=["import time; time.sleep(60)"] * 2, after="")
    parent, kids = spawner.ready(code, tmp_path / "ready.json")
    sampler = ProcessSampler()
    first = by_pid(sampler.sample(parent.pid))
    real_boot_time = pslinux.boot_time
    monkeypatch.setattr(pslinux, "boot_time", lambda: real_boot_time() + 1.0)
    assert psutil.Process(kids[0]).create_time() != first[kids[0]].create_time  # the step is seen by psutil
    for _ in range(3):
        records = sampler.sample(parent.pid)
        assert sorted(r.pid for r in records) == sorted([parent.pid, *kids])  # no second, dead copy
        assert all(r.alive for r in records)
        assert {r.pid: r.create_time for r in records} == {pid: r.create_time for pid, r in first.items()}


def test_exit_code_of_our_own_child_is_read_without_reaping_it(spawner: Spawner) -> None:
    child = spawner.python("import sys; sys.exit(7)")
    sampler = ProcessSampler()
    sampler.sample(os.getpid())
    wait_until(lambda: child.pid in by_pid(sampler.sample(os.getpid())) and by_pid(sampler.sample(os.getpid()))[child.pid].state == "Z")
    assert by_pid(sampler.sample(os.getpid()))[child.pid].exit_code == 7
    assert child.wait(timeout=5) == 7  # the Popen still owns the status


def test_a_process_that_left_the_tree_is_not_reported_dead(spawner: Spawner, tmp_path) -> None:
    # GIVEN root -> middle -> leaf; the middle exits after 1 s (its parent does not reap it)
    middle = (
        "import os, subprocess, sys, time; "
        "leaf = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        "open(os.environ['HW_LEAF'], 'w').write(str(leaf.pid)); time.sleep(1)"
    )
    leaf_file = tmp_path / "leaf"
    root, (mid,) = spawner.ready(PARENT.format(codes=[middle], after=""), tmp_path / "r.json", env={"HW_LEAF": str(leaf_file)})
    leaf = int(wait_until(lambda: leaf_file.exists() and leaf_file.read_text()))
    spawner.adopt(leaf, sys.executable)  # stopped at teardown
    sampler = ProcessSampler()
    assert leaf in by_pid(sampler.sample(root.pid))
    # WHEN the middle exits, the leaf is re-parented out of the tree
    wait_until(lambda: by_pid(sampler.sample(root.pid))[mid].state == "Z", timeout_s=5)
    records = by_pid(sampler.sample(root.pid))
    # THEN the middle is dead with exit 0, and the leaf (still running) is not called dead
    assert (records[mid].alive, records[mid].exit_code) == (False, 0)
    assert leaf not in records and os.path.exists(f"/proc/{leaf}")


def test_missing_root_is_source_unavailable() -> None:
    with pytest.raises(SourceUnavailable, match="no process with pid 999999999"):
        read_procs(999999999)


def test_dead_compilers_are_not_kept(spawner: Spawner) -> None:
    nvcc = spawner.start(["nvcc", "-c", "import time; time.sleep(0.3)"], executable=sys.executable)
    sampler = ProcessSampler()
    wait_until(lambda: any(r.role == "compiler" for r in sampler.sample(os.getpid())))
    nvcc.wait(timeout=5)
    assert all(r.pid != nvcc.pid for r in sampler.sample(os.getpid()))


def test_read_io_bytes_sums_rchar_and_read_bytes(tmp_path) -> None:
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "io").write_text("rchar: 100\nwchar: 5\nsyscr: 1\nsyscw: 1\nread_bytes: 4096\nwrite_bytes: 0\n")
    assert read_io_bytes(42, proc_root=str(tmp_path)) == 4196
    assert read_io_bytes(43, proc_root=str(tmp_path)) is None  # unreadable -> None, never an error
    (tmp_path / "42" / "io").write_text("garbage")
    assert read_io_bytes(42, proc_root=str(tmp_path)) is None


def test_wchan_names_where_a_thread_sleeps_in_the_kernel(tmp_path) -> None:
    # GIVEN a real process blocked opening a FIFO that nobody writes (a hung filesystem, in small)
    import subprocess
    import sys
    import time

    from hangwatch.sources.procs import read_wchan

    fifo = tmp_path / "weights.safetensors"
    os.mkfifo(fifo)
    proc = subprocess.Popen([sys.executable, "-c", f"open({str(fifo)!r}, 'rb')"])
    try:
        # WHEN its threads' wait channels are read (no ptrace)
        deadline = time.monotonic() + 10
        while "wait_for_partner" not in read_wchan(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        # THEN the kernel says it waits for the FIFO's other end
        assert "wait_for_partner" in read_wchan(proc.pid)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert read_wchan(proc.pid) == ()


def test_a_rank_that_died_unreaped_keeps_the_title_it_had(spawner: Spawner, tmp_path) -> None:
    # GIVEN a scheduler rank (its argv[0] is its title) that dies while its parent never reaps it:
    # a zombie shows only its comm, cut to 15 characters, so the title says no rank any more
    code = ("import json, os, subprocess, sys, time; "
            "kid = subprocess.Popen(['sglang::scheduler_TP1', '-c', 'import time; time.sleep(1.5)'], executable=sys.executable); "
            "open(os.environ['HW_READY'], 'w').write(json.dumps([kid.pid])); time.sleep(60)")
    parent, (kid,) = spawner.ready(code, tmp_path / "r.json")
    sampler = ProcessSampler()
    assert (by_pid(sampler.sample(parent.pid))[kid].role, by_pid(sampler.sample(parent.pid))[kid].rank) == ("scheduler", "TP1")
    # WHEN it has died
    wait_until(lambda: by_pid(sampler.sample(parent.pid))[kid].state == "Z")
    # THEN the sampler that saw it alive still names it TP1, dead
    record = by_pid(sampler.sample(parent.pid))[kid]
    assert (record.alive, record.role, record.rank) == (False, "scheduler", "TP1")


def test_a_rank_sampled_while_it_exits_keeps_its_title_through_every_later_sample() -> None:
    # GIVEN a rank seen alive with its title, then in the exit window (memory gone, argv unreadable,
    # /proc shows its comm, state still R), then as a zombie
    alive = ProcessRecord(pid=7, ppid=1, cmdline="sglang::scheduler_TP1", role="scheduler", rank="TP1", state="S")
    exiting = ProcessRecord(pid=7, ppid=1, cmdline="[sglang::schedul]", role="scheduler", rank=None, state="R")
    zombie = ProcessRecord(pid=7, ppid=1, cmdline="[sglang::schedul]", role="scheduler", rank=None, state="Z", alive=False)
    # WHEN each sample is read against the one before
    window = keep_title(alive, exiting)
    dead = keep_title(window, zombie)
    # THEN the rank stays named through both, and a live title change still shows
    assert (window.rank, window.state, dead.rank, dead.alive) == ("TP1", "R", "TP1", False)
    renamed = ProcessRecord(pid=7, ppid=1, cmdline="VLLM::Worker_TP0", role="worker", rank="TP0")
    assert keep_title(ProcessRecord(pid=7, ppid=1, cmdline="VLLM::Worker", role="worker"), renamed) == renamed


def test_read_bytes_are_the_process_own_not_its_reaped_children(tmp_path) -> None:
    """/proc/PID/io adds the reads of reaped children (a `py-spy dump` the engine runs on itself);
    the sum over its live threads does not."""
    from hangwatch.sources.procs import read_io_bytes

    (tmp_path / "7" / "task" / "7").mkdir(parents=True)
    (tmp_path / "7" / "task" / "8").mkdir(parents=True)
    (tmp_path / "7" / "io").write_text("rchar: 900000000\nread_bytes: 0\n")  # with its reaped children
    (tmp_path / "7" / "task" / "7" / "io").write_text("rchar: 1000\nread_bytes: 4096\n")
    (tmp_path / "7" / "task" / "8" / "io").write_text("rchar: 2000\nread_bytes: 0\n")
    assert read_io_bytes(7, proc_root=str(tmp_path)) == 1000 + 4096 + 2000
    (tmp_path / "9").mkdir()
    (tmp_path / "9" / "io").write_text("rchar: 5\nread_bytes: 1\n")  # no task folder readable: the process file
    assert read_io_bytes(9, proc_root=str(tmp_path)) == 6
def test_without_a_rescan_the_known_tree_is_read_again_and_a_gone_process_forces_one(spawner: Spawner, tmp_path) -> None:
    # GIVEN a parent with one child, sampled once (a full scan); SIGUSR1 starts a second child, SIGUSR2 kills the first
    code = """
import json, os, signal, subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])]
signal.signal(signal.SIGUSR1, lambda *a: kids.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])))
signal.signal(signal.SIGUSR2, lambda *a: kids[0].kill())
open(os.environ["HW_READY"], "w").write(json.dumps([k.pid for k in kids]))
while True:
    time.sleep(60)
"""
    parent, kids = spawner.ready(code, tmp_path / "ready.json")
    sampler = ProcessSampler()
    assert set(by_pid(sampler.sample(parent.pid))) == {parent.pid, kids[0]}
    # WHEN the parent starts a second child: without a rescan it is not looked for, with one it is
    os.kill(parent.pid, signal.SIGUSR1)
    wait_until(lambda: len(read_procs(parent.pid)) == 3, 10)
    assert set(by_pid(sampler.sample(parent.pid, rescan=False))) == {parent.pid, kids[0]}
    assert len(sampler.sample(parent.pid, rescan=True)) == 3
    # WHEN a known child exits: the next sample without a rescan scans anyway, and reports it exited
    os.kill(parent.pid, signal.SIGUSR2)
    wait_until(lambda: not by_pid(read_procs(parent.pid)).get(kids[0], ProcessRecord(0, None, "", "other", alive=False)).alive, 10)
    records = by_pid(sampler.sample(parent.pid, rescan=False))
    assert len([r for r in records.values() if r.alive]) == 2 and not records[kids[0]].alive


def test_without_a_rescan_the_threads_files_are_read_at_their_own_pace(spawner: Spawner, tmp_path, monkeypatch) -> None:
    # GIVEN a process that reads a file on SIGUSR1 (its io counters move), sampled once with a rescan
    from hangwatch.sources import procs

    data = tmp_path / "data.bin"
    data.write_bytes(b"x" * (2 << 20))
    code = ("import json, os, signal, time\n"
            f"signal.signal(signal.SIGUSR1, lambda *a: open({str(data)!r}, 'rb').read())\n"
            "open(os.environ['HW_READY'], 'w').write(json.dumps(os.getpid()))\n"
            "while True: time.sleep(60)")
    child, _ = spawner.ready(code, tmp_path / "ready.json")
    sampler = ProcessSampler()
    first = by_pid(sampler.sample(child.pid))[child.pid]
    assert first.io_read_bytes is not None and first.wchan
    # WHEN it reads 2 MiB and is sampled again without a rescan, within THREADS_EVERY_S
    os.kill(child.pid, signal.SIGUSR1)
    wait_until(lambda: (read_io_bytes(child.pid) or 0) > first.io_read_bytes + (1 << 20), 10)
    kept = by_pid(sampler.sample(child.pid, rescan=False))[child.pid]
    # THEN its per-thread files were not read again: the last io and wchan stand
    assert kept.io_read_bytes == first.io_read_bytes and kept.wchan == first.wchan
    assert kept.cpu_time_s is not None and kept.alive  # the process's own files are read every sample
    # WHEN THREADS_EVERY_S has passed (or a rescan is asked for), they are read again
    monkeypatch.setattr(procs, "THREADS_EVERY_S", 0.0)
    fresh = by_pid(sampler.sample(child.pid, rescan=False))[child.pid]
    assert fresh.io_read_bytes is not None and fresh.io_read_bytes > first.io_read_bytes + (1 << 20)
