"""Bundle files -> `Evidence` (the bundle format: docs/bundle-format.md).

    read_bundle(path) -> Evidence                  BundleError when it is not a bundle at all
    evidence_from_files(files) -> Evidence          pure: bytes in, Evidence out

Only meta.json is required. A malformed optional file (bad JSON in procs.json, say) becomes a
`Missing` entry and the rest is still read; the classifier itself notes files that are absent.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from hangwatch.bundle.archive import read_bundle_files
from hangwatch.engines import get_engine, guess_engine, server_port
from hangwatch.errors import BundleError
from hangwatch.model import (
    EndpointAnswer,
    Evidence,
    Fact,
    Finding,
    GpuInfo,
    GpuProcess,
    GpuSample,
    LogLine,
    Missing,
    PhaseEvent,
    ProcessRecord,
    ProcessStack,
    Source,
)  # fmt: skip
from hangwatch.parse.flags import parse_flags
from hangwatch.parse.logs import read_log_lines
from hangwatch.parse.ss import parse_ss
from hangwatch.parse.stacks import label_and_sample, parse_stack_file
from hangwatch.redact import redact_cmdline, redact_env_text

__all__ = ["FORMAT", "evidence_from_files", "parse_meta", "read_bundle"]

FORMAT = "hangwatch-bundle/1"
_T = TypeVar("_T")
_DIGITS = re.compile(r"(\d+)")


def read_bundle(path: str | Path) -> Evidence:
    """The evidence in a bundle directory or `.tar.gz`; `BundleError` names the path and the problem."""
    p = Path(path)
    files = read_bundle_files(p)
    try:
        return evidence_from_files(files)
    except BundleError as exc:
        raise BundleError(f"{p}: {exc}") from None


# ---------------------------------------------------------------- files -> Evidence


def evidence_from_files(files: Mapping[str, bytes]) -> Evidence:
    """Evidence from a bundle's files. Only a missing or invalid meta.json raises `BundleError`."""
    meta = parse_meta(files.get("meta.json"))
    missing: list[Missing] = []
    log = _log_lines(files["server.log"], missing) if "server.log" in files else ()
    cmdline = redact_cmdline(_text(files.get("cmdline.txt")).strip()) or None  # `--api-key X` never reaches a sink
    flags = parse_flags(cmdline) if cmdline else {}
    engine = _engine_name(meta, log, cmdline, missing)
    ports_text = _text(files["ports.txt"]) if "ports.txt" in files else None
    return Evidence(
        meta=meta,
        engine=engine,
        log=log,
        phases=_phases(engine, log),
        cmdline=cmdline,
        flags=flags,
        env=_env(_text(files.get("env.txt"))),
        procs=tuple(_optional(files, "procs.json", "procs", _procs, missing) or ()),
        ports=tuple(parse_ss(ports_text)) if ports_text else (),
        ports_text=ports_text,
        gpus=tuple(_optional(files, "gpus.json", "gpus", _gpus, missing) or ()),
        stacks=_stacks(files, missing),
        dmesg=tuple(line for line in _text(files.get("dmesg.txt")).splitlines() if line.strip()),
        missing=tuple(missing) + _recorded_missing(meta),
        observed_for_s=_float(meta.get("observed_for_s")),
        since_last_progress_s=_float(meta.get("since_last_progress_s")),
        log_quiet_s=_float(meta.get("log_quiet_s")),
        progress_signals=tuple(s for s in _list(meta.get("progress_signals")) if isinstance(s, str)),
        server_port=_server_port(flags, engine, cmdline),
        endpoint=_endpoint(meta),
        preflight=_preflight(files.get("preflight.json"), missing),
        stop=meta["stop"] if isinstance(meta.get("stop"), str) else None,
    )


MAX_LOG_BYTES = 8 * 2**20  # offline, like live: the start and the end of the log tell the story
MAX_LOG_LINES = 100_000
_HEAD_SHARE = 8  # 1/8 of the budget for the log's start (phases), the rest for its end (the hang)
MAX_RECORDED_MISSING = 100


