"""Progress detection: pure functions over two consecutive snapshots of a watched server.

"Stall versus slow" (docs/live.md): a phase may be silent for minutes and still be healthy, so the
watch loop decides from what moved, not from one timer. A `Snapshot` is the few numbers that can
move; `progress_signals(prev, cur)` names the ones that did. `ProgressTracker` keeps the last
snapshot and when something last moved. No I/O and no clock here: the watch loop builds snapshots
and passes times in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from hangwatch.model import GpuSample, ProcessRecord, ProcessStack
from hangwatch.watch.episodes import Motion

__all__ = [
    "ProgressTracker",
    "ProcSample",
    "Snapshot",
    "StackMark",
    "Thresholds",
    "progress_signals",
    "first_look_moved",
    "FIRST_LOOK_POLL_S",
    "compiler_cpu",
    "proc_samples",
    "motion_signature",
    "thread_marks",
    "wait_signature",
    "since_last_progress",
    "snapshot_of",
]


@dataclass(frozen=True)
class Thresholds:
    gpu_memory_mib: float = 64.0  # allocator noise stays below this; a weight shard or KV pool does not
    rss_mib: float = 32.0  # the CPU lab's KV pool and weights show up as RSS, not GPU memory
    io_bytes: int = 1 << 20  # page-cache reads of weights; logging and /proc reads stay below
    cpu_s: float = 0.05  # CPU time a rank must burn between two stack samples to count
    compiler_cpu_s: float = 0.01


@dataclass(frozen=True)
class ProcSample:
    """The movable numbers of one process."""

    key: str  # rank label, or "pid:N" for a process without a rank
    role: str
    cpu_time_s: float | None = None
    rss_mib: float | None = None
    io_bytes: int | None = None
    alive: bool = True


@dataclass(frozen=True)
class StackMark:
    """The latest stack sample of one rank: its number, a signature, and the rank's CPU time then."""

    sample: int
    signature: str
    cpu_time_s: float | None = None
    t: float | None = None  # watch time the sample was taken: a change between two marks happened after the first
    where: str = ""  # every thread's frames, idle ones too (`wait_signature`): how long a process shows one wait
    threads: Mapping[str, tuple[str, bool]] = field(default_factory=dict)  # `thread_marks`: what moved, per thread


@dataclass(frozen=True)
class Snapshot:
    t: float  # seconds, any monotonic origin
    log_bytes: int = 0  # raw bytes read from the log so far: a new line or a tqdm `\r` update moves it
    # lines read so far that were news (parse.repeats.LineNews: a new kind of line or a moved
    # counter); when set, it decides "log" instead of the bytes: a wait repeated is no progress
    log_news: int | None = None
    gpu_used_mib: Mapping[int, float] = field(default_factory=dict)  # GPU index -> used MiB
    procs: Mapping[str, ProcSample] = field(default_factory=dict)  # ProcSample.key -> sample
    compilers: Mapping[int, float] = field(default_factory=dict)  # pid of an alive compiler -> cpu time
    stacks: Mapping[str, StackMark] = field(default_factory=dict)  # rank label -> latest mark


def progress_signals(prev: Snapshot | None, cur: Snapshot, limits: Thresholds = Thresholds()) -> tuple[str, ...]:
    """What moved between two snapshots, e.g. ("log", "gpu_memory", "rss:TP0"); () when nothing."""
    if prev is None:
        return ()
    signals: list[str] = []
    if _log_moved(prev, cur):
        signals.append("log")
    if _gpu_moved(prev.gpu_used_mib, cur.gpu_used_mib, limits.gpu_memory_mib):
        signals.append("gpu_memory")
    if _compiler_busy(prev.compilers, cur.compilers, limits.compiler_cpu_s):
        signals.append("compiler")
    signals.extend(_proc_signals(prev.procs, cur.procs, limits))
    signals.extend(_stack_signals(prev.stacks, cur.stacks, limits.cpu_s))
    return tuple(signals)


# How often the first look reads the cheap sources again (the log, the known processes' counters,
# GPU memory) to end early on motion; a stack round is too dear for that and is not taken again.
FIRST_LOOK_POLL_S = 0.1


def first_look_moved(baseline: Snapshot | None, now: Snapshot, limits: Thresholds = Thresholds()) -> bool:
    """Something moved since the first look's baseline: the look may end now. Its verdict is the
    one a full look would give, since every signal but a changed RSS or GPU memory only grows
    (CPU time, reads, log news) and stays past its threshold at the look's end; a look that sees
    nothing move waits its whole length, as "nothing moved" needs."""
    return bool(progress_signals(baseline, now, limits))


