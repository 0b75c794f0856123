"""README's example output is what the command prints today (issue 23: docs that cannot drift).
When this fails, paste the expected block it shows into README.md."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WIDTH = 104  # README's code blocks cut a long line here, ending it with "..."


def _cut(line: str) -> str:
    return line if len(line) <= WIDTH else line[: WIDTH - 4] + " ..."


def test_readmes_diagnose_example_is_what_diagnose_prints() -> None:
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"```\n\$ hangwatch diagnose (\S+)[^\n]*\n(.*?)```", readme, re.S)
    assert found, "README has no `$ hangwatch diagnose` example"
    bundle, shown = found.group(1), found.group(2)
    printed = subprocess.run([sys.executable, "-m", "hangwatch", "diagnose", bundle], cwd=ROOT, capture_output=True,
                             text=True, timeout=120, check=True, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"}).stdout
    expected = "".join(_cut(line) + "\n" for line in printed.splitlines())
    assert shown == expected, f"README's diagnose example is out of date; it should read:\n{expected}"
