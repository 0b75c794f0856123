"""Count hangwatch/data/phase_priors.yaml's rows over a labelled corpus (the dev corpus).

    python tests/helpers/count_priors.py ../shared/corpus/dev            # print the counts
    python tests/helpers/count_priors.py ../shared/corpus/dev --write    # and write them into the table

Each bundle (its expected.json's cause) counts once, for the first row that holds where its start
stopped (priors.where_of, the outcome as the classifier decides it): the row's `count`, and its
cause's `count` when the row lists that cause. Only the numbers are rewritten, never the rows.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

from hangwatch.bundle import read_bundle
from hangwatch.classify.verdict.classifier import is_crashed
from hangwatch.classify.verdict.context import Context
from hangwatch.classify.verdict.ending import fatal_ending, fatal_signal
from hangwatch.classify.verdict.pasted import with_pasted
from hangwatch.classify.verdict.priors import TABLE_FILE, PriorRow, load_priors, rows_for, where_of


def outcome(ctx: Context) -> str:
    ended = is_crashed(ctx) or fatal_ending(ctx) is not None or fatal_signal(ctx) is not None
    return "crashed" if ended else "stalled"


def count(corpus: Path, rows: tuple[PriorRow, ...]) -> tuple[Counter[str], Counter[tuple[str, str]]]:
    per_row: Counter[str] = Counter()
    per_cause: Counter[tuple[str, str]] = Counter()
    for expected in sorted(corpus.rglob("expected.json")):
        label = json.loads(expected.read_text(encoding="utf-8"))
        ctx = Context(with_pasted(read_bundle(expected.parent)))
        held = rows_for(where_of(ctx, outcome(ctx)), rows)
        if not held:
            continue
        per_row[held[0].id] += 1
        per_cause[(held[0].id, label.get("cause", ""))] += 1
    return per_row, per_cause


def rewrite(text: str, per_row: Counter[str], per_cause: Counter[tuple[str, str]]) -> str:
    blocks = re.split(r"(?m)^(?=  - id: )", text)
    out = []
    for block in blocks:
        found = re.match(r"  - id: (\S+)", block)
        if found:
            row = found.group(1)
            block = re.sub(r"\{cause: (\w+), count: \d+\}", lambda m, row=row: f"{{cause: {m.group(1)}, count: {per_cause[(row, m.group(1))]}}}", block)
            block = re.sub(r"(?m)^    count: \d+$", f"    count: {per_row[row]}", block)
        out.append(block)
    return "".join(out)


def main(argv: list[str]) -> None:
    corpus = Path(argv[0])
    rows = load_priors()
    per_row, per_cause = count(corpus, rows)
    for row in rows:
        listed = {c.cause for c in row.causes}
        others = {cause: n for (rid, cause), n in per_cause.items() if rid == row.id and cause not in listed}
        print(f"{row.id:24s} {per_row[row.id]:3d}  " + ", ".join(f"{c.cause} {per_cause[(row.id, c.cause)]}" for c in row.causes)
              + (f"  | not listed: {others}" if others else ""))  # fmt: skip
    if "--write" in argv:
        TABLE_FILE.write_text(rewrite(TABLE_FILE.read_text(encoding="utf-8"), per_row, per_cause), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
