"""Where the agent runs: the host, the default route's address, Kubernetes' pod, namespace and node."""

from __future__ import annotations

import socket
from pathlib import Path

from hangwatch.sources.location import Location, read_location


def test_outside_kubernetes_the_host_and_its_address() -> None:
    here = read_location({})
    assert here.host == socket.gethostname() and here.pod is None
    assert here.label().startswith(socket.gethostname())
    if here.address:  # a machine with a default route: its interface's IPv4 address
        assert socket.inet_aton(here.address) and f"({here.address})" in here.label()


def test_downward_api_variables_name_the_pod_and_node() -> None:
    where = read_location({"POD_NAME": "vllm-1", "POD_NAMESPACE": "serving", "NODE_NAME": "h200-3", "POD_IP": "10.0.0.9"})
    assert where.label() == "pod serving/vllm-1 on node h200-3 (10.0.0.9)"


def test_the_pod_uid_is_read_from_a_kubepods_cgroup(tmp_path: Path) -> None:
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "cgroup").write_text(
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1b2c3d4e_5f60_7182_93a4_b5c6d7e8f901.slice/cri-containerd-ab.scope\n")
    assert read_location({}, proc=tmp_path).pod_uid == "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"


def test_a_pod_whose_host_name_is_the_pod_name_is_not_named_twice() -> None:
    assert Location(host="sglang-0", pod="sglang-0").label() == "pod sglang-0"
