"""CRI and Docker json-file decoding, on files real runtimes wrote (tests/data/runtime-logs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hangwatch.parse.runtimelog import CriDecoder, DockerJsonDecoder, decoder_for, sniff_format

DATA = Path(__file__).resolve().parents[2] / "data" / "runtime-logs"
LONG = b"long:" + b"0123456789" * 2500 + b":end\n"


@pytest.mark.parametrize(("name", "fmt"), [
    ("recorded-docker-20.10.24-json-file.log", "docker-json"),
    ("recorded-podman-4.3.1-k8s-file.log", "cri"),
])
def test_recorded_runtime_files_give_the_servers_lines(name: str, fmt: str) -> None:
    # GIVEN a log file a real runtime wrote, with a long line it cut into pieces
    raw = (DATA / name).read_bytes()
    # WHEN it is decoded
    out = decoder_for(fmt).feed(raw)
    # THEN the server's own lines come out whole; the unfinished last line waits for its end
    lines = out.splitlines(keepends=True)
    assert b"[2026-11-30 23:10:01 TP0] Load weight begin. avail mem=1.00 GB\n" in lines
    assert b"to stderr: Init torch distributed begin.\n" in lines
    assert LONG in lines
    assert len(lines) == 3
    assert b"no newline at exit" not in out


def test_recorded_file_fed_in_any_chunks_gives_the_same_lines() -> None:
    raw = (DATA / "recorded-podman-4.3.1-k8s-file.log").read_bytes()
    whole = CriDecoder().feed(raw)
    decoder = CriDecoder()
    records = raw.splitlines(keepends=True)
    pieces = b"".join(decoder.feed(record) for record in records)  # one record per tick
    assert pieces == whole


def test_cri_partials_are_joined_per_stream() -> None:
    decoder = CriDecoder()
    data = (
        b"2026-11-30T23:00:00.1Z stdout P Loading safetensors \n"
        b"2026-11-30T23:00:00.2Z stderr F an error line\n"
        b"2026-11-30T23:00:00.3Z stdout F checkpoint shards: 50% Completed | 1/2 [\n"
    )
    assert decoder.feed(data) == b"an error line\nLoading safetensors checkpoint shards: 50% Completed | 1/2 [\n"


def test_cri_empty_message_and_unknown_tags() -> None:
    assert CriDecoder().feed(b"2026-11-30T23:00:00Z stdout F\n2026-11-30T23:00:00Z stdout F:x y\n") == b"\ny\n"


def test_lines_not_in_the_format_pass_through() -> None:
    # a plain file mistaken for a runtime's, or a torn record: nothing is lost
    assert CriDecoder().feed(b"Load weight end.\n") == b"Load weight end.\n"
    assert DockerJsonDecoder().feed(b'{"log": tor\nplain\n') == b'{"log": tor\nplain\n'


def test_docker_pieces_join_until_the_newline() -> None:
    pieces = [{"log": "a" * 16384, "stream": "stderr"}, {"log": "b\n", "stream": "stderr"}]
    data = b"".join(json.dumps(p).encode() + b"\n" for p in pieces)
    assert DockerJsonDecoder().feed(data) == b"a" * 16384 + b"b\n"


def test_docker_keeps_the_servers_bytes() -> None:
    entry = json.dumps({"log": "tqdm \r 50%|█████ | 1/2\n", "stream": "stderr"}).encode()
    assert DockerJsonDecoder().feed(entry + b"\n") == "tqdm \r 50%|█████ | 1/2\n".encode()


def test_unknown_format_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown log format 'syslog'"):
        decoder_for("syslog")


@pytest.mark.parametrize(("name", "fmt"), [
    ("recorded-docker-20.10.24-json-file.log", "docker-json"),
    ("recorded-podman-4.3.1-k8s-file.log", "cri"),
])
def test_a_runtime_file_given_by_hand_is_recognised(name: str, fmt: str) -> None:
    assert sniff_format((DATA / name).read_bytes()[:4096]) == fmt


def test_a_server_log_is_plain() -> None:
    assert sniff_format(b"[2026-11-30 23:10:01 TP0] Load weight begin.\n") == "plain"
    assert sniff_format(b"") == "plain"
