"""The preflight's live reads on real files: cgroup limits under a sysfs-shaped root, lock files
with real dead and live owners, stat of a real FIFO (never opened), the launch's interpreter."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from hangwatch.parse.hostinfo import ProbePlan
from hangwatch.sources.host import gather_host, probe_path
from hangwatch.sources.packages import launch_interpreter, read_versions


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_cgroup_v2_limits_take_the_tightest_of_the_parents(tmp_path: Path) -> None:
    proc, sys_root = tmp_path / "proc", tmp_path / "sys"
    _tree(proc, {"self/cgroup": "0::/kubepods/pod1/ctr\n", "self/mountinfo": "", "locks": ""})
    _tree(sys_root, {"fs/cgroup/kubepods/pod1/ctr/cpu.max": "max 100000\n", "fs/cgroup/kubepods/pod1/cpu.max": "150000 100000\n",
                     "fs/cgroup/kubepods/pod1/ctr/memory.max": "8589934592\n", "fs/cgroup/kubepods/memory.max": "max\n"})  # fmt: skip
    snap = gather_host(ProbePlan(), proc_root=str(proc), sys_root=str(sys_root))
    assert snap.cpu_quota == 1.5 and snap.memory_limit_bytes == 8 << 30


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    proc, sys_root = tmp_path / "proc", tmp_path / "sys"
    _tree(proc, {"self/cgroup": "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n", "self/mountinfo": "", "locks": ""})
    _tree(sys_root, {"fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "200000\n",
                     "fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
                     "fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "9223372036854771712\n"})  # fmt: skip
    snap = gather_host(ProbePlan(), proc_root=str(proc), sys_root=str(sys_root))
    assert snap.cpu_quota == 2.0 and snap.memory_limit_bytes is None


def test_locks_with_dead_and_live_owners(tmp_path: Path) -> None:
    cache = tmp_path / "cache" / "jit"
    cache.mkdir(parents=True)
    gone = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True).stdout)
    (cache / "a.lock").write_text(f"{gone}\n{socket.gethostname()}\n")
    (cache / "b.lock").write_text(f"{os.getpid()}\n")
    (cache / "c.lock").write_text("")  # flock-style: empty, harmless
    (cache / "d.lock").write_text(f"{gone}\nanother-host\n")  # owner on another host: cannot tell
    snap = gather_host(ProbePlan(caches=(str(tmp_path / "cache"),)))
    locks = {Path(lock.path).name: lock for lock in snap.locks or ()}
    assert (locks["a.lock"].pid, locks["a.lock"].pid_alive) == (gone, False)
    assert locks["b.lock"].pid_alive is True
    assert locks["c.lock"].pid is None and locks["d.lock"].pid_alive is None


def test_a_fifo_is_statted_not_opened(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    os.mkfifo(model / "model-00001-of-00002.safetensors")
    (model / "model-00002-of-00002.safetensors").write_bytes(b"x" * 10)
    start = time.monotonic()
    probe = probe_path(str(model), "weights")
    assert time.monotonic() - start < 2.0  # an open() would block until a writer came
    assert probe.fifos == (str(model / "model-00001-of-00002.safetensors"),) and probe.size_bytes == 10
    assert probe_path(str(tmp_path / "nope"), "weights").exists is False


def test_launch_interpreter_and_versions(tmp_path: Path) -> None:
    script = tmp_path / "sglang"
    script.write_text(f"#!{sys.executable}\nprint('hi')\n")
    script.chmod(0o755)
    env = {"PATH": f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}"}
    assert launch_interpreter(["sglang", "serve", "m"], env) == sys.executable
    assert launch_interpreter(["env", "A=1", sys.executable, "-m", "x"], env) == sys.executable
    assert launch_interpreter(["OMP_NUM_THREADS=2", sys.executable, "-m", "x"], env) == sys.executable
    assert launch_interpreter(["/nonexistent/bin/thing"], env) is None
    versions = read_versions(sys.executable, ["pyyaml", "not-a-real-distribution"], os.environ)
    assert set(versions) == {"pyyaml"}