def since_last_progress(last_progress_t: float | None, started_t: float, now: float) -> float:
    """Seconds since something last moved; from the start of watching when nothing has yet."""
    origin = started_t if last_progress_t is None else last_progress_t
    return max(0.0, now - origin)


def _log_moved(prev: Snapshot, cur: Snapshot) -> bool:
    if cur.log_news is not None and prev.log_news is not None:
        return cur.log_news > prev.log_news
    return cur.log_bytes > prev.log_bytes


def _gpu_moved(prev: Mapping[int, float], cur: Mapping[int, float], limit: float) -> bool:
    return any(index in prev and abs(used - prev[index]) > limit for index, used in cur.items())


def _compiler_busy(prev: Mapping[int, float], cur: Mapping[int, float], limit: float) -> bool:
    # a compiler seen for the first time counts once it has used CPU; a known one must keep using it
    return any(cpu - prev.get(pid, 0.0) >= limit for pid, cpu in cur.items())


def _proc_signals(prev: Mapping[str, ProcSample], cur: Mapping[str, ProcSample], limits: Thresholds) -> list[str]:
    signals: list[str] = []
    for key, now in cur.items():
        before = prev.get(key)
        if before is None or not now.alive or now.role in ("compiler", _HELPER):
            continue
        if _grew(before.rss_mib, now.rss_mib, limits.rss_mib, absolute=True):
            signals.append(f"rss:{key}")
        if _grew(before.io_bytes, now.io_bytes, limits.io_bytes):
            signals.append(f"io:{key}")
    return signals


def _grew(before: float | None, now: float | None, limit: float, *, absolute: bool = False) -> bool:
    if before is None or now is None:
        return False
    delta = abs(now - before) if absolute else now - before  # RSS may also fall (a freed staging buffer)
    return delta > limit


def _stack_signals(prev: Mapping[str, StackMark], cur: Mapping[str, StackMark], cpu_limit: float) -> list[str]:
    """A rank whose CPU time grew while its stack changed is computing; the same stack with CPU
    growing is a spin-wait (a busy synchronize, a NCCL poll) and does not count."""
    signals: list[str] = []
    for label, mark in cur.items():
        before = prev.get(label)
        if before is None or mark.sample == before.sample:
            continue
        if not (_threads_moved(before.threads, mark.threads) if before.threads and mark.threads
                else mark.signature != before.signature):
            continue
        if _grew(before.cpu_time_s, mark.cpu_time_s, cpu_limit):
            signals.append(f"stack:{label}")
    return signals


def _threads_moved(before: Mapping[str, tuple[str, bool]], now: Mapping[str, tuple[str, bool]]) -> bool:
    """A thread's frames changed while it was active in one of the two samples. A thread idle in
    both (a watchdog that sleeps, wakes, runs a dump, sleeps: its frames change, it computes
    nothing) does not count; nor does one whose frames stayed while py-spy's idle flag flipped."""
    for key in before.keys() | now.keys():
        a, b = before.get(key), now.get(key)
        if a is None or b is None:
            if (a or b or ("", False))[1]:
                return True  # an active thread came or went
        elif a[0] != b[0] and (a[1] or b[1]):
            return True
    return False


# ---------------------------------------------------------------- building snapshot parts


def proc_samples(records: Iterable[ProcessRecord]) -> dict[str, ProcSample]:
    """The movable numbers of each process, keyed by rank (or pid for processes without one)."""
    out: dict[str, ProcSample] = {}
    for record in records:
        key = record.rank or f"pid:{record.pid}"
        if key in out and not record.alive:
            continue  # a dead earlier holder of a rank label never hides the live one
        role = _HELPER if _helper(record) else record.role
        out[key] = ProcSample(key, role, record.cpu_time_s, record.rss_mib, record.io_read_bytes, record.alive)
    return out


_HELPER = "helper"


def _helper(record: ProcessRecord) -> bool:
    """A process of the tree that is neither the engine's nor a rank to be (an untitled
    multiprocessing child): a shell, a debugger the engine runs on itself (SGLang's soft watchdog
    runs `py-spy dump --native` every few seconds). Its memory and reads are its own work, not
    the start's."""
    return record.role == "other" and "multiprocessing" not in (record.cmdline or "")


