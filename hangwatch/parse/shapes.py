"""A line's shape: its text with every digit made 0.

A log repeats a few shapes (a batch or progress line whose counters differ), so a search over its
distinct shapes is a search over every line for a fraction of the work. A literal with its digits
made 0 too is in a line's shape whenever it is in the line: searching shapes never misses, it only
keeps a few lines more (the skim of a big log, the classifier's chunk prefilter, the failure search).
"""

from __future__ import annotations

__all__ = ["shape", "shape_bytes"]

_ZEROS = str.maketrans("123456789", "000000000")
_BYTE_ZEROS = bytes.maketrans(b"123456789", b"000000000")


def shape(text: str) -> str:
    return text.translate(_ZEROS)


def shape_bytes(data: bytes) -> bytes:
    return data.translate(_BYTE_ZEROS)
