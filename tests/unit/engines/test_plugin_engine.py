"""A new engine is one file plus one line: TinyServe (tests/helpers/tinyserve.py), registered with
`register(TINYSERVE)`, is discovered from a real process tree titled like it, its workers get
their roles and ranks, and its log gets prefixes and startup phases, with no other change."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch.classify.language.loader import load_text
from hangwatch.engines import get_engine, guess_engine, register, unregister
from hangwatch.errors import RuleError
from hangwatch.model import Origin, Phase
from hangwatch.parse.flags import parse_flags
from hangwatch.parse.frames import frame_origin
from hangwatch.parse.logs import read_log_lines
from hangwatch.redact import filter_env
from hangwatch.sources.discover import discover
from hangwatch.sources.procs import read_procs
from helpers.liveprocs import Spawner, start_fake_server, wait_until
from helpers.tinyserve import TINYSERVE

LOG = b"""\
<tiny 12:00:01> starting tinyserve with 2 workers
<tiny 12:00:02 TP0> loading weights 3/8
<tiny 12:00:02 TP1> loading weights 8/8
<tiny 12:00:03 TP1> weights loaded
"""


@pytest.fixture
def tinyserve() -> Iterator[None]:
    register(TINYSERVE)  # the one line a new engine needs
    yield
    unregister(TINYSERVE.name)


def test_an_unregistered_engine_is_unknown() -> None:
    with pytest.raises(ValueError, match="unknown engine 'tinyserve'"):
        get_engine("tinyserve")


def test_discovery_roles_and_port_from_a_real_process_tree(tinyserve: None, spawner: Spawner, tmp_path: Path) -> None:
    launcher, info = start_fake_server(spawner, tmp_path, "tinyserve", ["--workers", "2", "--port", "7123"])
    worker = info["children"]["tinyserve::worker_TP1"]

    server = discover(worker)  # from a worker: walks up to the launcher
    assert (server.engine, server.launcher_pid, server.port) == ("tinyserve", launcher.pid, 7123)
    assert server.flags["tp"] == "2"  # --workers is TinyServe's spelling of the tensor-parallel size

    procs = wait_until(lambda: [p for p in read_procs(launcher.pid) if p.role == "worker"] or None)
    assert sorted(p.rank for p in procs) == ["TP0", "TP1"]
    assert next(p for p in read_procs(launcher.pid) if p.pid == launcher.pid).role == "launcher"


def test_log_prefixes_and_phases(tinyserve: None) -> None:
    lines = read_log_lines(LOG)
    assert [(line.rank, line.message) for line in lines[1:3]] == [("TP0", "loading weights 3/8"), ("TP1", "loading weights 8/8")]
    assert guess_engine(lines) == "tinyserve"
    events = get_engine("tinyserve").phase_events(lines)
    assert [(e.rank, e.phase, e.end, e.progress) for e in events] == [
        ("TP0", Phase.WEIGHT_LOAD, False, (3, 8)),
        ("TP1", Phase.WEIGHT_LOAD, False, (8, 8)),
        ("TP1", Phase.WEIGHT_LOAD, True, None),
    ]


def test_flags_port_env_frames_and_rules_know_it(tinyserve: None) -> None:
    flags = parse_flags("python -m tinyserve.serve --workers 4 --model tiny")
    assert flags["tp"] == "4" and TINYSERVE.server_port(flags) == 7000
    assert filter_env({"TINYSERVE_CACHE": "/c", "OTHER": "x"}, TINYSERVE.env_prefixes) == {"TINYSERVE_CACHE": "/c"}
    assert frame_origin("/usr/lib/python3/site-packages/tinyserve/core.py") is Origin.ENGINE
    assert frame_origin("/src/tinyserve/core/loop.py") is Origin.ENGINE  # a source checkout
    rule = "rules:\n  - {id: t, cause: nccl_init, title: t, severity: info, remedy: r, engines: [tinyserve], when: {log.matches: x}}\n"
    assert load_text(rule)[0].engines == ("tinyserve",)


def test_rules_refuse_an_engine_nobody_registered() -> None:
    rule = "rules:\n  - {id: t, cause: nccl_init, title: t, severity: info, remedy: r, engines: [tinyserve], when: {log.matches: x}}\n"
    with pytest.raises(RuleError, match="tinyserve"):
        load_text(rule)
