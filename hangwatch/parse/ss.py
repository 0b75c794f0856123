"""`ss -tlnp` text (live, or a bundle's ports.txt) -> listening sockets."""

from __future__ import annotations

import re

from hangwatch.model import ListeningSocket

__all__ = ["parse_ss"]

_USER = re.compile(r'\("(?P<name>(?:[^"\\]|\\.)*)",pid=(?P<pid>\d+)')


def parse_ss(text: str) -> list[ListeningSocket]:
    """Parse `ss -tlnp` / `ss -tlnpH` output (the header line is optional)."""
    sockets = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 5 or fields[0] == "State":
            continue
        host, port = _split_address(fields[3])
        if port is None:
            continue
        user = _USER.search(line)
        pid = int(user["pid"]) if user else None
        sockets.append(ListeningSocket(host=host, port=port, pid=pid, process=user["name"] if user else None))
    return sockets


def _split_address(text: str) -> tuple[str, int | None]:
    host, _, port = text.rpartition(":")
    host = host.strip("[]").split("%", 1)[0]  # "[::1]" -> "::1"; "127.0.0.53%lo" -> "127.0.0.53"
    if host == "*":
        host = "::"  # ss prints a dual-stack wildcard as "*"
    return host, int(port) if port.isdigit() else None
