"""What the redaction boundary costs per MiB of text: a real server log, the credential corpus
(every line a secret), and adversarial shapes (a flag with 16 values, `-u a:b` runs, BEGIN
PRIVATE KEY headers without an END, long digit runs before `:AA`).

    .venv/bin/python bench/bench_redact.py [--mib 4]

Prints MiB/s per input; asserts nothing. Every pattern in hangwatch/redact.py is linear with
bounded repeats, so the rate must not fall with the input's size (try --mib 1 and --mib 8).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from hangwatch.redact import _redact_cmdline, redact_cmdline, redact_text, terminal_text

ROOT = Path(__file__).resolve().parents[1]
SGLANG_LINES = [
    "[2026-12-01 10:00:00 TP0] Init torch distributed begin.",
    "[2026-12-01 10:00:01 TP0] Load weight begin. avail mem=78.12 GB",
    "[2026-12-01 10:00:02] server_args=ServerArgs(model_path='/models/llama', tp_size=8, api_key='sk-abcDEF123456789', port=30000)",
    "[2026-12-01 10:00:03 TP3] NCCL INFO Channel 00/24 : 0 1 2 3 4 5 6 7 via P2P/IPC",
    "[2026-12-01 10:00:04 TP0] Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32]",
    "INFO:     127.0.0.1:53422 - \"GET /health HTTP/1.1\" 200 OK",
]


def corpus_lines() -> list[str]:
    rows = []
    for line in (ROOT / "tests" / "data" / "credentials" / "formats.tsv").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            _, secret, context = line.split("\t")
            rows.append(context.replace("{}", secret, 1).replace("\\n", "\n"))
    return rows


def filled(lines: list[str], mib: float) -> str:
    unit = "\n".join(lines) + "\n"
    return unit * max(1, int(mib * 2**20 / len(unit)))


def rate(fn, text: str) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    fn(text)
    return len(text) / 2**20 / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=float, default=4.0)
    args = parser.parse_args()
    inputs = {
        "server log (SGLang lines)": filled(SGLANG_LINES, args.mib),
        "credential corpus (every line a secret)": filled(corpus_lines(), args.mib),
        "--api-key with 16 values": filled(["--api-key " + " ".join(f"k{i}Abc12345" for i in range(16))], args.mib),
        "-u a:b runs": filled(["-u a:b " * 200], args.mib),
        "BEGIN PRIVATE KEY, no END": filled(["-----BEGIN RSA PRIVATE KEY-----" + "A" * 1000], args.mib),
        "digit runs before :AA": filled(["1234567890:AA" * 100], args.mib),
    }
    print(f"{'input':<42} {'MiB':>5} {'redact_text':>14} {'terminal_text':>14}")
    for name, text in inputs.items():
        print(f"{name:<42} {len(text) / 2**20:5.1f} {rate(redact_text, text):9.2f} MiB/s {rate(terminal_text, text):9.2f} MiB/s")
    cmdline = ("python -m sglang.launch_server --model-path /models/llama --tp-size 8 --api-key sk-abcDEF123456789 "
               "second2KEYvalue --hf-token hf_abcdefGHIJ12345678 --port 30000 --host 0.0.0.0 --mem-fraction-static 0.85")
    n = 2000
    for label, fn in (("first time", _redact_cmdline), ("again (cached per command line)", redact_cmdline)):
        started = time.perf_counter()
        for _ in range(n):
            fn(cmdline)
        print(f"redact_cmdline of a {len(cmdline)}-character launcher command line, {label}: "
              f"{(time.perf_counter() - started) / n * 1e6:.1f} µs per call")


if __name__ == "__main__":
    main()
