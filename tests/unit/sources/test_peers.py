"""find_peers() and the sampler on real launchers: two `--nnodes 2` node ranks of one launch on
this host, beside launches that must not be taken for peers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch.sources.peers import find_peers
from hangwatch.sources.procs import ProcessSampler
from helpers.liveprocs import Spawner, start_fake_server


@pytest.fixture
def spawner() -> Iterator[Spawner]:
    spawner = Spawner()
    yield spawner
    spawner.stop()


def _node(rank: int, addr: str = "127.0.0.1:25711", nnodes: str = "2") -> list[str]:
    return ["--tp", "2", "--nnodes", nnodes, "--node-rank", str(rank), "--dist-init-addr", addr]


def test_the_other_node_rank_of_the_same_launch_is_a_peer(spawner: Spawner, tmp_path: Path) -> None:
    # GIVEN node 0 and node 1 of one launch, a node 1 of another launch (other address), a
    # single-node server and a vLLM launcher with the same numbers
    node0, _ = start_fake_server(spawner, tmp_path, "sglang", _node(0))
    node1, info1 = start_fake_server(spawner, tmp_path, "sglang", _node(1))
    other, _ = start_fake_server(spawner, tmp_path, "sglang", _node(1, addr="127.0.0.1:25799"))
    single, _ = start_fake_server(spawner, tmp_path, "sglang", ["--tp", "2"])
    vllm, _ = start_fake_server(spawner, tmp_path, "vllm", ["--nnodes", "2", "--node-rank", "1"])
    cmdline = " ".join(["python", "-m", "sglang.launch_server", *_node(0)])
    # WHEN / THEN: only the same launch's other node rank
    assert find_peers(node0.pid, "sglang", cmdline) == (node1.pid,)
    # and from node 1, node 0 is its peer; a single-node server has none
    assert find_peers(node1.pid, "sglang", " ".join(["python", "-m", "sglang.launch_server", *_node(1)])) == (node0.pid,)
    assert find_peers(single.pid, "sglang", "python -m sglang.launch_server --tp 2") == ()
    assert other.pid and vllm.pid  # started, and not taken

    # WHEN the sampler is given the peer
    records = ProcessSampler().sample(node0.pid, find_peers(node0.pid, "sglang", cmdline))
    pids = {record.pid for record in records}
    # THEN the peer's ranks are sampled with their titles, its launcher is not (one launcher)
    assert set(info1["children"].values()) <= pids
    assert node1.pid not in pids and [r.pid for r in records if r.role == "launcher"] == [node0.pid]
    assert {r.rank for r in records if r.pid in info1["children"].values()} >= {"TP1"}


def test_a_single_node_or_an_unknown_engine_looks_for_no_peers(spawner: Spawner, tmp_path: Path) -> None:
    node1, _ = start_fake_server(spawner, tmp_path, "sglang", _node(1))
    assert node1.pid
    assert find_peers(1, None, " ".join(["python", "-m", "sglang.launch_server", *_node(0)])) == ()
    assert find_peers(1, "sglang", " ".join(["python", "-m", "sglang.launch_server", *_node(0, nnodes="1")])) == ()
    # no rendezvous address: nothing to match on
    assert find_peers(1, "sglang", "python -m sglang.launch_server --nnodes 2 --node-rank 0") == ()
