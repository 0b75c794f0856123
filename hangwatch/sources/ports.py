"""Listening TCP sockets: `ss -tlnp`, or the same table built from /proc/net/tcp{,6}.

    read_listening() -> (sockets, text)     text is what ports.txt holds (docs/bundle-format.md)
    parse_ss(text) -> sockets               also reads a ports.txt back
    port_owner(sockets, port) -> socket | None

Only this module runs `ss`. Its absence is normal (slim containers), so the /proc fallback is
silent; only when both fail is the source unavailable.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
from collections.abc import Iterable, Sequence

from hangwatch.errors import SourceUnavailable
from hangwatch.model import ListeningSocket
from hangwatch.parse.ss import parse_ss

__all__ = ["parse_ss", "port_owner", "read_listening"]

_HEADER = "State  Recv-Q Send-Q Local Address:Port Peer Address:Port Process"
_LISTEN = "0A"  # TCP_LISTEN in include/net/tcp_states.h, as /proc/net/tcp prints it
_MAX_FD_LINKS = 200_000  # bound on the /proc/*/fd scan: a big node has many processes and fds
_HINT = "install iproute2 (ss), or run where /proc/net/tcp is readable"

# (pid, process name, fd) owning a socket inode
_Owner = tuple[int, "str | None", int]
# inode -> owner found by an earlier scan; checked against its fd link before reuse, so that a
# watch loop does not rescan every fd of the node each tick
_owner_cache: dict[int, _Owner] = {}


def read_listening(
    *, ss: str = "ss", proc_root: str = "/proc", timeout_s: float = 2.0
) -> tuple[list[ListeningSocket], str]:
    """Listening TCP sockets of this network namespace, and the table as `ss -tlnp` prints it."""
    text = _run_ss(ss, timeout_s)
    if text is not None:
        return parse_ss(text), text
    rows = _read_proc_net(proc_root)
    owners = _owners({row.inode for row in rows}, proc_root)
    sockets = [_socket(row, owners.get(row.inode)) for row in rows]
    return sockets, _render_table(rows, owners)


def port_owner(sockets: Iterable[ListeningSocket], port: int) -> ListeningSocket | None:
    """The socket listening on `port`, preferring one whose owning pid is known."""
    matches = [s for s in sockets if s.port == port]
    return next((s for s in matches if s.pid is not None), matches[0] if matches else None)


# ---------------------------------------------------------------- ss


def _run_ss(ss: str, timeout_s: float) -> str | None:
    # -tlnp without -H: the header is part of ports.txt, and older iproute2 has no -H
    try:
        done = subprocess.run([ss, "-tlnp"], capture_output=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):  # missing binary, not executable, hung
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", "replace")


# ---------------------------------------------------------------- /proc/net/tcp fallback


class _Row:
    __slots__ = ("host", "port", "inode", "rx", "tx")

    def __init__(self, host: str, port: int, inode: int, rx: int, tx: int):
        self.host, self.port, self.inode, self.rx, self.tx = host, port, inode, rx, tx


def _read_proc_net(proc_root: str) -> list[_Row]:
    rows: list[_Row] = []
    errors = []
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        try:
            with open(os.path.join(proc_root, "net", name), "rb") as fh:
                data = fh.read().decode("ascii", "replace")
        except OSError as exc:
            errors.append(f"{name}: {exc.strerror or exc}")
            continue
        rows.extend(_parse_proc_net(data, family))
    if len(errors) == 2:
        raise SourceUnavailable("ports", "neither ss nor /proc/net/tcp{,6} could be read (" + "; ".join(errors) + ")", _HINT)
    return rows


def _parse_proc_net(data: str, family: int) -> list[_Row]:
    rows = []
    for line in data.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != _LISTEN:
            continue
        address, port = fields[1].split(":")
        tx, rx = fields[4].split(":")
        rows.append(_Row(_decode_address(address, family), int(port, 16), int(fields[9]), int(rx, 16), int(tx, 16)))
    return rows


def _decode_address(hexa: str, family: int) -> str:
    # the kernel prints each 32-bit word of the address in host byte order ("%08X")
    words = [int(hexa[i : i + 8], 16) for i in range(0, len(hexa), 8)]
    return socket.inet_ntop(family, struct.pack(f"={len(words)}I", *words))


def _owners(inodes: set[int], proc_root: str) -> dict[int, _Owner]:
    """inode -> (pid, process name), from the cache where still true, else by scanning /proc/*/fd."""
    found = {inode: hit for inode in inodes if (hit := _cached_owner(inode, proc_root)) is not None}
    missing = inodes - found.keys()
    if missing:
        found.update(_scan_fds(missing, proc_root))
    return found


def _cached_owner(inode: int, proc_root: str) -> _Owner | None:
    owner = _owner_cache.get(inode)
    if owner is None:
        return None
    if _readlink(f"{proc_root}/{owner[0]}/fd/{owner[2]}") == f"socket:[{inode}]":
        return owner
    del _owner_cache[inode]
    return None


def _scan_fds(inodes: set[int], proc_root: str) -> dict[int, _Owner]:
    wanted = {f"socket:[{inode}]": inode for inode in inodes}
    found: dict[int, _Owner] = {}
    budget = _MAX_FD_LINKS
    for pid in _pids(proc_root):
        fd_dir = f"{proc_root}/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue  # gone, or another user's process
        for fd in fds[:budget]:
            inode = wanted.get(_readlink(f"{fd_dir}/{fd}"))
            if inode is not None and inode not in found and fd.isdigit():
                found[inode] = _owner_cache[inode] = (pid, _comm(pid, proc_root), int(fd))
        budget -= len(fds)
        if budget <= 0 or len(found) == len(wanted):
            break
    return found


def _pids(proc_root: str) -> list[int]:
    try:
        return sorted((int(name) for name in os.listdir(proc_root) if name.isdigit()), reverse=True)
    except OSError:
        return []


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def _comm(pid: int, proc_root: str) -> str | None:
    try:
        with open(f"{proc_root}/{pid}/comm", "rb") as fh:
            return fh.read().decode("utf-8", "replace").strip() or None
    except OSError:
        return None


def _socket(row: _Row, owner: _Owner | None) -> ListeningSocket:
    if owner is None:
        return ListeningSocket(host=row.host, port=row.port)
    return ListeningSocket(host=row.host, port=row.port, pid=owner[0], process=owner[1])


def _render_table(rows: Sequence[_Row], owners: dict[int, _Owner]) -> str:
    """The /proc rows as `ss -tlnp` prints them, so ports.txt has one shape whatever made it."""
    lines = [_HEADER]
    for row in rows:
        local = f"[{row.host}]:{row.port}" if ":" in row.host else f"{row.host}:{row.port}"
        peer = "[::]:*" if ":" in row.host else "0.0.0.0:*"
        owner = owners.get(row.inode)
        users = f'users:(("{owner[1] or "?"}",pid={owner[0]},fd={owner[2]}))' if owner else ""
        lines.append(f"LISTEN {row.rx:<6} {row.tx:<6} {local:<25} {peer:<18} {users}".rstrip())
    return "\n".join(lines) + "\n"
