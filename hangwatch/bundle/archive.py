"""Bundle files from a directory or a `.tar.gz`, read in memory and never extracted: members with
absolute paths, `..` or links that leave the bundle are refused, and everything is bounded before
it costs memory or time (docs/serving.md, "Bounds"): the decompressed stream, the member count
(every kind of member), GNU long-name and pax headers (read whole by tarfile, and parsed in
quadratic time by Python < 3.11.10's tarfile), folder depth. A bundle is untrusted input: it may
come from a bug report.

    read_bundle_files(path) -> {name: bytes}

(Any one other file the user names is read by hangwatch.userfile.read_user_file.)
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import posixpath
import stat
import tarfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Any

from hangwatch.errors import BundleError

__all__ = ["MAX_BUNDLE_BYTES", "MAX_FILES", "read_bundle_files", "safe_name"]

MAX_BUNDLE_BYTES = 64 * 2**20  # decompressed; logs are tails of a few MiB, stacks a few MiB at most
MAX_FILES = 20_000  # members of any kind (folders, links, devices count too)
MAX_HEADER_BYTES = 8 * 1024  # one GNU long name or pax header; PATH_MAX is 4096
MAX_DEPTH = 32  # folders below the bundle's root
_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")


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
    """Iterative (os.walk recurses on 3.11: a 1 100-deep tree was a RecursionError), depth-capped."""
    files: dict[str, bytes] = {}
    budget = _Budget()
    real_root = root.resolve()
    pending: list[tuple[Path, int]] = [(root, 0)]
    while pending:
        folder, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise BundleError(f"{_printable(folder.relative_to(root).as_posix())}: folders nested more than {MAX_DEPTH} deep: not a bundle")
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise BundleError(f"cannot read {_printable(str(folder))}: {exc.strerror or exc}") from exc
        for entry in entries:
            path = Path(entry.path)
            rel = _printable(path.relative_to(root).as_posix())
            budget.add(rel, 0)
            if entry.is_symlink():
                if not path.resolve().is_relative_to(real_root):
                    raise BundleError(f"{rel} is a link to {_printable(os.readlink(path))}, outside the bundle")
                if entry.is_dir():
                    continue  # linked folders are not entered (a loop, or a second copy)
            if entry.is_dir():
                pending.append((path, depth + 1))
            elif entry.is_file():
                files[rel] = _read_file(path, rel, budget)
            # fifos, sockets, devices, dangling links: skipped
    return dict(sorted(files.items()))


def _read_file(path: Path, rel: str, budget: _Budget) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a file swapped for a FIFO must not block us
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fd).st_size
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return b""
            budget.add(rel, size, count=False)
            data = fh.read(size + 1)
    except OSError as exc:
        raise BundleError(f"cannot read {rel}: {exc.strerror or exc}") from exc
    budget.add(rel, max(0, len(data) - size), count=False)  # it grew while we read
    return data


def _read_archive(path: Path) -> dict[str, bytes]:
    try:
        with _decompressed(path) as stream, tarfile.open(fileobj=stream, mode="r:", tarinfo=_BoundedTarInfo) as tar:
            return _read_members(tar)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError, OSError) as exc:
        if path.name.endswith(_ARCHIVE_SUFFIXES):
            raise BundleError(f"cannot read archive {path}: {exc}") from exc
        raise BundleError(f"{path} is not a bundle: expected a directory or a .tar.gz archive") from exc


def _decompressed(path: Path) -> _CappedStream:
    """The archive's tar stream, gunzipped when it is gzip, refused past MAX_BUNDLE_BYTES of output."""
    with path.open("rb") as probe:
        magic = probe.read(6)
    if magic.startswith(b"\x1f\x8b"):
        return _CappedStream(gzip.open(path, "rb"))
    if magic.startswith(b"BZh"):
        return _CappedStream(bz2.open(path, "rb"))
    if magic.startswith(b"\xfd7zXZ"):
        return _CappedStream(lzma.open(path, "rb"))
    return _CappedStream(path.open("rb"))


class _CappedStream(io.RawIOBase):
    """A seekable view of the decompressed tar that refuses to go past MAX_BUNDLE_BYTES (a gzip bomb)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def _check(self, end: int) -> None:
        if end > MAX_BUNDLE_BYTES + 2**20:  # + the tar headers of a bundle at the cap
            raise BundleError(f"decompresses to more than {MAX_BUNDLE_BYTES // 2**20} MiB: not a bundle")

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = MAX_BUNDLE_BYTES + 2**20 + 1 - self._inner.tell()
        self._check(self._inner.tell() + min(size, 2**20))
        data: bytes = self._inner.read(size)
        self._check(self._inner.tell())
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        target = offset if whence == 0 else self._inner.tell() + offset if whence == 1 else None
        if target is None:
            raise OSError("cannot seek from the end of a compressed stream")
        self._check(target)
        return int(self._inner.seek(target))

    def tell(self) -> int:
        return int(self._inner.tell())

    def close(self) -> None:
        self._inner.close()
        super().close()


class _BoundedTarInfo(tarfile.TarInfo):
    """Refuses GNU long-name/long-link and pax headers over MAX_HEADER_BYTES before tarfile reads them."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        special = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE,
                   tarfile.SOLARIS_XHDTYPE)
        if self.type in special and self.size > MAX_HEADER_BYTES:
            raise BundleError(f"an archive header of {self.size} bytes (over {MAX_HEADER_BYTES}): not a bundle")
        member: tarfile.TarInfo = super()._proc_member(tarfile_)  # type: ignore[misc]
        return member


def _read_members(tar: tarfile.TarFile) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    budget = _Budget()
    for member in tar:
        name = safe_name(member.name)
        budget.add(name, 0)  # every member counts: 200 000 folders cost time like files do
        if member.issym() or member.islnk():
            _check_link(name, member)
            continue  # a bundle is plain files; a link inside it adds nothing
        if not member.isfile():
            continue
        budget.add(name, member.size, count=False)
        handle = tar.extractfile(member)
        if handle is not None:
            files[name] = handle.read(member.size)
    return files


def _printable(name: str) -> str:
    """A file name as text: undecodable bytes (kept by the OS as surrogates) become U+FFFD."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def safe_name(name: str) -> str:
    """A member name relative to the archive root; absolute paths and `..` are refused."""
    name = _printable(name)
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

    def add(self, name: str, size: int, *, count: bool = True) -> None:
        self.count, self.size = self.count + count, self.size + size
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
