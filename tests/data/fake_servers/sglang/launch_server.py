"""Fake `python -m sglang.launch_server`: schedulers (one per --tp rank) and a detokenizer."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _fake

tp = _fake.tp_size(sys.argv)
schedulers = ["sglang::scheduler"] if tp == 1 else ["sglang::scheduler_TP%d" % i for i in range(tp)]
_fake.run(schedulers + ["sglang::detokenizer"])
