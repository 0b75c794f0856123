"""The bundle format both ways (docs/bundle-format.md): read a directory or `.tar.gz` into
`Evidence`, write one. Archives are checked before anything is read from them."""

from hangwatch.bundle.archive import MAX_BUNDLE_BYTES, read_bundle_files
from hangwatch.bundle.read import FORMAT, evidence_from_files, parse_meta, read_bundle
from hangwatch.bundle.write import bundle_tarball_bytes, write_bundle

__all__ = [
    "FORMAT", "MAX_BUNDLE_BYTES", "bundle_tarball_bytes", "evidence_from_files", "parse_meta", "read_bundle",
    "read_bundle_files", "write_bundle",
]  # fmt: skip
