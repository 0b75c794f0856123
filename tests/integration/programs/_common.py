"""What the test launcher and its ranks share: SGLang's log line format, dying with the parent."""

import ctypes
import signal
import sys
import time

TP = 2


def log(rank, message):
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    tag = f" {rank}" if rank else ""
    sys.stdout.write(f"[{stamp}{tag}] {message}\n")
    sys.stdout.flush()


def die_with_parent():
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: never outlive the launcher
