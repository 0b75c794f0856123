"""The test server's launcher: a small server start that really blocks (no torch, no GPU).

    HW_MODE=MODE python tests/integration/programs/sglang/launch_server.py --model-path M --tp-size 2 --port P

Its path makes its command line read like SGLang's launcher (`.../sglang/launch_server.py
--port P`); its ranks carry SGLang's process titles and it writes SGLang's log lines to stdout.
What everything waits on is real: rank 0 blocks in accept() until each peer connected, the
launcher blocks reading each rank's readiness socket, a ready server blocks in accept() on P.

    healthy    every rank meets and logs its phases; the launcher opens P and logs the ready line
    tcpstore   rank 1 is never started: rank 0 waits in accept() for a peer that never comes
    dead_rank  rank 1 is SIGKILLed after `Init torch distributed begin.`; rank 0 waits for it
    exit       the launcher logs a traceback and exits with status 3
    slow       like healthy, but rank 0 computes for ~12 s ($HW_SLOW_S) (CPU, moving stack) before its weights
    spin       like healthy, then rank 0 computes forever, appending its rate to $HW_RATE_FILE
    fifo_rank  rank 1 blocks opening its weights ($HW_FIFO, a FIFO nobody writes); rank 0 loaded and waits for it

HW_JOINED_TITLE=1: the launcher retitles itself with its command line joined into one string.
HW_ABORT_ON_SIGTERM=1: the launcher aborts (SIGABRT) when it is sent SIGTERM.
    jit_lock   rank 0 takes torch's FileBaton in $TORCH_EXTENSIONS_DIR/hw_test_ext before a JIT build (the
               lab's python: torch); a `lock` left there by a killed build blocks it until removed
"""

import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)

from _common import TP, die_with_parent, log  # noqa: E402


def flag(name, default=None):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_rank(rank, store_port, mode):
    theirs, ours = socket.socketpair()
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "rank.py"), str(rank), str(store_port), str(theirs.fileno()), mode],
        pass_fds=[theirs.fileno()],
    )
    theirs.close()
    return proc, ours


def serve(port):
    server = socket.create_server(("127.0.0.1", port))
    log(None, f"INFO:     Uvicorn running on http://127.0.0.1:{port} (Press CTRL+C to quit)")
    log(None, "The server is fired up and ready to roll!")
    while True:
        conn, _ = server.accept()
        conn.close()


def main():
    if os.environ.get("HW_DIE_WITH_PARENT"):
        die_with_parent()
    if os.environ.get("HW_ABORT_ON_SIGTERM"):
        signal.signal(signal.SIGTERM, lambda *_: os.abort())  # a crash while it stops
    if os.environ.get("HW_JOINED_TITLE"):
        from setproctitle import setproctitle

        # one space-joined string where argv was, as a launcher that retitles itself leaves it
        setproctitle(" ".join(["python3", os.path.abspath(__file__), *sys.argv[1:]]))
    mode, port = os.environ.get("HW_MODE", "healthy"), int(flag("--port", "30000"))
    log(None, f"server_args=ServerArgs(model_path='{flag('--model-path')}', tp_size={TP}, port={port})")
    if mode == "exit":
        time.sleep(1.0)
        sys.stdout.write("Traceback (most recent call last):\nValueError: the model config is invalid\n")
        sys.stdout.flush()
        sys.exit(3)
    store_port = free_port()
    started = [start_rank(rank, store_port, mode) for rank in range(TP - 1 if mode == "tcpstore" else TP)]
    for _, channel in started[:1] if mode == "dead_rank" else started:
        channel.recv(1)  # blocks until that rank is ready (or forever)
    serve(port)


if __name__ == "__main__":
    main()
