"""What a caller that classifies one growing log tick after tick keeps between its calls.

The classifier is pure: `classify(evidence, rules, now, memo=None)` touches nothing that outlives
the call. A live watch loop classifies the newest 5 000 log lines every second; searching and
parsing them all again each tick costs seconds of CPU on long lines (probe L8). So the watcher
creates one `ScanMemo` per watched server and hands it to every call: the chunked log search
(classify.logscan) and the failure reader (parse.failures) then work only on what changed. A memo
is only ever reused for the very same line objects, so the verdict is the same with it, with
another memo, or without one (offline diagnose, eval, the API classifying a bundle).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hangwatch.classify.verdict.logscan import ChunkMemo
from hangwatch.parse.failures import FailureMemo

__all__ = ["ScanMemo"]


@dataclass(eq=False)
class ScanMemo:
    """One watched server's log caches; create one per log and keep it for as long as it is watched."""

    chunks: ChunkMemo = field(default_factory=ChunkMemo)
    failures: FailureMemo = field(default_factory=FailureMemo)
