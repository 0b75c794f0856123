"""The safe launch changes (hangwatch/data/remedies.yaml) as typed, validated data.

A `SafeChange` is one known-safe change of a launch for one cause on one engine: a flag added or
set, an environment variable set, an internal port swapped for a free one, or stale lock files
removed. Loading refuses any entry that could touch what a relaunch must never change (the model,
a parallel size, the node layout, the serving host and port): `RemedyError` names the entry and why.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from hangwatch.engines import engine_names, flag_aliases
from hangwatch.errors import HangwatchError

__all__ = [
    "ANY", "CONDITIONS", "KINDS", "NEVER_FLAGS", "NEVER_ENV", "RemedyError", "SafeChange", "Shutdown",
    "Remedies", "load_remedies", "shipped_remedies", "canonical_flag", "REMEDIES_FILE",
]

REMEDIES_FILE = Path(__file__).resolve().parent.parent / "data" / "remedies.yaml"
ANY = "any"
KINDS = ("add_flag", "set_flag", "set_env", "free_port", "remove_stale_locks")
CONDITIONS = frozenset({"single_node", "port_named_taken", "model_cached", "stale_lock_found", "env_unset"})
# never changed by a relaunch, whatever the data says (canonical names: aliases resolved to `tp` ...)
NEVER_FLAGS = frozenset({
    "model", "model-path", "model-name", "tokenizer", "tokenizer-path", "served-model-name", "revision",
    "tp", "pp", "dp", "ep", "nnodes", "node-rank", "host", "port", "api-key", "trust-remote-code",
    "data-parallel-size-local", "data-parallel-rank", "data-parallel-address",
})  # fmt: skip
NEVER_ENV = frozenset({"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "PATH", "PYTHONPATH", "LD_LIBRARY_PATH",
                       "LD_PRELOAD", "HF_TOKEN", "HOME"})
CAUSE_IDS_WITHOUT_CHANGE = ("patch_or_user_code", "shm_too_small", "driver_or_xid", "dead_rank", "unknown")


class RemedyError(HangwatchError):
    """A remedies file that cannot be used: names the file, the entry and the reason."""


def canonical_flag(name: str) -> str:
    """`--tensor_parallel_size` -> `tp`; `attention_backend` -> `attention-backend`."""
    bare = name.lstrip("-").replace("_", "-")
    return flag_aliases().get(bare, bare)


@dataclass(frozen=True)
class SafeChange:
    id: str
    engine: str  # a registered engine's name, or "any"
    cause: str
    kind: str  # one of KINDS
    flag: str | None = None  # add_flag, set_flag, free_port
    value: str | None = None  # set_flag
    env: Mapping[str, str] = field(default_factory=dict)  # set_env
    when: tuple[str, ...] = ()
    source: str = ""
    cost: str = ""

    def describe(self) -> str:
        """One line for people: `--disable-cuda-graph`, `NCCL_P2P_DISABLE=1`, ..."""
        if self.kind == "add_flag":
            return f"--{self.flag}"
        if self.kind == "set_flag":
            return f"--{self.flag} {self.value}"
        if self.kind == "set_env":
            return " ".join(f"{k}={v}" for k, v in self.env.items())
        if self.kind == "free_port":
            return f"--{self.flag} with a free port"
        return "remove stale lock files"

    def for_engine(self, engine: str | None) -> bool:
        return self.engine == ANY or self.engine == engine


@dataclass(frozen=True)
class Shutdown:
    signal: int = int(signal.SIGTERM)
    repeat_after_s: float = 0.0  # send the signal again after this long (0: once)
    grace_s: float = 10.0  # then SIGKILL the process group


@dataclass(frozen=True)
class Remedies:
    changes: tuple[SafeChange, ...]
    shutdowns: Mapping[str, Shutdown] = field(default_factory=dict)

    def for_cause(self, cause: str | None, engine: str | None) -> tuple[SafeChange, ...]:
        """The changes for this cause on this engine, the engine's own before the generic ones."""
        found = [c for c in self.changes if c.cause == cause and c.for_engine(engine)]
        return tuple(sorted(found, key=lambda c: c.engine == ANY))

    def by_id(self, change_id: str) -> SafeChange | None:
        return next((c for c in self.changes if c.id == change_id), None)

    def shutdown(self, engine: str | None) -> Shutdown:
        return self.shutdowns.get(engine or ANY) or self.shutdowns.get(ANY) or Shutdown()


