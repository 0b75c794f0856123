"""Where this agent runs, for people reading an alert from many nodes: the host name, the node's
address, and in Kubernetes the pod, its namespace and the node.

Kubernetes facts come from the downward API (the variables deploy/k8s-sidecar.yaml sets: POD_NAME,
POD_NAMESPACE, POD_IP, NODE_NAME), else from the service account's namespace file and the pod UID in
/proc/self/cgroup. The address is the one of the interface that holds the default route, read from
/proc/net/route and an ioctl: nothing is sent anywhere."""

from __future__ import annotations

import fcntl
import os
import re
import socket
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Location", "read_location"]

_SIOCGIFADDR = 0x8915
_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
_POD_UID = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")


@dataclass(frozen=True)
class Location:
    host: str
    address: str | None = None  # the node's (or pod's) IPv4 address
    pod: str | None = None
    namespace: str | None = None
    node: str | None = None  # the Kubernetes node
    pod_uid: str | None = None

    def label(self) -> str:
        """`gpu-node-3 (10.0.0.5)`, `ns/pod-0 on node gpu-node-3 (10.0.0.5)`."""
        where = f"{self.host} ({self.address})" if self.address else self.host
        if self.pod:
            pod = f"{self.namespace}/{self.pod}" if self.namespace else self.pod
            node = self.node or (None if self.host == self.pod else self.host)
            return f"pod {pod}" + (f" on node {node}" if node else "") + (f" ({self.address})" if self.address else "")
        return where

    def to_dict(self) -> dict[str, str | None]:
        return dict(self.__dict__)


def read_location(env: Mapping[str, str] = os.environ, proc: Path = Path("/proc")) -> Location:
    return Location(
        host=socket.gethostname(),
        address=env.get("POD_IP") or _default_route_address(proc),
        pod=env.get("POD_NAME") or None,
        namespace=env.get("POD_NAMESPACE") or _read_small(_SERVICE_ACCOUNT_NAMESPACE),
        node=env.get("NODE_NAME") or None,
        pod_uid=env.get("POD_UID") or _pod_uid(proc),
    )


def _default_route_address(proc: Path) -> str | None:
    try:
        rows = (proc / "net" / "route").read_text().splitlines()[1:]
    except OSError:
        return None
    for row in rows:
        fields = row.split()
        if len(fields) > 2 and fields[1] == "00000000":  # destination 0.0.0.0: the default route
            return _interface_address(fields[0])
    return None


def _interface_address(name: str) -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            answer = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(answer[20:24])


def _pod_uid(proc: Path) -> str | None:
    try:
        text = (proc / "self" / "cgroup").read_text()
    except OSError:
        return None
    found = _POD_UID.search(text)
    return found.group(1).replace("_", "-") if found else None


def _read_small(path: Path) -> str | None:
    try:
        return path.read_text()[:253].strip() or None
    except OSError:
        return None
