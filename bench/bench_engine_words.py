"""What the engine words index costs: reading it once, and tracing each bundle's failures to a site.

    .venv/bin/python bench/bench_engine_words.py [CORPUS] [--repeat 3]

CORPUS defaults to the shared dev corpus (HANGWATCH_CORPUS or ../shared/corpus/dev). Prints the
index's size and site count, the CPU time of the first read (per process), and per bundle the CPU
time of `find_site` (its failures already parsed: that is the classifier's cost anyway). Asserts
nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from hangwatch.bundle import read_bundle
from hangwatch.classify.verdict.context import Context
from hangwatch.classify.verdict.pasted import with_pasted
from hangwatch.classify.verdict.raise_sites import engine_words, find_site
from hangwatch.parse.engine_words import INDEX_FILE

ROOT = Path(__file__).resolve().parents[1]
DEV = Path(os.environ.get("HANGWATCH_CORPUS", ROOT.parent / "shared" / "corpus" / "dev"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=DEV)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    start = time.process_time()
    words = engine_words()
    load = time.process_time() - start
    print(f"index {INDEX_FILE.name}: {INDEX_FILE.stat().st_size / 1e6:.2f} MB, {len(words)} sites; first read {load:.2f} s CPU")
    bundles = sorted(p for p in args.corpus.iterdir() if (p / "meta.json").exists())
    contexts = [Context(with_pasted(read_bundle(b)), None) for b in bundles]
    with_failures = [c for c in contexts if c.failures]  # parsed here, outside the timing
    per_bundle: list[float] = []
    found = 0
    for _ in range(args.repeat):
        for ctx in with_failures:
            start = time.process_time()
            found += find_site(ctx) is not None
            per_bundle.append(time.process_time() - start)
    ms = sorted(1000 * t for t in per_bundle)
    print(f"{len(bundles)} bundles, {len(with_failures)} with a failure, a site found for {found // args.repeat}")
    print(f"find_site per bundle: median {statistics.median(ms):.2f} ms, p95 {ms[int(0.95 * (len(ms) - 1))]:.2f} ms, "
          f"max {ms[-1]:.2f} ms CPU (x{args.repeat}; the first pass compiles each candidate's regex once)")


if __name__ == "__main__":
    main()
