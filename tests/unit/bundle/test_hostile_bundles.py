"""Untrusted bundles (probe B8-B31): `hangwatch diagnose` as a user runs it, under a memory cap.

Each case is a real file or folder. The contract: a verdict or one clean line on stderr (exit 2),
never a traceback, and the process stays inside the address-space cap it runs under.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import resource
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

HANGWATCH = str(Path(sys.executable).parent / "hangwatch")
META = json.dumps({"format": "hangwatch-bundle/1", "engine": "sglang"}).encode()
MEMORY_CAP = 1536 * 2**20  # the probe's line bomb took > 3 GB; bounded reading needs a fraction of this


def diagnose(target: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    return subprocess.run([HANGWATCH, "diagnose", str(target), *extra], capture_output=True, text=True, check=False,
                          timeout=300, preexec_fn=cap, env={**os.environ, **(env or {})})


def assert_handled(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.returncode in (0, 1, 2), (result.returncode, result.stderr[-500:])
    if result.returncode == 2:
        assert result.stderr.startswith("hangwatch: error:") and len(result.stderr.strip().splitlines()) <= 2


def _header(name: bytes, size: int = 0, typeflag: bytes = b"0") -> bytes:
    h = bytearray(512)
    h[0 : len(name)] = name
    h[100:108], h[108:116], h[116:124] = b"0000644\0", b"0000000\0", b"0000000\0"
    h[124:136] = b"%011o\0" % size
    h[136:148] = b"00000000000\0"
    h[156:157] = typeflag
    h[257:265] = b"ustar  \0"
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def _pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 512)


def _tar_gz(path: Path, members: dict[str, bytes], dirs: int = 0) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for i in range(dirs):
            info = tarfile.TarInfo(f"b/d{i}")
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
        for name, data in members.items():
            info = tarfile.TarInfo(f"b/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_line_bomb_is_read_as_start_and_end_only(tmp_path: Path) -> None:
    # B9: 16 MiB of newlines in a ~16 KB .tar.gz
    target = _tar_gz(tmp_path / "lines.tar.gz", {"meta.json": META, "server.log": b"\n" * (16 * 2**20)})
    result = diagnose(target, "--json")
    assert_handled(result)
    assert result.returncode != 2
    reasons = [m["reason"] for m in json.loads(result.stdout)["missing"]]
    assert any("not read" in r for r in reasons)


def test_gzip_bomb_is_refused_past_the_decompressed_cap(tmp_path: Path) -> None:
    # B10: 200 MiB of zeros; refused while decompressing, before the member is held in memory
    path = tmp_path / "zeros.tar.gz"
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(_header(b"b/meta.json", len(META)) + _pad(META))
        out.write(_header(b"b/server.log", 200 * 2**20))
        for _ in range(200):
            out.write(b"\0" * 2**20)
    result = diagnose(path)
    assert_handled(result)
    assert result.returncode == 2 and "MiB" in result.stderr


def test_directory_members_count_against_the_member_cap(tmp_path: Path) -> None:
    # B8: folder members past MAX_FILES (the probe's 200 000 took 9 s and 128 MB before)
    result = diagnose(_tar_gz(tmp_path / "dirs.tar.gz", {"meta.json": META}, dirs=20_001))
    assert_handled(result)
    assert result.returncode == 2 and "more than" in result.stderr


def test_a_huge_gnu_longname_is_refused_before_it_is_read(tmp_path: Path) -> None:
    # B14: a 1.5 GiB long name (cut here to 64 MiB: the cap applies before any byte of it is read)
    path = tmp_path / "longname.tar.gz"
    size = 64 * 2**20
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(_header(b"././@LongLink", size, typeflag=b"L"))
        for _ in range(size >> 20):
            out.write(b"a" * 2**20)
        out.write(_header(b"ignored", len(META)) + _pad(META) + b"\0" * 1024)
    result = diagnose(path)
    assert_handled(result)
    assert result.returncode == 2 and "header" in result.stderr


def test_a_pax_header_of_digits_is_refused_not_parsed(tmp_path: Path) -> None:
    # B15: CVE-2024-6232, quadratic in tarfile < 3.11.10; 120 000 digits took 35 s
    path = tmp_path / "pax.tar.gz"
    body = b"1" * 120_000
    with gzip.open(path, "wb") as out:
        out.write(_header(b"././@PaxHeader", len(body), typeflag=b"x") + _pad(body))
        out.write(_header(b"b/meta.json", len(META)) + _pad(META) + b"\0" * 1024)
    result = diagnose(path)
    assert_handled(result)
    assert result.returncode == 2 and "header" in result.stderr


def test_a_folder_tree_1100_deep_is_one_line(tmp_path: Path) -> None:
    # B17
    root = tmp_path / "deep"
    root.mkdir()
    (root / "meta.json").write_bytes(META)
    here = root
    for _ in range(1100):
        here = here / "d"
        here.mkdir()
    try:
        result = diagnose(root)
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=False, timeout=60)  # shutil.rmtree (pytest's cleanup) recurses
    assert_handled(result)
    assert result.returncode == 2 and "nested" in result.stderr


def test_non_utf8_names_print_on_a_strict_utf8_terminal(tmp_path: Path) -> None:
    # B18
    root = tmp_path / "nonutf8"
    (root / "stacks").mkdir(parents=True)
    (root / "meta.json").write_bytes(META)
    (os.fsencode(root / "stacks") + b"/TP\xff\xfe.txt")
    with open(os.fsencode(root / "stacks") + b"/TP\xff\xfe.txt", "wb") as fh:
        fh.write(b"not a stack\n")
    for extra in ((), ("--json",)):
        result = diagnose(root, *extra, env={"PYTHONIOENCODING": "utf-8"})
        assert_handled(result)
        assert result.returncode != 2


@pytest.mark.parametrize("name", ["meta.json", "gpus.json", "procs.json", "stacks/TP0.json", "meta-inside"])
def test_json_nested_100000_deep_is_handled(tmp_path: Path, name: str) -> None:
    # B19
    root = tmp_path / "j"
    (root / "stacks").mkdir(parents=True)
    deep = "[" * 100_000 + "]" * 100_000
    (root / "meta.json").write_bytes(META)
    if name == "meta-inside":
        (root / "meta.json").write_text('{"format": "hangwatch-bundle/1", "x": ' + deep + "}")
    else:
        (root / name).write_text(deep)
    assert_handled(diagnose(root))


@pytest.mark.parametrize(("name", "content"), [
    ("meta.json", '{"format": "hangwatch-bundle/1", "progress_signals": 5}'),                     # B20
    ("procs.json", '[{"pid": Infinity}, {"pid": 1, "ppid": Infinity}]'),                          # B24
    ("gpus.json", '{"samples": [{"t": 0, "gpus": [{"index": Infinity}]}]}'),                       # B24
    ("stacks/TP3.json", '[{"frames": 5}]'),                                                       # B26
    ("meta.json", '{"format": "hangwatch-bundle/1", "observed_for_s": Infinity, "since_last_progress_s": NaN}'),
])  # fmt: skip
def test_wrong_types_and_infinities_give_a_verdict(tmp_path: Path, name: str, content: str) -> None:
    root = tmp_path / "w"
    (root / "stacks").mkdir(parents=True)
    (root / "meta.json").write_bytes(META)
    (root / name).write_text(content)
    result = diagnose(root, "--json")
    assert_handled(result)
    assert result.returncode != 2
    verdict = json.loads(result.stdout)
    assert verdict["since_s"] is None or verdict["since_s"] < 1e300  # `Infinity` is no number of seconds


def test_terminal_escapes_in_a_bundle_never_reach_the_terminal(tmp_path: Path) -> None:
    # B31
    root = tmp_path / "esc"
    root.mkdir()
    hostile = "\x1b]0;PWNED\x07 \x1b]52;c;ZXZpbA==\x07 \x1b[2J \x9b31m"
    meta = {"format": "hangwatch-bundle/1", "missing": [{"source": "gpus", "reason": hostile}]}
    (root / "meta.json").write_text(json.dumps(meta))
    (root / "server.log").write_text(f"[2026-01-01 10:00:00 TP0] Load weight begin {hostile}\n")
    for extra in ((), ("--json",)):
        result = diagnose(root, *extra)
        assert_handled(result)
        for raw in ("\x1b]", "\x07", "\x9b", "\x1b[2J"):
            assert raw not in result.stdout and raw not in result.stderr


def _deep_json_thread(depth: int) -> list[dict[str, object]]:
    frames = [{"name": "wait", "filename": "/opt/sglang/srt/managers/scheduler.py", "line": 1}]
    frames += [{"name": f"recurse_{i}", "filename": "/opt/sglang/srt/layers/x.py", "line": i} for i in range(depth - 2)]
    frames += [{"name": "<module>", "filename": "/opt/sglang/launch_server.py", "line": 9}]
    return [{"thread_name": "MainThread", "os_thread_id": 7, "pid": 42, "frames": frames}]


def test_a_thread_deeper_than_the_bound_keeps_where_it_waits_and_what_started_it(tmp_path: Path) -> None:
    # B27: 1e6 frames took 20 s and 0.9 GB; every kept frame costs every stack rule a search
    from hangwatch import read_bundle
    from hangwatch.parse.frames import MAX_THREAD_FRAMES

    root = tmp_path / "deep"
    (root / "stacks").mkdir(parents=True)
    (root / "meta.json").write_bytes(META)
    (root / "stacks" / "TP0.json").write_text(json.dumps(_deep_json_thread(50_000)))
    text = "Thread 0x7 (idle): \"MainThread\"\n" + "".join(
        f"    recurse_{i} (/opt/sglang/srt/layers/x.py:{i})\n" for i in range(20_000)) + "    <module> (launch_server.py:9)\n"
    (root / "stacks" / "TP1.txt").write_text(text)
    evidence = read_bundle(root)
    by_label = {s.label: s.threads[0].frames for s in evidence.stacks}
    assert len(by_label["TP0"]) == len(by_label["TP1"]) == MAX_THREAD_FRAMES
    assert (by_label["TP0"][0].function, by_label["TP0"][-1].function) == ("wait", "<module>")
    assert (by_label["TP1"][0].function, by_label["TP1"][-1].function) == ("recurse_0", "<module>")


def test_stack_files_past_their_bound_are_cut_or_skipped_and_said(tmp_path: Path) -> None:
    # B27: a stack file is read up to 8 MiB, whole lines (a JSON dump cannot be cut: skipped)
    from hangwatch import read_bundle
    from hangwatch.bundle.read import MAX_STACK_FILE_BYTES

    root = tmp_path / "big"
    (root / "stacks").mkdir(parents=True)
    (root / "meta.json").write_bytes(META)
    line = f"    wait_{'x' * 200} (/opt/sglang/srt/managers/scheduler.py:1)\n"
    text = "Thread 0x7 (idle): \"MainThread\"\n" + line * (MAX_STACK_FILE_BYTES // len(line) + 1000)
    (root / "stacks" / "TP0.txt").write_text(text)
    (root / "stacks" / "TP1.json").write_text(json.dumps(_deep_json_thread(10)) + " " * MAX_STACK_FILE_BYTES)
    evidence = read_bundle(root)
    assert [s.label for s in evidence.stacks] == ["TP0"]
    reasons = {m.reason.split(":")[0]: m.reason for m in evidence.missing if m.source == "stacks"}
    assert "KiB read" in reasons["stacks/TP0.txt"] and "not read" in reasons["stacks/TP1.json"]
    assert len(evidence.stacks[0].threads[0].frames) > 0
