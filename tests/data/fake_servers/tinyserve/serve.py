"""Fake `python -m tinyserve.serve`: the toy engine of tests/helpers/tinyserve.py, one titled
worker per --workers (PYTHONPATH holds tests/data/fake_servers, where _fake lives)."""

import sys

import _fake

workers = int(sys.argv[sys.argv.index("--workers") + 1]) if "--workers" in sys.argv else 1
_fake.run(["tinyserve::worker_TP%d" % i for i in range(workers)])
