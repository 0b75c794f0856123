"""hangwatch's own secrets from variables and files, never needed in argv (probe A17)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hangwatch.cli.live import WatchOptions, read_secret_file
from hangwatch.errors import TargetError

HANGWATCH = str(Path(sys.executable).parent / "hangwatch")


def test_secret_files_fill_the_options(tmp_path: Path) -> None:
    for name, value in (("token", "tok-1"), ("webhook", "http://h/x?token=w"), ("slack", "https://hooks.slack.com/services/T/B/X")):
        (tmp_path / name).write_text(f"{value}\n# a comment line is ignored\n")
    opts = WatchOptions(token_file=tmp_path / "token", webhook_file=tmp_path / "webhook",
                        slack_webhook_file=tmp_path / "slack").with_secret_files()
    assert (opts.token, opts.webhook, opts.slack_webhook) == ("tok-1", "http://h/x?token=w", "https://hooks.slack.com/services/T/B/X")


@pytest.mark.parametrize("content", ["", "\n\n"])
def test_an_empty_secret_file_is_an_error(tmp_path: Path, content: str) -> None:
    (tmp_path / "t").write_text(content)
    with pytest.raises(TargetError, match="empty"):
        read_secret_file(tmp_path / "t")


def test_cli_refuses_a_flag_and_its_file_together_and_a_missing_file_in_one_line(tmp_path: Path) -> None:
    both = subprocess.run([HANGWATCH, "attach", "1", "--token", "x", "--token-file", str(tmp_path / "t")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert both.returncode == 2 and "not both" in both.stderr and "Traceback" not in both.stderr
    missing = subprocess.run([HANGWATCH, "attach", "1", "--token-file", str(tmp_path / "nope")],
                             capture_output=True, text=True, timeout=60, check=False)
    assert missing.returncode == 2 and "cannot read the secret file" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_variables_are_read_for_every_secret() -> None:
    help_text = subprocess.run([HANGWATCH, "attach", "--help"], capture_output=True, text=True, timeout=60,
                               check=False, env={"COLUMNS": "300", "PATH": "/usr/bin:/bin"}).stdout
    for variable in ("HANGWATCH_TOKEN", "HANGWATCH_TOKEN_FILE", "HANGWATCH_WEBHOOK", "HANGWATCH_WEBHOOK_FILE",
                     "HANGWATCH_SLACK_WEBHOOK", "HANGWATCH_SLACK_WEBHOOK_FILE"):
        assert variable in help_text