def load_remedies(path: str | Path = REMEDIES_FILE, *, causes: Sequence[str] | None = None) -> Remedies:
    """Read and validate a remedies file; RemedyError on the first bad entry."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise RemedyError(f"{path}: cannot read: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("changes"), list):
        raise RemedyError(f"{path}: expected a mapping with a `changes:` list")
    known = frozenset(causes) if causes is not None else _cause_ids()
    changes = tuple(_change(path, n, raw, known) for n, raw in enumerate(doc["changes"]))
    ids = [c.id for c in changes]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise RemedyError(f"{path}: duplicate change id {', '.join(dupes)}")
    return Remedies(changes, _shutdowns(path, doc.get("shutdown") or {}))


@lru_cache(maxsize=1)
def shipped_remedies() -> Remedies:
    return load_remedies(REMEDIES_FILE)


def _cause_ids() -> frozenset[str]:
    from hangwatch.classify.causes import CAUSES

    return frozenset(CAUSES)


def _change(path: Path, n: int, raw: Any, causes: frozenset[str]) -> SafeChange:
    where = f"{path}: change {n + 1}"
    if not isinstance(raw, dict):
        raise RemedyError(f"{where}: expected a mapping")
    cid = raw.get("id")
    if not isinstance(cid, str) or not cid:
        raise RemedyError(f"{where}: `id` is required")
    where = f"{path}: change {cid!r}"
    unknown = set(raw) - {"id", "engine", "cause", "when", "source", "cost", *KINDS}
    if unknown:
        raise RemedyError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    engine, cause = raw.get("engine"), raw.get("cause")
    if engine != ANY and engine not in engine_names():
        raise RemedyError(f"{where}: engine {engine!r} is not one of {', '.join((*engine_names(), ANY))}")
    if cause not in causes:
        raise RemedyError(f"{where}: cause {cause!r} is not in docs/causes.md")
    if cause in CAUSE_IDS_WITHOUT_CHANGE:
        raise RemedyError(f"{where}: {cause} has no safe launch change (docs/remedy.md)")
    for key in ("source", "cost"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise RemedyError(f"{where}: `{key}` is required (the flag's docs or code; what it costs)")
    when = raw.get("when") or []
    if not isinstance(when, list) or not all(isinstance(w, str) and w in CONDITIONS for w in when):
        raise RemedyError(f"{where}: `when` must be a list of {', '.join(sorted(CONDITIONS))}")
    kinds = [k for k in KINDS if k in raw]
    if len(kinds) != 1:
        raise RemedyError(f"{where}: exactly one change is required, one of {', '.join(KINDS)}")
    base = SafeChange(cid, engine, cause, kinds[0], when=tuple(when), source=raw["source"].strip(), cost=raw["cost"].strip())
    return _kind(where, base, raw[kinds[0]])


def _kind(where: str, base: SafeChange, value: Any) -> SafeChange:
    from dataclasses import replace

    if base.kind in ("add_flag", "free_port"):
        return replace(base, flag=_allowed_flag(where, value))
    if base.kind == "set_flag":
        if not isinstance(value, dict) or len(value) != 1:
            raise RemedyError(f"{where}: set_flag takes one {{FLAG: VALUE}}")
        (name, flag_value), = value.items()
        return replace(base, flag=_allowed_flag(where, name), value=str(flag_value))
    if base.kind == "set_env":
        if not isinstance(value, dict) or not value:
            raise RemedyError(f"{where}: set_env takes {{VAR: VALUE, ...}}")
        bad = [k for k in value if not isinstance(k, str) or k in NEVER_ENV or not k.replace("_", "").isalnum()]
        if bad:
            raise RemedyError(f"{where}: may not set {', '.join(map(str, bad))}")
        return replace(base, env={str(k): str(v) for k, v in value.items()})
    if value is not True:
        raise RemedyError(f"{where}: remove_stale_locks takes `true`")
    return base


def _allowed_flag(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip("-"):
        raise RemedyError(f"{where}: a flag name is required")
    name = value.lstrip("-").replace("_", "-")
    if canonical_flag(name) in NEVER_FLAGS or name in NEVER_FLAGS:
        raise RemedyError(f"{where}: --{name} is never changed by a relaunch (model, parallel sizes, host, port)")
    return name


def _shutdowns(path: Path, raw: Any) -> dict[str, Shutdown]:
    if not isinstance(raw, dict):
        raise RemedyError(f"{path}: `shutdown` must map engine -> {{signal, repeat_after_s, grace_s}}")
    out = {}
    for engine, spec in raw.items():
        try:
            sig = signal.Signals[str(spec.get("signal", "SIGTERM"))]
            out[str(engine)] = Shutdown(int(sig), float(spec.get("repeat_after_s", 0)), float(spec.get("grace_s", 10)))
        except (KeyError, AttributeError, TypeError, ValueError):
            raise RemedyError(f"{path}: shutdown for {engine!r}: expected {{signal: SIGTERM, repeat_after_s: S, grace_s: S}}") from None
    return out
