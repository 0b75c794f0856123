"""How long `hangwatch diagnose` takes on a large bundle: 8 ranks × 3 stack samples, a 5 MiB log.

    .venv/bin/python bench/bench_diagnose.py [--repeat 5]

Builds the bundle in a temporary directory from a real py-spy dump of a real SGLang rank
(tests/fixtures/stacks/sglang_tcpstore_native.json) and a synthetic SGLang log padded with tqdm
updates, then times read + classify. Prints figures; asserts nothing (target: ≤ 1 s on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from hangwatch.bundle import read_bundle
from hangwatch.classify import classify, load_rules

ROOT = Path(__file__).resolve().parents[1]
STACK = ROOT / "tests" / "fixtures" / "stacks" / "sglang_tcpstore_native.json"
LOG_HEAD = """[2026-11-29 23:43:20] server_args=ServerArgs(model_path='/models/x', tp_size=8)
[2026-11-29 23:43:26 TP{r}] Init parallel begin.
[2026-11-29 23:43:28 TP{r}] Init parallel ends. elapsed=1.73 s
[2026-11-29 23:43:28 TP{r}] Load weight begin. avail mem=78.00 GB
"""


def make_log(size: int) -> bytes:
    parts = [LOG_HEAD.format(r=r) for r in range(8)]
    i = 0
    while sum(map(len, parts)) < size:
        bar = "\r".join(f"Multi-thread loading shards:  {p}% Completed | {p}/100 [00:{p:02d}<00:10, 1.0it/s]" for p in range(0, 100, 7))
        parts.append(f"[2026-11-29 23:44:{i % 60:02d} TP0] {bar}\n")
        parts.append(f"[2026-11-29 23:44:{i % 60:02d} TP{i % 8}] some routine line number {i} with details\n")
        i += 1
    return "".join(parts).encode()


def make_bundle(root: Path) -> Path:
    bundle = root / "big"
    (bundle / "stacks").mkdir(parents=True)
    (bundle / "meta.json").write_text(json.dumps({"format": "hangwatch-bundle/1", "engine": "sglang", "tp": 8}))
    (bundle / "cmdline.txt").write_text("python -m sglang.launch_server --model-path /models/x --tp 8\n")
    (bundle / "server.log").write_bytes(make_log(5 * 2**20))
    dump = STACK.read_text()
    for rank in range(8):
        for sample in range(3):
            (bundle / "stacks" / f"TP{rank}.{sample}.json").write_text(dump)
    return bundle


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rules = load_rules()
    with tempfile.TemporaryDirectory() as tmp:
        bundle = make_bundle(Path(tmp))
        read_s, classify_s = [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            evidence = read_bundle(bundle)
            t1 = time.perf_counter()
            verdict = classify(evidence, rules)
            t2 = time.perf_counter()
            read_s.append(t1 - t0)
            classify_s.append(t2 - t1)
    total = [a + b for a, b in zip(read_s, classify_s, strict=True)]
    print(f"bundle: 8 ranks x 3 samples, 5 MiB log, {len(evidence.log)} lines, {len(rules)} rules")
    print(f"verdict: {verdict.state.value} / {verdict.cause}")
    print(f"read    median {statistics.median(read_s):.3f} s")
    print(f"classify median {statistics.median(classify_s):.3f} s")
    print(f"diagnose median {statistics.median(total):.3f} s (target 1.0 s: ratio {statistics.median(total) / 1.0:.2f})")


if __name__ == "__main__":
    main()