def _log_lines(data: bytes, missing: list[Missing]) -> tuple[LogLine, ...]:
    """The log's lines; a log over MAX_LOG_BYTES or MAX_LOG_LINES keeps its start and its end only.

    Without this a 73 KB .tar.gz of 16 MiB of newlines costs gigabytes: every line becomes an object.
    """
    if len(data) <= MAX_LOG_BYTES and data.count(b"\n") <= MAX_LOG_LINES:
        return read_log_lines(data)
    head = _first_lines(data[: MAX_LOG_BYTES // _HEAD_SHARE], MAX_LOG_LINES // _HEAD_SHARE)
    start = max(len(head), len(data) - MAX_LOG_BYTES)
    if start > len(head) and data[start - 1 : start] != b"\n":  # begin the tail on a line start
        newline = data.find(b"\n", start)
        start = len(data) if newline < 0 else newline + 1
    tail = _last_lines(data[start:], MAX_LOG_LINES - MAX_LOG_LINES // _HEAD_SHARE)
    tail_start = len(data) - len(tail)
    first_skipped = head.count(b"\n") + 1
    tail_lineno = data.count(b"\n", 0, tail_start) + 1
    missing.append(Missing("log", f"server.log: lines {first_skipped}-{tail_lineno - 1} "
                           f"({(tail_start - len(head)) // 1024} KiB) not read; the log's start and end are",
                           "a bundle's log is meant to be a tail of a few MiB"))
    return read_log_lines(head) + read_log_lines(tail, tail_lineno)


def _first_lines(data: bytes, count: int) -> bytes:
    end = -1
    for _ in range(count):
        found = data.find(b"\n", end + 1)
        if found < 0:
            break
        end = found
    return data[: end + 1]


def _last_lines(region: bytes, count: int) -> bytes:
    """The last `count` lines of `region`, which starts on a line start."""
    pos = len(region) - 1 if region.endswith(b"\n") else len(region)
    for _ in range(count):
        found = region.rfind(b"\n", 0, pos)
        if found < 0:
            return region
        pos = found
    return region[pos + 1 :]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _endpoint(meta: Mapping[str, Any]) -> EndpointAnswer | None:
    """The engine endpoint's answer (meta.json "endpoint", an extension of docs/bundle-format.md)."""
    entry = meta.get("endpoint")
    if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
        return None
    status = entry.get("status")
    return EndpointAnswer(entry["url"], status if isinstance(status, int) else None,
                          entry.get("ready") is True, str(entry.get("detail") or ""))


def _preflight(data: bytes | None, missing: list[Missing]) -> tuple[Finding, ...]:
    """preflight.json (an extension of docs/bundle-format.md): what `hangwatch preflight` found before the launch."""
    if data is None:
        return ()
    try:
        doc = json.loads(data)
        return tuple(_finding(raw) for raw in doc.get("findings") or ())
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        missing.append(Missing("preflight", f"preflight.json unreadable: {exc}"))
        return ()


def _finding(raw: Mapping[str, Any]) -> Finding:
    facts = tuple(Fact(str(e["text"]), Source(str(e.get("source") or "preflight.json"))) for e in raw.get("evidence") or ())
    return Finding(check=str(raw.get("check") or "preflight"), cause=str(raw["cause"]), severity=str(raw["severity"]),
                   title=str(raw.get("title") or ""), evidence=facts, remedy=str(raw.get("remedy") or ""),
                   message=raw.get("message"))  # fmt: skip


def _recorded_missing(meta: Mapping[str, Any]) -> tuple[Missing, ...]:
    """What the live collector could not read (meta.json "missing", an extension of docs/bundle-format.md)."""
    entries = meta.get("missing")
    if not isinstance(entries, list):
        return ()
    entries = entries[:MAX_RECORDED_MISSING]
    return tuple(
        Missing(str(e["source"]), str(e.get("reason") or ""), e.get("hint"))
        for e in entries if isinstance(e, dict) and e.get("source")
    )


def parse_meta(data: bytes | None) -> dict[str, Any]:
    if data is None:
        raise BundleError(f'no meta.json (a bundle needs one holding {{"format": "{FORMAT}"}})')
    try:
        meta = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BundleError(f"meta.json is not valid JSON: {exc}") from None
    except RecursionError:
        raise BundleError("meta.json is nested too deeply to be a bundle's metadata") from None
    if not isinstance(meta, dict):
        raise BundleError(f"meta.json must hold a JSON object, not {type(meta).__name__}")
    fmt = meta.get("format")
    if fmt is None:
        raise BundleError(f'meta.json has no "format" (expected "{FORMAT}")')
    if fmt != FORMAT:
        raise BundleError(f"meta.json format {fmt!r} is not known (this hangwatch reads {FORMAT!r})")
    return meta


def _text(data: bytes | None) -> str:
    return data.decode("utf-8", "replace") if data else ""


def _engine_name(meta: Mapping[str, Any], log: tuple[LogLine, ...], cmdline: str | None, missing: list[Missing]) -> str | None:
    name = meta.get("engine")
    if isinstance(name, str) and name.strip():
        try:
            return get_engine(name).name
        except ValueError as exc:  # a bundle from another server (xinference, ...): guess from its log
            missing.append(Missing("log", f"meta.json: {exc}; the engine is guessed from the log"))
    return guess_engine(log, cmdline)


def _phases(engine: str | None, log: tuple[LogLine, ...]) -> tuple[PhaseEvent, ...]:
    return get_engine(engine).phase_events(log) if engine and log else ()


def _server_port(flags: Mapping[str, str | bool], engine: str | None, cmdline: str | None) -> int | None:
    if cmdline is None:
        return None  # without the command line the engine's default port is only a guess
    return server_port(flags, engine)


def _optional(files: Mapping[str, bytes], name: str, source: str, parse: Callable[[Any], _T], missing: list[Missing]) -> _T | None:
    """Parse a JSON file of the bundle; a malformed one is recorded as Missing, never fatal."""
    if name not in files:
        return None
    try:
        return parse(json.loads(files[name].decode("utf-8-sig")))
    except (UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        missing.append(Missing(source, f"{name} could not be read: {exc}", f"check {name} against docs/bundle-format.md"))
        return None
    except RecursionError:
        missing.append(Missing(source, f"{name} could not be read: nested too deeply", f"check {name} against docs/bundle-format.md"))
        return None


def _env(text: str) -> dict[str, str]:
    """`KEY=VALUE` lines, every one kept (a bundle's env.txt is already a selection), secrets redacted."""
    env: dict[str, str] = {}
    for line in redact_env_text(text).splitlines():
        name, sep, value = line.removeprefix("export ").partition("=")
        if sep and name.strip() and not name.lstrip().startswith("#"):
            env[name.strip()] = _unquote(value.strip())
    return env


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" else value


# ---------------------------------------------------------------- procs.json, gpus.json


def _procs(data: Any) -> list[ProcessRecord]:
    items = data.get("procs", data.get("processes")) if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ValueError("expected a list of processes")
    return [_process(item) for item in items if isinstance(item, dict) and _int(item.get("pid")) is not None]


def _process(item: Mapping[str, Any]) -> ProcessRecord:
    cmdline = item.get("cmdline")
    if isinstance(cmdline, list):  # psutil's cmdline() is a list
        cmdline = shlex.join(str(arg) for arg in cmdline)
    wchan = item.get("wchan")
    wchan = tuple(str(w) for w in wchan) if isinstance(wchan, list) else ()
    values = dict(item, cmdline=str(cmdline or ""), role=str(item.get("role") or "other"), wchan=wchan)
    return _build(ProcessRecord, values)


def _build(cls: type[_T], values: Mapping[str, Any]) -> _T:
    """A model dataclass from a JSON object: known fields only, each coerced to its annotated type."""
    kwargs: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        optional = "None" in str(f.type)
        if f.name in values:
            coerced = _COERCE.get(str(f.type).split(" |")[0], lambda v: v)(values[f.name])
            if coerced is not None or optional:
                kwargs[f.name] = coerced
        elif optional and f.default is MISSING and f.default_factory is MISSING:
            kwargs[f.name] = None  # `ppid` is required in the model but may be absent in a file
    return cls(**kwargs)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError, OverflowError):  # OverflowError: `Infinity` in the JSON
        return None


def _float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value) if value is not None else None
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number is None or math.isfinite(number) else None  # `Infinity`, `NaN`: no number


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


_COERCE: dict[str, Callable[[Any], Any]] = {"int": _int, "float": _float, "str": _str, "bool": bool}


def _gpus(data: Any) -> list[GpuSample]:
    samples = data.get("samples") if isinstance(data, dict) else data
    if not isinstance(samples, list):
        raise ValueError('expected {"samples": [...]}')
    return [_gpu_sample(s) for s in samples if isinstance(s, dict)]


def _gpu_sample(sample: Mapping[str, Any]) -> GpuSample:
    gpus = [g for g in sample.get("gpus") or () if isinstance(g, dict) and _int(g.get("index")) is not None]
    return GpuSample(t=_float(sample.get("t")) or 0.0, gpus=tuple(_gpu(g) for g in gpus))


def _gpu(g: Mapping[str, Any]) -> GpuInfo:
    values = {k: v for k, v in g.items() if k != "processes"}
    if values.get("compute_capability") is not None:
        values["compute_capability"] = str(values["compute_capability"])  # 9.0 written as a number
    procs = [p for p in g.get("processes") or () if isinstance(p, dict) and _int(p.get("pid")) is not None]
    gpu_procs = tuple(GpuProcess(pid=int(p["pid"]), used_mib=_float(p.get("used_mib"))) for p in procs)
    return replace(_build(GpuInfo, values), processes=gpu_procs)


# ---------------------------------------------------------------- stacks


# A py-spy dump of one process, native frames and a hundred threads included, is under 1 MiB; a
# paste of every rank a few MiB. Every line is parsed, so these bound what a bundle's stacks cost.
MAX_STACK_FILE_BYTES = 8 * 2**20
MAX_STACKS_BYTES = 24 * 2**20


def _stacks(files: Mapping[str, bytes], missing: list[Missing]) -> tuple[ProcessStack, ...]:
    names = sorted((n for n in files if n.startswith("stacks/") and not n.endswith("/")), key=_stack_order)
    stacks: list[ProcessStack] = []
    budget = MAX_STACKS_BYTES
    for name in names:
        data = _bounded_stack_file(name, files[name], min(budget, MAX_STACK_FILE_BYTES), missing)
        budget -= len(data)
        try:
            found = parse_stack_file(name, data, Source(file=name))
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError, RecursionError) as exc:
            why = "nested too deeply" if isinstance(exc, RecursionError) else f"{type(exc).__name__}: {exc}"
            missing.append(Missing("stacks", f"{name}: malformed ({why})", "py-spy dump --pid PID [--json]"))
            continue
        if not found and data.strip():
            missing.append(Missing("stacks", f"{name}: not a stack format hangwatch reads", "py-spy dump --pid PID [--json]"))
        stacks.extend(found)
    return tuple(stacks)


def _bounded_stack_file(name: str, data: bytes, limit: int, missing: list[Missing]) -> bytes:
    """`data`, or the whole lines of a text dump that fit in `limit`; JSON cannot be cut, so it is skipped."""
    if len(data) <= limit:
        return data
    bound = f"stack files are read up to {MAX_STACK_FILE_BYTES // 2**20} MiB each, {MAX_STACKS_BYTES // 2**20} MiB in all"
    cut = data.rfind(b"\n", 0, limit) + 1
    if data[:4096].lstrip()[:1] in (b"[", b"{") or cut == 0:
        missing.append(Missing("stacks", f"{name}: {len(data) // 1024} KiB, not read ({bound})", "py-spy dump --pid PID [--json]"))
        return b""
    missing.append(Missing("stacks", f"{name}: {len(data) // 1024} KiB, its first {cut // 1024} KiB read ({bound})",
                           "py-spy dump --pid PID"))
    return data[:cut]


def _stack_order(name: str) -> tuple[Any, ...]:
    """TP2 before TP10, samples in order: digits compare as numbers."""
    label, sample = label_and_sample(name)
    key = tuple(int(part) if part.isdigit() else part for part in _DIGITS.split(label))
    return (tuple((isinstance(k, int), k) for k in key), sample, name)
