"""The classifier's CPU per watch tick while the newest-5 000-lines window slides over 5 000 lines of
4 KB (probe L8), in process, so the figure does not depend on the host's load like ticks/s do.

    .venv/bin/python bench/bench_tick_cpu.py [NEW_LINES_PER_TICK]   (256: a tick's read budget)

Prints CPU seconds per tick with that many new lines, and per tick with none; asserts nothing.
Each tick classifies with one `ScanMemo`, as the watcher does for one server; `--no-memo` classifies
as offline diagnose does (nothing kept between calls: every tick recomputes the whole window).
Compare with an older tree: PYTHONPATH=/path/to/old/tree .venv/bin/python bench/bench_tick_cpu.py 1000
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from hangwatch.classify import RULES_DIR, classify, load_rules
from hangwatch.model import Evidence
from hangwatch.parse.logs import read_log_lines

args = [a for a in sys.argv[1:] if a != "--no-memo"]
step = int(args[0]) if args else 256
memo: dict[str, Any] = {}
if "--no-memo" not in sys.argv:
    try:
        from hangwatch.classify import ScanMemo  # type: ignore[attr-defined,unused-ignore]

        memo = {"memo": ScanMemo()}
    except ImportError:  # an older tree: its caches were module-wide
        pass
rules = load_rules(sorted(Path(RULES_DIR).glob("*.yaml")))
body = ", ".join(f"field_{i}={i * 7}" for i in range(400))[:4000]
base = read_log_lines(b"[2026-12-01 00:00:00 TP0] Init torch distributed begin.\n" * 3000)
flood = read_log_lines(f"[2026-12-01 00:00:00 TP0] server_args=ServerArgs({body})\n".encode() * 5000, 3001)
log = base + flood
classify(Evidence(log=log[:3000][-5000:]), rules, **memo)
times = []
for end in range(3000 + step, 8001, step):
    t = time.process_time()
    classify(Evidence(log=log[max(0, end - 5000) : end]), rules, **memo)
    times.append(time.process_time() - t)
quiet = []
for _ in range(3):
    t = time.process_time()
    classify(Evidence(log=log[-5000:]), rules, **memo)
    quiet.append(time.process_time() - t)
print(f"{Path(sys.modules['hangwatch'].__file__).parent.parent.name}{' (no memo)' if '--no-memo' in sys.argv else ''}: {step} new lines a tick: "
      f"{sum(times)/len(times):.2f} s CPU a tick (max {max(times):.2f}); no new lines: {min(quiet):.3f} s CPU a tick")
