"""The machinery under lab/scenarios.py: one started scenario, its processes, its events.

A scenario is a script (a function of a RunningScenario) run on a driver thread: it launches
`sglang.launch_server` (or `vllm serve`) trees, polls their logs and /proc until the hang has
begun, and marks the onset. stop() kills the process groups and removes what the servers left
behind.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lab import _procs
from lab._procs import LogWatch

COMMON_FLAGS = [
    "--device", "cpu", "--host", "127.0.0.1", "--log-level", "info",
    "--model-impl", "transformers", "--attention-backend", "torch_native",
    "--disable-cuda-graph", "--sampling-backend", "pytorch",
]
READY_LINE = "The server is fired up and ready to roll!"
VLLM_READY_LINE = "Application startup complete."  # vLLM logs it only once the engine is up
VLLM_FLAGS = ["--host", "127.0.0.1", "--max-model-len", "512", "--dtype", "float32",
              "--disable-log-stats"]
# vLLM's single-node distributed init is a FileStore under TMPDIR that it never deletes
_VLLM_DIST_FILE = re.compile(r"distributed_init_method=file://(\S+)")
ONSET_TIMEOUT_S = 600.0  # a TP=2 start takes 30-60 s on 2 shared cores, 274 s at load average 25: a wide margin
VLLM_ONSET_TIMEOUT_S = 1200.0  # vLLM: TP=1 40-240 s, TP=2 110 s and more; a DP=2 start took 620 s at load 25
HS_DUMP_SHM_PREFIX = "/dev/shm/hangwatch-hsdump-"

TMP_PREFIX = "hangwatch-lab-"
OWNER_FILE = "owner.json"  # lets a later start() remove what a SIGKILLed run left behind

Event = dict[str, Any]


@dataclass
class Node:
    """One `sglang.launch_server` process tree (one "node"; both run on 127.0.0.1)."""

    rank: int
    proc: Any  # subprocess.Popen
    log: Path
    port: int
    watch: LogWatch = field(init=False)

    def __post_init__(self) -> None:
        self.watch = LogWatch(self.log)

    def members(self) -> list[int]:
        return _procs.pgid_members(self.proc.pid)  # the launcher leads its own group

    def alive(self) -> bool:
        return self.proc.poll() is None


class RunningScenario:
    """A started scenario. `pid`, `log` and `port` are node 0's (the one hangwatch watches)."""

    def __init__(self, name: str, script: Callable[[RunningScenario], None], port: int,
                 log: Path, onset_file: Path | None, ready_file: Path | None,
                 opts: dict[str, Any], on_event: Callable[[Event], None] | None,
                 engine: str = "sglang") -> None:
        self.name, self.port, self.log, self.opts, self.engine = name, port, log, opts, engine
        self._script = script
        self._onset_file, self._ready_file, self._on_event = onset_file, ready_file, on_event
        self.run_id = uuid.uuid4().hex[:10]
        self.tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{name}-"))
        (self.tmp / OWNER_FILE).write_text(json.dumps({"pid": os.getpid(), "run_id": self.run_id}))
        self.nodes: list[Node] = []
        self.events: list[Event] = []
        self.t0 = time.time()
        self._onset: Event | None = None
        self._target = threading.Event()  # the hang began, or the server is ready
        self._stopping = threading.Event()
        self._launched = threading.Event()
        self._cleanups: list[Callable[[], None]] = []
        self._shm: set[int] = set()  # inodes of /dev/shm files our processes held
        self._pids_seen: set[int] = set()
        self._tracked_at = 0.0
        self._driver = threading.Thread(target=self._drive, name=f"lab-{name}", daemon=True)

    # --- public ---------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        return self.nodes[0].proc.pid

    def onset(self) -> Event | None:
        """When the hang began (None until it has)."""
        return self._onset

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the scenario reached its state (hang onset, or ready for healthy ones)."""
        return self._target.wait(timeout)

    def alive(self) -> bool:
        return any(node.alive() for node in self.nodes)

    def stop(self, grace: float = 3.0) -> None:
        """Kill every process started (their groups, then any stray carrying our marker) and
        remove temp files. Safe to call twice."""
        self._stopping.set()
        pids = self._pids_seen | {pid for node in self.nodes for pid in node.members()}
        shm = self._shm | _procs.shm_inodes(pids)
        stamped = _procs.pid_stamped_shm(pids)
        vllm = self.engine == "vllm"
        # vLLM: two SIGTERMs to the group (the first is swallowed while the engine starts, see
        # kill_groups), then SIGKILL whatever is left 5 s later.
        _procs.kill_groups([node.proc for node in self.nodes], self.run_id, max(grace, 5.0) if vllm else grace, term_twice=vllm)
        for node in self.nodes:
            try:
                node.proc.wait(timeout=5)
            except Exception:
                pass
        for cleanup in reversed(self._cleanups):
            cleanup()
        self._cleanups.clear()
        _procs.unlink_shm(shm, stamped)
        self._remove_dist_files()
        shutil.rmtree(self.tmp, ignore_errors=True)
        if self._driver.is_alive() and threading.current_thread() is not self._driver:
            self._driver.join(timeout=5)

    # --- used by the scenario scripts -------------------------------------------------------
    def launch(self, rank: int, args: list[str], port: int, env: dict[str, str] | None = None,
               log: Path | None = None) -> Node:
        log = log or (self.log if rank == 0 else self.log.with_suffix(f".node{rank}.log"))
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(self._tmpdir()),
                    _procs.MARKER_ENV: self.run_id, **self._engine_env(), **(env or {})}
        if self.engine == "vllm":  # the `vllm` CLI script of the venv: `vllm serve MODEL ...`
            argv = [str(_procs.vllm_python()), str(_procs.vllm_python().parent / "vllm"), "serve", *args]
        else:
            argv = [str(_procs.lab_python()), "-m", "sglang.launch_server", *args]
        node = Node(rank, _procs.spawn(argv, full_env, log, self.opts.get("output") or "file"), log, port)
        # the groups, for sweep_stale(): vLLM's EngineCore and workers outlive an API server that
        # PR_SET_PDEATHSIG killed (SGLang's children follow their parent, vLLM's do not)
        owner = {"pid": os.getpid(), "run_id": self.run_id, "groups": [n.proc.pid for n in [*self.nodes, node]]}
        (self.tmp / OWNER_FILE).write_text(json.dumps(owner))
        self.nodes.append(node)
        self.emit("launched", node=rank, node_pid=node.proc.pid, log=str(log), port=port)
        if rank == 0:
            self._launched.set()
        return node

    def server_args(self, port: int, *, model: Path | None = None, warmup: bool = False,
                    max_total_tokens: int = 4096) -> list[str]:
        args = ["--model-path", str(model or _procs.tiny_model()), "--port", str(port),
                *COMMON_FLAGS, "--max-total-tokens", str(max_total_tokens)]
        return args if warmup else [*args, "--skip-server-warmup"]

    def vllm_args(self, port: int, *, model: Path | None = None, eager: bool = False) -> list[str]:
        args = [str(model or _procs.tiny_model_hd64()), "--port", str(port), *VLLM_FLAGS]
        return [*args, "--enforce-eager"] if eager else args

    def until(self, cond: Callable[[], Any], timeout: float | None = None,
              watch: list[Node] | None = None) -> Any:
        """Poll cond() until truthy; None if stopping, on timeout, or when a watched node
        exits first (that is reported as an event)."""
        if timeout is None:
            timeout = VLLM_ONSET_TIMEOUT_S if self.engine == "vllm" else ONSET_TIMEOUT_S
        deadline = time.monotonic() + timeout
        while not self._stopping.is_set():
            self._track()
            value = cond()
            if value:
                return value
            dead = [n for n in (watch if watch is not None else self.nodes) if not n.alive()]
            if dead:
                self.emit("error", what="exited before the expected state",
                          node=dead[0].rank, node_pid=dead[0].proc.pid,
                          rc=dead[0].proc.returncode)
                return None
            if time.monotonic() > deadline:
                self.emit("error", what=f"expected state not reached in {timeout:.0f} s")
                return None
            time.sleep(0.2)
        return None

    def sleep(self, seconds: float) -> bool:
        """Sleep unless stopped; False when stopped."""
        return not self._stopping.wait(seconds)

    def rss_mib(self) -> int:
        """Resident memory of every process we started, now (MiB)."""
        return round(_procs.rss_mib(p for node in self.nodes for p in node.members()))

    def mark_onset(self, what: str, reached: bool = True, **detail: Any) -> None:
        """Record when the hang began; `reached=False` when the scenario reports its steady
        state later, with mark_reached()."""
        self._onset = self.emit("onset", what=what, rss_mib=self.rss_mib(), **detail)
        if self._onset_file:
            self._onset_file.parent.mkdir(parents=True, exist_ok=True)
            self._onset_file.write_text(json.dumps(self._onset) + "\n")
        if reached and not self.opts.get("expect_ready"):
            self._reach_target()

    def mark_reached(self, what: str, **detail: Any) -> None:
        self.emit("reached", what=what, **detail)
        self._reach_target()

    def await_ready(self, node: Node) -> bool:
        line = VLLM_READY_LINE if self.engine == "vllm" else READY_LINE
        if not self.until(lambda: node.watch.find(line), watch=[node]):
            return False
        self.emit("ready", node=node.rank, port=node.port, rss_mib=self.rss_mib())
        self._reach_target()
        return True

    def add_cleanup(self, fn: Callable[[], None]) -> None:
        self._cleanups.append(fn)

    def emit(self, event: str, **detail: Any) -> Event:
        now = time.time()
        record: Event = {
            "scenario": self.name, "event": event, "t": round(now, 3),
            "iso": datetime.fromtimestamp(now, timezone.utc).isoformat(timespec="milliseconds"),
            "elapsed_s": round(now - self.t0, 2), **detail,
        }
        if self.nodes and "pid" not in record:
            record["pid"] = self.pid
        self.events.append(record)
        if self._on_event:
            self._on_event(record)
        return record

    # --- internals --------------------------------------------------------------------------
    def _engine_env(self) -> dict[str, str]:
        if self.engine != "vllm":
            return {}
        # 1 GiB of KV cache (the default, 4 GiB, is too much for eight users of 24 GiB); the
        # torch.compile and AOT caches in the run's temp dir, so each run compiles afresh and
        # nothing is left under ~/.cache/vllm.
        return {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1",
                "VLLM_CACHE_ROOT": str(self._tmpdir() / "vllm-cache")}

    def _remove_dist_files(self) -> None:
        for node in self.nodes:
            node.watch.poll()
            for line in node.watch.lines:
                m = _VLLM_DIST_FILE.search(line)
                if m and Path(m.group(1)).name.startswith("vllm_dist_"):
                    Path(m.group(1)).unlink(missing_ok=True)

    def _tmpdir(self) -> Path:
        # SGLang leaves ipc:// socket files in TMPDIR when killed; keep them in our temp dir.
        path = self.tmp / "tmp"
        path.mkdir(exist_ok=True)
        return path

    def _track(self, every: float = 1.0) -> None:
        # Remember our pids and the /dev/shm files they hold while they live: a rank that dies
        # (or is SIGKILLed by stop()) leaves its segments behind, and stop() unlinks them.
        if time.monotonic() - self._tracked_at < every:
            return
        self._tracked_at = time.monotonic()
        pids = [p for node in self.nodes for p in node.members()]
        self._pids_seen.update(pids)
        self._shm |= _procs.shm_inodes(pids)

    def _reach_target(self) -> None:
        if self._ready_file and not self._target.is_set():
            self._ready_file.write_text("ready\n")
        self._target.set()

    def _drive(self) -> None:
        # Every server is spawned from this thread, and it lives until stop(): the children's
        # PR_SET_PDEATHSIG fires when the *thread* that forked them exits.
        try:
            self._script(self)
        except Exception as exc:  # reported, not raised: the caller is in another thread
            self.emit("error", what=f"{type(exc).__name__}: {exc}")
        finally:
            self._launched.set()
        reported: set[int] = set()
        while not self._stopping.wait(0.5):
            self._track()
            for node in self.nodes:
                if not node.alive() and node.rank not in reported:
                    reported.add(node.rank)
                    self.emit("exited", node=node.rank, node_pid=node.proc.pid,
                              rc=node.proc.returncode)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def sweep_stale() -> list[str]:
    """Remove temp dirs (and hs-dump dirs) of lab runs whose owner died without stop(): a
    SIGKILLed run.py or test. Their launchers are already gone (PR_SET_PDEATHSIG); what is left
    of their process groups (vLLM's EngineCore and workers) is SIGKILLed, members whose working
    directory is the repo (where the lab starts every server) only."""
    removed = []
    for owner in Path(tempfile.gettempdir()).glob(f"{TMP_PREFIX}*/{OWNER_FILE}"):
        try:
            info = json.loads(owner.read_text())
        except (OSError, ValueError):
            continue
        if _pid_alive(int(info["pid"])):
            continue
        for group in info.get("groups", []):
            for pid in _procs.pgid_members(int(group)):
                try:
                    if os.readlink(f"/proc/{pid}/cwd") == str(_procs.ROOT):
                        os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        shutil.rmtree(f"{HS_DUMP_SHM_PREFIX}{info['run_id']}", ignore_errors=True)
        shutil.rmtree(owner.parent, ignore_errors=True)
        removed.append(str(owner.parent))
    return removed