def compiler_cpu(records: Iterable[ProcessRecord]) -> dict[int, float]:
    """pid -> cpu time of each alive compiler child (nvcc, ninja, cicc, ...)."""
    return {r.pid: r.cpu_time_s or 0.0 for r in records if r.role == "compiler" and r.alive}


def motion_signature(stack: ProcessStack) -> str:
    """Every thread's frames with line numbers: Python code that moves changes it, a wait does not."""
    threads = sorted(
        ";".join(f"{f.qualname}@{f.file}:{f.line}" for f in thread.frames) for thread in stack.threads
    )
    return "|".join(threads)


def thread_marks(stack: ProcessStack) -> dict[str, tuple[str, bool]]:
    """Per thread: its frames and whether py-spy saw it active (unknown counts as active)."""
    return {str(thread.thread_id if thread.thread_id is not None else f"{thread.name}#{index}"):
            (";".join(f"{f.qualname}@{f.file}:{f.line}" for f in thread.frames), thread.active is not False)
            for index, thread in enumerate(stack.threads)}


def wait_signature(stack: ProcessStack) -> str:
    """Every thread's frames, idle ones too: the same wait seen again (the final blocker's for_s,
    and a deadlock confirmed in two rounds) must not mistake one idle wait for another."""
    return "|".join(sorted(";".join(f"{f.qualname}@{f.file}:{f.line}" for f in thread.frames) for thread in stack.threads))


def snapshot_of(t: float, log_bytes: int, log_news: int, gpu: GpuSample | None, procs: Iterable[ProcessRecord],
                stacks: Mapping[str, StackMark]) -> Snapshot:
    """The movable numbers of one tick: the log's, the newest GPU sample's, the processes', the stacks'."""
    procs = list(procs)
    used = {g.index: g.memory_used_mib for g in gpu.gpus if g.memory_used_mib is not None} if gpu else {}
    return Snapshot(t=t, log_bytes=log_bytes, log_news=log_news, gpu_used_mib=used, procs=proc_samples(procs),
                    compilers=compiler_cpu(procs), stacks=dict(stacks))


class ProgressTracker:
    """What moved from tick to tick: the last snapshot, when something last moved, the recent signals."""

    def __init__(self, thresholds: Thresholds = Thresholds(), recent_s: float = 10.0) -> None:
        self.thresholds, self.recent_s = thresholds, recent_s
        self.last: Snapshot | None = None
        self._compared = False  # two snapshots were compared: "nothing moved" now means something
        self._moved_t: float | None = None
        self._signals: dict[str, float] = {}  # signal -> t last seen

    def update(self, snapshot: Snapshot) -> list[Motion]:
        """Compare with the last snapshot; returns the real progress, dated (see `motions`)."""
        signals = progress_signals(self.last, snapshot, self.thresholds)
        moved = motions(self.last, signals)
        self._compared = self._compared or self.last is not None
        self.last = snapshot
        if signals:
            self._moved_t = snapshot.t
            self._signals.update(dict.fromkeys(signals, snapshot.t))
        horizon = snapshot.t - self.recent_s
        self._signals = {s: seen for s, seen in self._signals.items() if seen >= horizon}
        return moved

    def moved_since_last(self, snapshot: Snapshot) -> bool:
        """Something moved since the last snapshot, which stays the baseline (the first look's
        early end: `first_look_moved`)."""
        return first_look_moved(self.last, snapshot, self.thresholds)

    def since_last_progress(self, t: float, quiet_before_s: float) -> float:
        """Seconds since anything moved; when nothing has since we came, since the log last moved
        before we came (`quiet_before_s`) or earlier."""
        if self._moved_t is None and self._compared:
            return t + quiet_before_s
        return since_last_progress(self._moved_t, 0.0, t)

    def recent_signals(self) -> tuple[str, ...]:
        return tuple(sorted(self._signals))


def motions(before: Snapshot | None, signals: Sequence[str]) -> list[Motion]:
    """Real progress with the start of the interval it moved in; plain log growth is not
    (a warning repeated forever moves the log); a phase line is (logfollow.py)."""
    if before is None:
        return []
    out = []
    for signal in signals:
        if signal == "log":
            continue
        mark = before.stacks.get(signal[6:]) if signal.startswith("stack:") else None
        since = mark.t if mark is not None and mark.t is not None else before.t
        out.append(Motion(signal, since))
    return out
