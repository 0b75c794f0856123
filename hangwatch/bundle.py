"""Evidence bundles (shared/BUNDLE.md): read a directory or `.tar.gz` into `Evidence`, write one.

    read_bundle(path) -> Evidence                  BundleError when it is not a bundle at all
    read_bundle_files(path) -> {name: bytes}       the files, archive members checked
    evidence_from_files(files) -> Evidence          pure: bytes in, Evidence out
    write_bundle(files, dest) -> Path               a directory, or a .tar.gz when dest says so
    bundle_tarball_bytes(files) -> bytes            the .tar.gz for `GET /bundle`

Only meta.json is required. A malformed optional file (bad JSON in procs.json, say) becomes a
`Missing` entry and the rest is still read; the classifier itself notes files that are absent.
Archives are read in memory, never extracted: members with absolute paths, `..` or links that
leave the bundle are refused, and the total size is capped.
"""

from __future__ import annotations

import io
import json
import os
import posixpath
import re
import shlex
import tarfile
import time
import zlib
from dataclasses import MISSING, fields, replace
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Mapping, TypeVar

from hangwatch.engines import get_engine, guess_engine
from hangwatch.errors import BundleError
from hangwatch.flags import parse_flags, server_port
from hangwatch.logs import read_log_lines
from hangwatch.model import (
    Evidence, GpuInfo, GpuProcess, GpuSample, LogLine, Missing, PhaseEvent, ProcessRecord,
    ProcessStack, Source,
)  # fmt: skip
from hangwatch.redact import redact_cmdline, redact_env_text
from hangwatch.sources.ports import parse_ss
from hangwatch.stacks import label_and_sample, parse_stack_file

__all__ = [
    "FORMAT", "MAX_BUNDLE_BYTES", "bundle_tarball_bytes", "evidence_from_files", "read_bundle",
    "read_bundle_files", "write_bundle",
]  # fmt: skip

FORMAT = "hangwatch-bundle/1"
MAX_BUNDLE_BYTES = 512 * 1024 * 1024  # logs are tails of a few MiB; anything near this is not a bundle
MAX_FILES = 20_000
_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")
_T = TypeVar("_T")
_DIGITS = re.compile(r"(\d+)")


# ---------------------------------------------------------------- reading


def read_bundle(path: str | Path) -> Evidence:
    """The evidence in a bundle directory or `.tar.gz`; `BundleError` names the path and the problem."""
    p = Path(path)
    files = read_bundle_files(p)
    try:
        return evidence_from_files(files)
    except BundleError as exc:
        raise BundleError(f"{p}: {exc}") from None


def read_bundle_files(path: Path) -> dict[str, bytes]:
    """`{"meta.json": b"...", "stacks/TP0.json": b"..."}`, with the top-level folder removed."""
    if not path.exists():
        raise BundleError(f"bundle not found: {path}")
    if path.is_dir():
        return _strip_top(_read_dir(path))
    if path.is_file():
        return _strip_top(_read_archive(path))
    raise BundleError(f"{path} is not a directory or a .tar.gz archive")


def _read_dir(root: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    budget = _Budget()
    real_root = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root):  # followlinks=False: linked dirs are not entered
        dirnames.sort()
        for filename in sorted(filenames):
            path = Path(dirpath, filename)
            rel = path.relative_to(root).as_posix()
            if path.is_symlink() and not path.resolve().is_relative_to(real_root):
                raise BundleError(f"{rel} is a link to {os.readlink(path)}, outside the bundle")
            if not path.is_file():
                continue  # fifos, sockets, dangling links
            budget.add(rel, path.stat().st_size)
            try:
                files[rel] = path.read_bytes()
            except OSError as exc:
                raise BundleError(f"cannot read {rel}: {exc.strerror or exc}") from exc
    return files


def _read_archive(path: Path) -> dict[str, bytes]:
    try:
        with tarfile.open(path, "r:*") as tar:
            return _read_members(tar)
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        if path.name.endswith(_ARCHIVE_SUFFIXES):
            raise BundleError(f"cannot read archive {path}: {exc}") from exc
        raise BundleError(f"{path} is not a bundle: expected a directory or a .tar.gz archive") from exc


def _read_members(tar: tarfile.TarFile) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    budget = _Budget()
    for member in tar:
        name = _safe_name(member.name)
        if member.issym() or member.islnk():
            _check_link(name, member)
            continue  # a bundle is plain files; a link inside it adds nothing
        if not member.isfile():
            continue
        budget.add(name, member.size)
        handle = tar.extractfile(member)
        if handle is not None:
            files[name] = handle.read(member.size)
    return files


def _safe_name(name: str) -> str:
    """A member name relative to the archive root; absolute paths and `..` are refused."""
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if name.startswith(("/", "\\")) or (parts and parts[0].endswith(":")) or ".." in parts:
        raise BundleError(f"refusing archive member {name!r}: absolute path or '..' (path traversal)")
    return "/".join(p for p in parts if p != ".")


def _check_link(name: str, member: tarfile.TarInfo) -> None:
    # a symlink's target is relative to its own folder; a hard link's to the archive root
    base = posixpath.dirname(name) if member.issym() else ""
    target = posixpath.normpath(posixpath.join(base, member.linkname))
    if member.linkname.startswith("/") or target == ".." or target.startswith("../"):
        raise BundleError(f"refusing archive member {name!r}: link to {member.linkname!r} leaves the bundle")


