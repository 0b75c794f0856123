"""hangwatch's errors. Foreign errors (psutil, pynvml, subprocess, yaml) stop at the module that
calls the foreign library and come out as one of these.

    HangwatchError
     ├── BundleError        a bundle that cannot be read (path, meta.json, format, archive)
     ├── RuleError          a rule file that cannot be loaded (file:line:column: reason)
     ├── SourceUnavailable  a live source that cannot run here (recorded as Missing, never fatal)
     └── TargetError        the pid to watch is gone or is not an inference server
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass


class HangwatchError(Exception):
    """Base error; `help_text` says what to try."""

    help_text: str = ""


class BundleError(HangwatchError, ValueError):
    help_text = "A bundle is a directory (or .tar.gz) with a meta.json holding {\"format\": \"hangwatch-bundle/1\"}."


@dataclass(frozen=True)
class RuleLocation:
    path: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        out = self.path
        if self.line is not None:
            out += f":{self.line}"
            if self.column is not None:
                out += f":{self.column}"
        return out


class RuleError(HangwatchError, ValueError):
    help_text = "Run `hangwatch rules check DIR` to list every problem; docs/rules.md describes the format."

    def __init__(self, reason: str, location: RuleLocation | None = None):
        self.reason = reason
        self.location = location
        super().__init__(f"{location}: {reason}" if location else reason)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and (self.reason, self.location) == (other.reason, other.location)

    def __hash__(self) -> int:
        return hash((type(self), self.reason, self.location))


class SourceUnavailable(HangwatchError):
    """A source cannot run here; `hint` says how to enable it."""

    def __init__(self, source: str, reason: str, hint: str | None = None):
        self.source, self.reason, self.hint = source, reason, hint
        super().__init__(f"{source}: {reason}")


class TargetError(HangwatchError, LookupError):
    help_text = "Give the pid of the server's launcher or of any of its ranks (schedulers, workers)."


def run_entry_point(main: Callable[[], None]) -> None:
    """Run a `python -m hangwatch.…` tool: a HangwatchError (no NVML here, say) is one line and exit 2,
    never a traceback. The line passes the redaction boundary like every other output."""
    from hangwatch.redact import redact_text, terminal_safe

    try:
        main()
    except HangwatchError as exc:
        message = f"hangwatch: error: {exc}" + (f"\n{exc.help_text}" if exc.help_text else "")
        print(redact_text(terminal_safe(message)), file=sys.stderr)
        sys.exit(2)
