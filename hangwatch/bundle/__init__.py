"""The bundle format both ways (docs/bundle-format.md): read a directory or `.tar.gz` into
`Evidence` (and what the watch recorded for the page), write one. Archives are checked before
anything is read from them."""

from hangwatch.bundle.archive import MAX_BUNDLE_BYTES, read_bundle_files
from hangwatch.bundle.read import FORMAT, evidence_from_files, parse_meta, read_bundle
from hangwatch.bundle.recorded import Recorded, read_recorded
from hangwatch.bundle.write import bundle_tarball_bytes, gpus_json, write_bundle

__all__ = [
    "FORMAT", "MAX_BUNDLE_BYTES", "Recorded", "bundle_tarball_bytes", "evidence_from_files", "gpus_json",
    "parse_meta", "read_bundle", "read_bundle_files", "read_recorded", "write_bundle",
]  # fmt: skip
