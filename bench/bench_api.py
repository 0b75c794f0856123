"""GET /verdict under 200 concurrent clients, against a real uvicorn on loopback.

    python bench/bench_api.py [--clients 200] [--seconds 10] [--interval 1.0]

The server runs in a child process, as in `hangwatch attach --serve`: a LatestView that a ticker
thread updates at 1 Hz (a new verdict each tick, as the watch loop does), the API in a uvicorn
thread. The clients are asyncio connections (HTTP/1.1 keep-alive) in this process; each starts at a random
offset, sends a request, waits for the answer, sleeps `--interval`, and repeats (`--interval 0`:
back to back, i.e. throughput-bound).
Prints p50/p99 latency, errors, the ticker's achieved rate and lateness, and the server's RSS.
Targets: p99 <= 20 ms, 0 errors, RSS <= 120 MiB. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import random
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- the server (child process)


def serve() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from hangwatch.sinks.api import create_app, serve_in_thread
    from helpers.serve_fixtures import make_verdict, make_view  # the same hand-built verdict the tests use

    view = make_view(make_verdict())
    handle = serve_in_thread(create_app(view, rate=None), "127.0.0.1", 0)
    stats = {"ticks": 0, "max_late_ms": 0.0}
    stop = threading.Event()
    threading.Thread(target=ticker, args=(view, make_verdict, stats, stop), daemon=True).start()
    parser = "httptools" if importlib.util.find_spec("httptools") else "h11"  # uvicorn's "auto" choice
    print(json.dumps({"url": handle.url, "parser": parser}), flush=True)
    sys.stdin.read()  # the driver closes stdin when done
    stop.set()
    print(json.dumps(stats), flush=True)


def ticker(view, make_verdict, stats: dict, stop: threading.Event) -> None:
    """1 Hz, like the watch loop: publish a fresh verdict; record how late each tick ran."""
    start = time.monotonic()
    while not stop.is_set():
        due = start + stats["ticks"] + 1
        stop.wait(max(0.0, due - time.monotonic()))
        stats["max_late_ms"] = max(stats["max_late_ms"], (time.monotonic() - due) * 1000)
        stats["ticks"] += 1
        stats["elapsed"] = time.monotonic() - start
        view.publish(replace(view.latest(), verdict=make_verdict(since_s=float(stats["ticks"]))), tick=True)


# ---------------------------------------------------------------- the clients (this process)


async def client(host: str, port: int, until: float, interval: float, latencies: list[float], errors: list[str]) -> None:
    request = f"GET /verdict HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    reader, writer = await asyncio.open_connection(host, port)
    await asyncio.sleep(random.uniform(0, interval))  # clients poll out of step, as real pollers do
    try:
        while time.monotonic() < until:
            start = time.perf_counter()
            writer.write(request)
            status = await read_response(reader)
            latencies.append(time.perf_counter() - start)
            if status != 200:
                errors.append(str(status))
            if interval:
                await asyncio.sleep(interval)
    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
        errors.append(type(exc).__name__)
    finally:
        writer.close()


async def read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
    await reader.readexactly(length)
    return int(lines[0].split()[1])


async def load(url: str, clients: int, seconds: float, interval: float, rss: list[int], pid: int) -> tuple[list, list]:
    host, port = url.removeprefix("http://").split(":")
    latencies: list[float] = []
    errors: list[str] = []
    until = time.monotonic() + seconds
    sampler = asyncio.create_task(sample_rss(pid, rss, until))
    await asyncio.gather(*(client(host, int(port), until, interval, latencies, errors) for _ in range(clients)))
    await sampler
    return latencies, errors


async def sample_rss(pid: int, rss: list[int], until: float) -> None:
    process = psutil.Process(pid)
    while time.monotonic() < until:
        rss.append(process.memory_info().rss)
        await asyncio.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=1.0,
                        help="pause between one client's requests (0: none); the view changes at 1 Hz")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve()
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    started = json.loads(server.stdout.readline())
    url = started["url"]
    rss: list[int] = []
    latencies, errors = asyncio.run(load(url, args.clients, args.seconds, args.interval, rss, server.pid))
    server.stdin.close()
    stats = {**json.loads(server.stdout.readline()), "parser": started["parser"]}
    server.wait(10)
    report(args, latencies, errors, stats, rss)


def report(args, latencies: list[float], errors: list[str], stats: dict, rss: list[int]) -> None:
    ms = sorted(x * 1000 for x in latencies)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(f"GET /verdict: {args.clients} clients, {args.seconds:g} s, interval {args.interval:g} s, "
          f"uvicorn HTTP parser {stats['parser']}, {psutil.cpu_count()} CPUs")
    print(f"  requests {len(ms)} ({len(ms) / args.seconds:.0f}/s)   errors {len(errors)} {sorted(set(errors))}")
    print(f"  latency p50 {statistics.median(ms):.2f} ms   p99 {p99:.2f} ms   max {ms[-1]:.2f} ms   (target p99 <= 20 ms)")
    print(f"  ticker {stats['ticks'] / stats['elapsed']:.3f} Hz (target 1 Hz), latest tick late by at most {stats['max_late_ms']:.1f} ms")
    print(f"  server RSS peak {max(rss) / 2**20:.1f} MiB (target <= 120 MiB)")


if __name__ == "__main__":
    main()
