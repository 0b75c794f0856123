"""Shared body of the fake launchers: start titled children, report their pids, then sleep.

Environment: HW_READY=path (required) receives {"pid": launcher, "children": {title: pid}} once
every child has exec'd. Children die with the launcher (PR_SET_PDEATHSIG), as SGLang's do.
"""

import ctypes
import json
import os
import subprocess
import sys
import time

CHILD = "import ctypes, time; ctypes.CDLL(None).prctl(1, 9); time.sleep(600)"


def run(titles):
    children = {}
    for title in titles:
        # argv[0] = the title: /proc/PID/cmdline then starts with it, as after setproctitle
        proc = subprocess.Popen([title, "-c", CHILD], executable=sys.executable)
        children[title] = proc.pid
    sys.stderr.write("[fake] launcher started %d children\n" % len(children))
    sys.stderr.flush()
    ready = os.environ["HW_READY"]
    with open(ready + ".tmp", "w") as fh:
        json.dump({"pid": os.getpid(), "children": children}, fh)
    os.replace(ready + ".tmp", ready)
    ctypes.CDLL(None).prctl(1, 9)  # die with the test process
    time.sleep(600)


def tp_size(argv):
    for flag in ("--tp", "--tp-size", "--tensor-parallel-size"):
        if flag in argv:
            return int(argv[argv.index(flag) + 1])
    return 1
