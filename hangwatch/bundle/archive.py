"""Bundle files from a directory or a `.tar.gz`, read in memory and never extracted: members with
absolute paths, `..` or links that leave the bundle are refused, and the total size is capped.

    read_bundle_files(path) -> {name: bytes}
"""

from __future__ import annotations

import os
import posixpath
import tarfile
import zlib
from pathlib import Path, PurePosixPath

from hangwatch.errors import BundleError

__all__ = ["MAX_BUNDLE_BYTES", "MAX_FILES", "read_bundle_files", "safe_name"]

MAX_BUNDLE_BYTES = 512 * 1024 * 1024  # logs are tails of a few MiB; anything near this is not a bundle
MAX_FILES = 20_000
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
        name = safe_name(member.name)
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


def safe_name(name: str) -> str:
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
