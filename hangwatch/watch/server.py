"""Who is watched, as the watch names it: `ServerInfo` from what discover() (or `run`) found."""

from __future__ import annotations

import re
from typing import Any

from hangwatch.watch.observation import ServerInfo

__all__ = ["server_info", "server_name", "server_pid"]


def server_info(server: Any) -> ServerInfo:
    from hangwatch.engines import env_prefixes
    from hangwatch.redact import filter_env

    return ServerInfo(
        name=server_name(server), engine=getattr(server, "engine", None), launcher_pid=server.launcher_pid,
        host=getattr(server, "host", None), port=getattr(server, "port", None) or None,
        cmdline=getattr(server, "cmdline", None), flags=dict(getattr(server, "flags", None) or {}),
        env=dict(filter_env(getattr(server, "env", None) or {}, env_prefixes())), log_path=getattr(server, "log_path", None),
        host_name=getattr(server, "host_name", None),
    )  # fmt: skip


def server_name(server: Any) -> str:
    engine = getattr(server, "engine", None) or "server"
    port = getattr(server, "port", None)
    host = getattr(server, "host", None) or "localhost"
    pid = getattr(server, "launcher_pid", None)
    return f"{engine} pid {pid} on {host}:{port}" if port else f"{engine} pid {pid}"


def server_pid(name: str) -> int | None:
    """The launcher pid in a `server_name` label (a history file's records name servers by it)."""
    found = re.search(r"\bpid (\d+)\b", name)
    return int(found.group(1)) if found else None