class _Budget:
    """Caps the number and total size of files read (a tar bomb, or the wrong directory)."""

    def __init__(self) -> None:
        self.count, self.size = 0, 0

    def add(self, name: str, size: int) -> None:
        self.count, self.size = self.count + 1, self.size + size
        if self.count > MAX_FILES:
            raise BundleError(f"more than {MAX_FILES} files (at {name}): not a bundle")
        if self.size > MAX_BUNDLE_BYTES:
            raise BundleError(f"larger than {MAX_BUNDLE_BYTES // 2**20} MiB (at {name}): not a bundle")


def _strip_top(files: dict[str, bytes]) -> dict[str, bytes]:
    """Drop the one top-level folder (`bundle-x/meta.json` -> `meta.json`) when meta.json is below it."""
    if "meta.json" in files or not files:
        return files
    tops = {name.split("/", 1)[0] for name in files}
    if len(tops) != 1 or not all("/" in name for name in files):
        return files
    return {name.split("/", 1)[1]: data for name, data in files.items()}


# ---------------------------------------------------------------- files -> Evidence


def evidence_from_files(files: Mapping[str, bytes]) -> Evidence:
    """Evidence from a bundle's files. Only a missing or invalid meta.json raises `BundleError`."""
    meta = parse_meta(files.get("meta.json"))
    missing: list[Missing] = []
    log = read_log_lines(files["server.log"]) if "server.log" in files else ()
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
        progress_signals=tuple(str(s) for s in meta.get("progress_signals") or () if isinstance(s, str)),
        server_port=_server_port(flags, engine, cmdline),
    )


def _recorded_missing(meta: Mapping[str, Any]) -> tuple[Missing, ...]:
    """What the live collector could not read (meta.json "missing", an extension of BUNDLE.md)."""
    entries = meta.get("missing")
    if not isinstance(entries, list):
        return ()
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
    if engine is not None:
        return server_port(flags, engine)
    port = flags.get("port")
    return int(port) if isinstance(port, str) and port.strip().isdigit() else None


def _optional(files: Mapping[str, bytes], name: str, source: str, parse: Callable[[Any], _T], missing: list[Missing]) -> _T | None:
    """Parse a JSON file of the bundle; a malformed one is recorded as Missing, never fatal."""
    if name not in files:
        return None
    try:
        return parse(json.loads(files[name].decode("utf-8-sig")))
    except (UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError) as exc:
        missing.append(Missing(source, f"{name} could not be read: {exc}", f"check {name} against BUNDLE.md"))
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
    except (TypeError, ValueError):
        return None


def _float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


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


def _stacks(files: Mapping[str, bytes], missing: list[Missing]) -> tuple[ProcessStack, ...]:
    names = sorted((n for n in files if n.startswith("stacks/") and not n.endswith("/")), key=_stack_order)
    stacks: list[ProcessStack] = []
    for name in names:
        found = parse_stack_file(name, files[name], Source(file=name))
        if not found and files[name].strip():
            missing.append(Missing("stacks", f"{name}: not a stack format hangwatch reads", "py-spy dump --pid PID [--json]"))
        stacks.extend(found)
    return tuple(stacks)


def _stack_order(name: str) -> tuple[Any, ...]:
    """TP2 before TP10, samples in order: digits compare as numbers."""
    label, sample = label_and_sample(name)
    key = tuple(int(part) if part.isdigit() else part for part in _DIGITS.split(label))
    return (tuple((isinstance(k, int), k) for k in key), sample, name)


# ---------------------------------------------------------------- writing


def write_bundle(files: Mapping[str, bytes], dest: Path) -> Path:
    """Write `files` as a directory at `dest`, or as a `.tar.gz` when its name ends so."""
    dest = Path(dest)
    prepared = _prepare(files)
    if dest.name.endswith((".tar.gz", ".tgz")):
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(bundle_tarball_bytes(prepared, top=_top_name(dest)))
        return dest
    for name, data in prepared.items():
        path = dest / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return dest


def bundle_tarball_bytes(files: Mapping[str, bytes], top: str = "hangwatch-bundle", mtime: float | None = None) -> bytes:
    """A `.tar.gz` of `files` under one top-level folder `top`, secrets redacted."""
    prepared = _prepare(files)
    stamp = int(time.time() if mtime is None else mtime)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in sorted(prepared):
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mtime, info.mode = len(prepared[name]), stamp, 0o644
            tar.addfile(info, io.BytesIO(prepared[name]))
    return buf.getvalue()


def _prepare(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """Names checked, env.txt and cmdline.txt redacted (a bundle goes into bug reports)."""
    if "meta.json" not in files:
        raise BundleError("refusing to write a bundle without meta.json")
    out: dict[str, bytes] = {}
    for name, data in files.items():
        safe = _safe_name(name)
        if safe == "env.txt":
            data = redact_env_text(_text(data)).encode("utf-8")
        elif safe == "cmdline.txt":
            data = redact_cmdline(_text(data)).encode("utf-8")
        out[safe] = data
    return out


def _top_name(dest: Path) -> str:
    name = dest.name
    for suffix in (".tar.gz", ".tgz"):
        name = name.removesuffix(suffix)
    return name or "hangwatch-bundle"
