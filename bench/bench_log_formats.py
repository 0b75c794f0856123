"""What reading phases by the engines' own log formats costs (issue 19, item 4; printed, never asserted).

    python bench/bench_log_formats.py [--mib 16] [--repeat 5]

1. building the formats once per process (the index read, the table matched to every log format);
2. `read_phases` (markers, then formats) over a log of MIB MiB (SGLang serving lines, the shape of a live tail or a
   bundle's log), and of it the mined formats' share (`LogFormats.events` alone on the same lines,
   no hand marker events), CPU seconds per MiB;
3. the same for vLLM serving lines.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

SGLANG_SERVING = ("[2026-11-30 10:00:{s:02d} TP0] Prefill batch. #new-seq: 1, #new-token: {n}, #cached-token: 0, "
                  "token usage: 0.01, #running-req: 0, #queue-req: 0\n")  # fmt: skip
VLLM_SERVING = ("(APIServer pid=7) INFO 11-30 10:00:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: {n}.0 "
                "tokens/s, Avg generation throughput: 12.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs\n")  # fmt: skip


def _log(template: str, mib: int) -> bytes:
    one = "".join(template.format(s=i % 60, n=8 + i % 97) for i in range(1000)).encode()
    return one * max(1, (mib << 20) // len(one))


def _cpu(fn, repeat: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        out.append(time.process_time() - t0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from hangwatch.engines import get_engine
    from hangwatch.parse.logformats import formats_for, read_phases
    from hangwatch.parse.logs import read_log_lines

    t0 = time.process_time()
    built = {name: formats_for(name) for name in ("sglang", "vllm")}
    print(f"1. formats built once per process: {time.process_time() - t0:.2f} s CPU "
          f"({', '.join(f'{n} {len(f.formats) if f else 0}' for n, f in built.items())} formats)")
    for step, (name, template) in enumerate((("sglang", SGLANG_SERVING), ("vllm", VLLM_SERVING)), start=2):
        lines = read_log_lines(_log(template, args.mib))
        engine, formats = get_engine(name), built[name]
        assert formats is not None
        version = "0.5.23" if name == "sglang" else "0.32.0"
        whole = _cpu(lambda e=engine, ls=lines, v=version: read_phases(e, ls, version=v), args.repeat)
        mined = _cpu(lambda f=formats, ls=lines, v=version: f.events(ls, v), args.repeat)
        print(f"{step}. {name}: {len(lines):,} lines ({args.mib} MiB): phase_events median {statistics.median(whole):.2f} s CPU "
              f"({statistics.median(whole) / args.mib * 1000:.0f} ms/MiB), of it the mined formats "
              f"{statistics.median(mined):.2f} s ({statistics.median(mined) / args.mib * 1000:.0f} ms/MiB)")


if __name__ == "__main__":
    main()
