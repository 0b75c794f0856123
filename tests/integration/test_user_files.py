"""Files the user names (issue 24): a FIFO never hangs, /dev/zero never grows, a big file is refused
(--gpus-from, --rules, --token-file, fleet's --token-file, a bundle); a damaged history file at start
is moved aside with one line said, and the page's /snapshot is never a 500."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from hangwatch.sinks.store import HistoryStore
from helpers.livetools import HANGWATCH, Procs, _env, free_port, server_cmd, wait_for_text

CMD = ["--", "python", "-m", "sglang.launch_server", "--model-path", "m", "--tp-size", "2"]


def hostile_files(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big.json"
    big.write_bytes(b"[" + b"0," * (20 << 20) + b"0]")
    return {"fifo": fifo, "zero": Path("/dev/zero"), "big": big}


def run(args: list[str], timeout: float = 60) -> tuple[subprocess.CompletedProcess[bytes], float]:
    started = time.monotonic()
    done = subprocess.run([*HANGWATCH, *args], capture_output=True, timeout=timeout, check=False, env=_env())
    return done, time.monotonic() - started


@pytest.mark.parametrize("kind", ["fifo", "zero", "big"])
def test_hostile_files_are_one_line_errors(tmp_path: Path, kind: str) -> None:
    path = hostile_files(tmp_path)[kind]
    why = {"fifo": b"not a regular file", "zero": b"not a regular file", "big": b"larger than"}[kind]
    done, _ = run(["preflight", "--gpus-from", str(path), *CMD])
    assert done.returncode == 2 and why in done.stderr and b"Traceback" not in done.stderr, done.stderr
    done, _ = run(["rules", "check", str(path)])
    assert done.returncode != 0 and b"Traceback" not in done.stderr
    done, _ = run(["fleet", "http://127.0.0.1:1", "--once", "--token-file", str(path)])
    assert done.returncode == 2 and b"Traceback" not in done.stderr and (why in done.stderr or kind == "big"), done.stderr
    done, _ = run(["attach", "1", "--token-file", str(path), "--serve", "--timeout", "1"])
    assert done.returncode == 2 and b"Traceback" not in done.stderr, done.stderr
    done, _ = run(["diagnose", str(path)])
    assert done.returncode == 2 and b"Traceback" not in done.stderr, done.stderr


def damage(path: Path, how: str) -> None:
    if how == "garbage":
        path.write_bytes(os.urandom(64 << 10))
    elif how == "foreign":  # a SQLite file, but not ours: the table lacks our columns
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE transitions (x TEXT)")
        db.commit()
        db.close()
    else:  # ours, with pages overwritten in the middle
        store = HistoryStore(path)
        for n in range(3000):
            store.record_transition("s", "stalled", verdict={"pad": "x" * 200, "n": n})
        store.close()
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        with path.open("r+b") as fh:
            fh.seek(8 * 4096)
            fh.write(os.urandom(16 * 4096))


@pytest.mark.parametrize("how", ["garbage", "foreign", "pages"])
def test_a_damaged_history_is_moved_aside_and_the_page_works(tmp_path: Path, how: str) -> None:
    history = tmp_path / "h.db"
    damage(history, how)
    procs = Procs()
    try:
        log = tmp_path / "server.log"
        with log.open("wb") as fh:
            server = procs.start(server_cmd(free_port()), stdout=fh, stderr=subprocess.STDOUT, env=_env(HW_MODE="tcpstore"))
        wait_for_text(log, "Init torch distributed begin")
        port = free_port()
        with (tmp_path / "attach.err").open("wb") as err_fh:
            procs.hangwatch(["attach", str(server.pid), "--serve", "--port", str(port), "--json", "--history",
                             str(history), "--log", str(log)], env=_env(), stdout=subprocess.DEVNULL, stderr=err_fh)
        deadline = time.monotonic() + 60
        snapshot = None
        while time.monotonic() < deadline:
            try:
                snapshot = httpx.get(f"http://127.0.0.1:{port}/snapshot", timeout=10)
                if snapshot.json()["nodes"][0]["verdict"]:
                    break
            except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
                pass
            time.sleep(0.5)
        assert snapshot is not None and snapshot.status_code == 200
        assert snapshot.json()["nodes"][0]["history"]["enabled"] is True
    finally:
        procs.stop()
    err = (tmp_path / "attach.err").read_text()
    assert "is damaged" in err and "moved to" in err and "starting a fresh history" in err, err
    assert list(tmp_path.glob("h.db.damaged-*"))


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_history_that_is_no_regular_file_is_one_error_and_never_moved(tmp_path: Path, kind: str) -> None:
    from hangwatch.sinks.store import HistoryError

    path = hostile_files(tmp_path)[kind]
    before = os.stat(path)
    with pytest.raises(HistoryError, match="not a regular file"):
        HistoryStore.open_or_recover(path)
    after = os.stat(path)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)  # /dev/zero is still /dev/zero
