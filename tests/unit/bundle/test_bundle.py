"""hangwatch.bundle: docs/bundle-format.md bundles read from directories and .tar.gz, and written back."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from hangwatch.bundle import archive as bundle_archive
from hangwatch.bundle import (
    bundle_tarball_bytes,
    evidence_from_files,
    read_bundle,
    read_bundle_files,
    write_bundle,
)
from hangwatch.errors import BundleError
from hangwatch.model import GpuProcess, ListeningSocket, Missing, Phase, Source
from helpers.paths import FIXTURES

BUNDLES = FIXTURES / "bundles"
FULL = BUNDLES / "sglang-dist-init"
META = b'{"format": "hangwatch-bundle/1"}'


def files_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def make_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def regular(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


# ---------------------------------------------------------------- a full bundle


def test_full_bundle_directory() -> None:
    # WHEN
    ev = read_bundle(FULL)
    # THEN every file lands in its field
    assert ev.meta["engine_version"] == "0.5.23" and ev.engine == "sglang"
    assert (ev.observed_for_s, ev.since_last_progress_s) == (412.0, 305.5)
    assert len(ev.log) == 5 and ev.log[1].rank == "TP0"
    assert [(p.phase, p.rank) for p in ev.phases] == [(Phase.DIST_INIT, "TP0")]
    assert ev.cmdline is not None and "--api-key <redacted>" in ev.cmdline and "sk-secret" not in ev.cmdline
    assert ev.flags["tp"] == "2" and ev.flags["dist-init-addr"] == "127.0.0.1:29600"
    assert ev.server_port == 30000
    assert ev.env == {
        "SGLANG_CPU_OMP_THREADS_BIND": "0|1",
        "NCCL_DEBUG": "INFO",
        "HF_TOKEN": "<redacted>",
        "https_proxy": "http://proxy.corp:3128",
        "OMP_NUM_THREADS": "1",
    }


def test_full_bundle_procs_gpus_ports_dmesg() -> None:
    ev = read_bundle(FULL)
    assert [(p.pid, p.role, p.rank, p.alive, p.exit_code) for p in ev.procs] == [
        (15283, "launcher", None, True, None),
        (15352, "scheduler", "TP0", True, None),
        (15353, "other", None, False, -9),
    ]  # the entry without a pid is skipped
    assert ev.procs[1].num_threads == 41 and ev.procs[1].cpu_time_s == 9.5
    assert ev.procs[2].cmdline == "python -c 'from multiprocessing.spawn import spawn_main'"
    assert [s.t for s in ev.gpus] == [0.0, 5.0]
    gpu = ev.gpus[0].gpus[0]
    assert (gpu.name, gpu.compute_capability, gpu.memory_used_mib, gpu.processes) == (
        "NVIDIA H200", "9.0", 500.0, (GpuProcess(15352, 480.0),),
    )  # fmt: skip
    assert ev.ports_text is not None and ev.ports_text.startswith("State")
    assert ev.ports[0] == ListeningSocket("127.0.0.1", 29600, 15352, "sglang::schedul")
    assert ev.dmesg == ("[12345.678] NVRM: Xid (PCI:0000:3b:00): 79, pid=15352, GPU has fallen off the bus.",)


def test_full_bundle_stacks() -> None:
    ev = read_bundle(FULL)
    assert [(s.label, s.sample, s.pid, s.native) for s in ev.stacks] == [
        ("15283", 0, 15283, False),
        ("TP0", 0, 12368, False),
        ("TP0", 1, 12368, True),
    ]
    assert ev.stacks[1].source == Source("stacks/TP0.json")
    # a file in stacks/ that is no stack at all is noted, not fatal
    assert ev.missing == (Missing("stacks", "stacks/notes.txt: not a stack format hangwatch reads", "py-spy dump --pid PID [--json]"),)


def test_malformed_procs_json_does_not_fail_the_bundle() -> None:
    ev = read_bundle(BUNDLES / "malformed-procs")
    assert ev.procs == ()
    assert [m.source for m in ev.missing] == ["procs"]
    assert ev.missing[0].reason.startswith("procs.json could not be read: ")
    # the rest is still read
    assert ev.gpus[0].gpus[0].compute_capability == "12.0"
    assert ev.engine == "vllm"  # meta says null: guessed from the log
    assert [(s.label, s.pid) for s in ev.stacks] == [("4242", 4242)]
    assert ev.server_port is None  # no command line: the default port would only be a guess


@pytest.mark.parametrize(
    ("name", "data", "source"),
    [
        ("procs.json", b'{"procs": 3}', "procs"),
        ("gpus.json", b"[1, 2", "gpus"),
        ("gpus.json", b'{"samples": "many"}', "gpus"),
        ("procs.json", b"\xff\xfe", "procs"),
    ],
)
def test_each_malformed_optional_file_is_missing(name: str, data: bytes, source: str) -> None:
    ev = evidence_from_files({"meta.json": META, name: data})
    assert [m.source for m in ev.missing] == [source]


def test_minimal_bundle_has_defaults() -> None:
    ev = evidence_from_files({"meta.json": META})
    assert (ev.engine, ev.log, ev.cmdline, ev.flags, ev.env, ev.procs, ev.gpus, ev.stacks, ev.missing) == (
        None, (), None, {}, {}, (), (), (), (),
    )  # fmt: skip
    assert ev.meta == {"format": "hangwatch-bundle/1"}
    assert ev.ports_text is None and ev.server_port is None


def test_default_port_when_command_line_has_none() -> None:
    ev = evidence_from_files({"meta.json": META, "cmdline.txt": b"vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2\n"})
    assert ev.engine == "vllm" and ev.server_port == 8000 and ev.flags["tp"] == "2"


def test_unknown_engine_in_meta_is_guessed_from_the_log() -> None:
    meta = b'{"format": "hangwatch-bundle/1", "engine": "xinference"}'
    log = b"[2026-11-29 23:43:26 TP0] Init parallel begin.\n"
    ev = evidence_from_files({"meta.json": meta, "server.log": log, "cmdline.txt": b"python -m sglang.launch_server --tp 2"})
    assert ev.engine == "sglang" and ev.phases and ev.server_port == 30000
    assert [m.source for m in ev.missing] == ["log"] and "xinference" in ev.missing[0].reason


def test_meta_numbers_that_are_not_numbers_are_unknown() -> None:
    ev = evidence_from_files({"meta.json": b'{"format": "hangwatch-bundle/1", "observed_for_s": "soon", "since_last_progress_s": true}'})
    assert (ev.observed_for_s, ev.since_last_progress_s) == (None, None)


# ---------------------------------------------------------------- bad bundles


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        (None, "no meta.json"),
        (b"{not json", "meta.json is not valid JSON"),
        (b"[1]", "meta.json must hold a JSON object, not list"),
        (b'{"engine": "sglang"}', 'meta.json has no "format"'),
        (b'{"format": "hangwatch-bundle/2"}', "meta.json format 'hangwatch-bundle/2' is not known"),
    ],
)
def test_bad_meta_is_a_clear_bundle_error(tmp_path: Path, meta: bytes | None, message: str) -> None:
    (tmp_path / "server.log").write_bytes(b"hello\n")
    if meta is not None:
        (tmp_path / "meta.json").write_bytes(meta)
    with pytest.raises(BundleError) as info:
        read_bundle(tmp_path)
    text = str(info.value)
    assert text.startswith(f"{tmp_path}: {message}") and "\n" not in text


def test_path_not_found(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match=r"^bundle not found: .*nope$"):
        read_bundle(tmp_path / "nope")


def test_a_plain_file_is_not_a_bundle(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"[2026-11-29 23:43:26 TP0] Init parallel begin.\n")
    with pytest.raises(BundleError, match="is not a bundle: expected a directory or a .tar.gz archive"):
        read_bundle(log)


def test_a_broken_archive(tmp_path: Path) -> None:
    broken = tmp_path / "b.tar.gz"
    broken.write_bytes(b"\x1f\x8b\x08\x00 definitely not gzip")
    with pytest.raises(BundleError, match=r"^cannot read archive .*b\.tar\.gz: "):
        read_bundle(broken)


def test_truncated_archive(tmp_path: Path) -> None:
    data = bundle_tarball_bytes(files_of(FULL))
    cut = tmp_path / "cut.tgz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(BundleError, match="cannot read archive"):
        read_bundle(cut)


@pytest.mark.parametrize(
    "member",
    [
        regular("../evil.txt", b"x"),
        regular("b/../../evil.txt", b"x"),
        regular("/etc/cron.d/evil", b"x"),
        link("b/passwd", "/etc/passwd"),
        link("b/up", "../../outside"),
        link("b/hard", "../outside", tarfile.LNKTYPE),
    ],
)
def test_traversal_archive_refused(tmp_path: Path, member: tuple[tarfile.TarInfo, bytes | None]) -> None:
    archive = make_tar(tmp_path / "evil.tar.gz", [regular("b/meta.json", META), member])
    with pytest.raises(BundleError, match="^refusing archive member"):
        read_bundle(archive)
    assert not (tmp_path.parent / "evil.txt").exists()


def test_links_inside_the_bundle_are_ignored(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "ok.tar.gz", [regular("b/meta.json", META), link("b/stacks/TP0.json", "../meta.json")])
    assert read_bundle_files(archive) == {"meta.json": META}


def test_directory_link_outside_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    root = tmp_path / "b"
    root.mkdir()
    (root / "meta.json").write_bytes(META)
    os.symlink(secret, root / "env.txt")
    with pytest.raises(BundleError, match="env.txt is a link to .*secret.txt, outside the bundle"):
        read_bundle(root)


def test_size_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bundle_archive, "MAX_BUNDLE_BYTES", 2 * 2**20)
    archive = make_tar(tmp_path / "big.tar.gz", [regular("b/meta.json", META), regular("b/server.log", b"x" * 3 * 2**20)])
    with pytest.raises(BundleError, match=r"larger than 2 MiB \(at b/server.log\): not a bundle"):
        read_bundle(archive)


# ---------------------------------------------------------------- layouts


def test_archive_without_top_folder_and_dir_with_one_nested_folder(tmp_path: Path) -> None:
    flat = make_tar(tmp_path / "flat.tgz", [regular("meta.json", META), regular("./server.log", b"x\n")])
    assert read_bundle_files(flat) == {"meta.json": META, "server.log": b"x\n"}
    nested = tmp_path / "extracted" / "bundle-1"
    nested.mkdir(parents=True)
    (nested / "meta.json").write_bytes(META)
    assert read_bundle_files(tmp_path / "extracted") == {"meta.json": META}


# ---------------------------------------------------------------- writing


def test_tar_gz_roundtrip(tmp_path: Path) -> None:
    # GIVEN the files of a bundle directory
    files = files_of(FULL)
    # WHEN written as .tar.gz and read back
    out = write_bundle(files, tmp_path / "hw-1234.tar.gz")
    # THEN one top-level folder, and the same evidence as the directory
    with tarfile.open(out) as tar:
        assert {name.split("/", 1)[0] for name in tar.getnames()} == {"hw-1234"}
    assert read_bundle(out) == read_bundle(FULL)


def test_write_directory_redacts_env_and_cmdline(tmp_path: Path) -> None:
    files = {
        "meta.json": META,
        "env.txt": b"HF_TOKEN=hf_x\nhttps_proxy=http://a:b@p:1\nNCCL_DEBUG=INFO\n",
        "cmdline.txt": b"vllm serve m --api-key sk-1\n",
        "stacks/TP0.json": b"[]",
    }
    out = write_bundle(files, tmp_path / "b")
    assert (out / "env.txt").read_text() == "HF_TOKEN=<redacted>\nhttps_proxy=http://p:1\nNCCL_DEBUG=INFO\n"
    assert (out / "cmdline.txt").read_text() == "vllm serve m --api-key <redacted>\n"
    assert (out / "stacks" / "TP0.json").read_bytes() == b"[]"
    assert read_bundle(out).env["HF_TOKEN"] == "<redacted>"


def test_write_refuses_unsafe_names_and_no_meta(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="path traversal"):
        write_bundle({"meta.json": META, "../x": b""}, tmp_path / "b")
    with pytest.raises(BundleError, match="without meta.json"):
        write_bundle({"server.log": b""}, tmp_path / "c")


def test_bundle_tarball_bytes_for_http() -> None:
    data = bundle_tarball_bytes({"meta.json": META, "env.txt": b"VLLM_API_KEY=k\n"}, mtime=0)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert tar.getnames() == ["hangwatch-bundle/env.txt", "hangwatch-bundle/meta.json"]
        env = tar.extractfile("hangwatch-bundle/env.txt")
        assert env is not None and env.read() == b"VLLM_API_KEY=<redacted>\n"
    assert data == bundle_tarball_bytes({"meta.json": META, "env.txt": b"VLLM_API_KEY=k\n"}, mtime=0)
