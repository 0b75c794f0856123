"""read_log_lines: prefixes of SGLang / vLLM / uvicorn / NCCL and the dirt real logs carry.

Strings are copied from ../shared/reference/sglang-startup.md, ../shared/reference/sglang-on-cpu.md §3.5 and the DEV
corpus (../shared/corpus/dev/*/server.log).
"""

from __future__ import annotations

import pytest

from hangwatch.parse.logs import (
    MAX_TEXT,
    normalise_rank,
    rank_from_name,
    read_log_lines,
)


def one(raw: bytes):
    (line,) = read_log_lines(raw)
    return line


# ---------------------------------------------------------------- SGLang


def test_sglang_rank_prefix_from_real_cpu_log():
    line = one(b"[2026-11-29 23:43:26 TP0] Init parallel begin.")
    assert (line.rank, line.timestamp, line.message) == ("TP0", "2026-11-29 23:43:26", "Init parallel begin.")
    assert line.process is None and line.pid is None


def test_sglang_ms_timestamp_and_several_rank_tags():
    line = one(b"[2026-11-29 23:43:26.123 DP0 TP3] Load weight begin. avail mem=78.12 GB")
    assert (line.rank, line.timestamp) == ("DP0_TP3", "2026-11-29 23:43:26.123")
    assert line.message == "Load weight begin. avail mem=78.12 GB"


@pytest.mark.parametrize(
    "prefix, rank",
    [
        ("DP0 TP3", "DP0_TP3"),
        ("TP3 DP0", "DP0_TP3"),
        ("DP1 TP3 PP1", "DP1_PP1_TP3"),  # 0.4.6 order: DP, TP, PP
        ("PP1 TP3", "PP1_TP3"),
        ("ATTN_CP1 MOE_DP2 TP0 EP4", "ATTN_CP1_MOE_DP2_TP0_EP4"),
    ],
)
def test_rank_tags_any_order_normalise_to_one_key(prefix, rank):
    assert one(f"[2026-01-01 12:00:00 {prefix}] x".encode()).rank == rank


def test_dateless_timestamp_from_2024_logs():
    line = one(b"[23:17:01 TP7] Capture cuda graph begin. This can take up to several minutes. avail mem=10.00 GB")
    assert (line.timestamp, line.rank) == ("23:17:01", "TP7")
    assert line.message.startswith("Capture cuda graph begin.")


def test_launcher_line_has_timestamp_and_no_rank():
    line = one(b"[2026-01-01 12:00:00] server_args=ServerArgs(model_path='x')")
    assert (line.rank, line.timestamp, line.message) == (None, "2026-01-01 12:00:00", "server_args=ServerArgs(model_path='x')")


def test_unprefixed_line_keeps_whole_text_as_message():
    line = one(b"Memory pool end. avail mem=21.77 GB")
    assert (line.rank, line.timestamp, line.message) == (None, None, "Memory pool end. avail mem=21.77 GB")


def test_uvicorn_line_inside_sglang_prefix_loses_level():
    line = one(b"[2026-01-01 12:00:00] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)")
    assert line.message == "Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)"
    assert line.text.startswith("[2026-01-01 12:00:00] INFO:")


def test_bare_uvicorn_line():
    assert one(b"INFO:     Application startup complete.").message == "Application startup complete."


def test_init_line_is_not_mistaken_for_a_level():
    assert one(b"Init parallel ends. elapsed=0.02 s").message == "Init parallel ends. elapsed=0.02 s"


# ---------------------------------------------------------------- vLLM


def test_vllm_033_process_prefix():
    line = one(b"(EngineCore pid=123) INFO 08-14 10:01:27 [core.py:139] Initializing a V1 LLM engine (v0.33.0) with config")
    assert (line.process, line.pid, line.rank, line.timestamp) == ("EngineCore", 123, None, "08-14 10:01:27")
    assert line.message == "Initializing a V1 LLM engine (v0.33.0) with config"


def test_vllm_worker_process_gives_rank_from_corpus_style_line():
    line = one(b"(Worker_TP1 pid=960) INFO 08-12 20:26:09 [pynccl.py:113] vLLM is using nccl==2.28.9")
    assert (line.process, line.rank, line.pid, line.message) == ("Worker_TP1", "TP1", 960, "vLLM is using nccl==2.28.9")


def test_vllm_plain_worker_has_no_rank():
    line = one(b"(Worker pid=960) INFO 08-12 20:26:09 [pynccl.py:113] vLLM is using nccl==2.28.9")
    assert (line.process, line.rank) == ("Worker", None)


def test_vllm_011_ansi_wrapped_process_prefix():
    line = one(b"\x1b[1;36m(VllmWorker TP0 pid=5)\x1b[0;0m INFO 08-14 10:01:27 [gpu_worker.py:297] Available KV cache memory: 1.00 GiB")
    assert (line.process, line.rank, line.pid) == ("VllmWorker TP0", "TP0", 5)
    assert line.message == "Available KV cache memory: 1.00 GiB"
    assert "\x1b" not in line.text


def test_old_vllm_format_without_brackets():
    line = one(b"INFO 08-14 10:01:27 model_runner.py:692] Loading model weights took 13.5083 GB")
    assert (line.timestamp, line.message) == ("08-14 10:01:27", "Loading model weights took 13.5083 GB")


def test_redacted_pid_and_missing_timestamp_from_corpus():
    line = one(b"(EngineCore pid=...) INFO [shm_broadcast.py:705] No available shared memory broadcast block found in 60 seconds")
    assert (line.process, line.pid, line.timestamp) == ("EngineCore", None, None)
    assert line.message.startswith("No available shared memory")


def test_traceback_line_under_process_prefix_keeps_indent():
    line = one(b'(ApiServer_7 pid=161396)   File "/x/vllm/v1/engine/core_client.py", line 496, in __init__')
    assert (line.process, line.rank) == ("ApiServer_7", None)
    assert line.message == '  File "/x/vllm/v1/engine/core_client.py", line 496, in __init__'


def test_vllm_uvicorn_line_under_process_prefix():
    line = one(b"(APIServer pid=7) INFO:     Application startup complete.")
    assert (line.process, line.message) == ("APIServer", "Application startup complete.")


# ---------------------------------------------------------------- NCCL


def test_nccl_info_line_rank_from_device_and_pid():
    line = one(b"ip-172-31-13-247:50202:50264 [2] NCCL INFO Channel 00/0 : 2[2] -> 3[3] via P2P/CUMEM")
    assert (line.rank, line.pid) == ("TP2", 50202)
    assert line.message == "NCCL INFO Channel 00/0 : 2[2] -> 3[3] via P2P/CUMEM"


def test_nccl_version_line_from_corpus():
    line = one(b"test:259034:259034 [0] NCCL INFO NCCL version 2.25.1+cuda12.8")
    assert (line.rank, line.message) == ("TP0", "NCCL INFO NCCL version 2.25.1+cuda12.8")


# ---------------------------------------------------------------- dirt


def test_tqdm_carriage_returns_keep_last_segment_and_count_updates():
    raw = (
        b"Capturing batches (bs=160 avail_mem=21.85 GB):   0%|          | 0/20 [00:00<?, ?it/s]"
        b"\rCapturing batches (bs=152 avail_mem=21.80 GB):   5%|5         | 1/20 [00:01<00:19,  1.00s/it]"
        b"\rCapturing batches (bs=144 avail_mem=21.75 GB):  10%|#         | 2/20 [00:02<00:18,  1.00s/it]\r"
    )
    line = one(raw + b"\n")
    assert line.updates == 3
    assert line.text.startswith("Capturing batches (bs=144")


def test_tqdm_clearing_blank_segments_are_not_updates():
    line = one(b"bar 1\r\r   \rbar 2\r    \n")
    assert (line.text, line.updates) == ("bar 2", 2)


def test_only_blank_segments_give_empty_line():
    assert (one(b"\r  \r\n").text, one(b"\r  \r\n").updates) == ("", 1)


def test_crlf_is_one_line_break():
    lines = read_log_lines(b"a\r\nb\r\n")
    assert [(ln.lineno, ln.text, ln.updates) for ln in lines] == [(1, "a", 1), (2, "b", 1)]


def test_invalid_utf8_is_replaced_not_fatal():
    line = one(b"[2026-01-01 12:00:00 TP0] bad \xff\xfe bytes")
    assert line.rank == "TP0"
    assert "\ufffd" in line.message


def test_very_long_line_is_capped():
    line = one(b"[2026-01-01 12:00:00 TP0] server_args=" + b"x" * 100_000)
    assert len(line.text) == MAX_TEXT
    assert line.rank == "TP0"


def test_line_numbers_start_where_asked_and_keep_empty_lines():
    lines = read_log_lines(b"a\n\nc", start_lineno=41)
    assert [(ln.lineno, ln.text) for ln in lines] == [(41, "a"), (42, ""), (43, "c")]


def test_empty_input():
    assert read_log_lines(b"") == ()


def test_five_mib_log_with_tqdm_ansi_and_bad_bytes():
    bar_run = b"".join(
        b"\rLoading safetensors checkpoint shards: %3d%% Completed | %d/163 [00:01<00:01]" % (n * 100 // 163, n)
        for n in range(1, 164)
    )
    block = (
        b"\x1b[1;36m(Worker_TP1 pid=9)\x1b[0;0m INFO 08-12 20:26:09 [pynccl.py:113] vLLM is using nccl==2.28.9\n"
        b"[2026-11-29 23:43:26 TP3] Load weight begin. avail mem=78.12 GB\r\n"
        + bar_run
        + b"\n"
        + b"bad \xff bytes \xc3\x28 here\n"
        + b"ip-172-31-13-247:50202:50264 [2] NCCL INFO Channel 00/0 : 2[2] -> 3[3] via P2P/CUMEM\n"
    )
    count = (5 * 1024 * 1024) // len(block) + 1
    lines = read_log_lines(block * count)
    assert len(lines) == 5 * count
    assert lines[-1].lineno == 5 * count
    bar = lines[2]
    assert bar.text == "Loading safetensors checkpoint shards: 100% Completed | 163/163 [00:01<00:01]"
    assert bar.updates == 163
    assert all(ln.text == bar.text for ln in lines[2::5])
    assert {ln.rank for ln in lines[0::5]} == {"TP1"}
    assert {ln.rank for ln in lines[1::5]} == {"TP3"}
    assert all("\x1b" not in ln.text for ln in lines[0::5])
    assert all("\ufffd" in ln.text for ln in lines[3::5])


# ---------------------------------------------------------------- rank helpers


def test_normalise_rank():
    assert normalise_rank(["TP3", "PP1"]) == "PP1_TP3"
    assert normalise_rank([]) is None
    assert normalise_rank(["nonsense"]) is None


@pytest.mark.parametrize(
    "name, rank",
    [("Worker_TP1", "TP1"), ("Worker_DP0_PP1_TP3", "DP0_PP1_TP3"), ("EngineCore_DP0", "DP0"), ("EngineCore", None),
     ("VllmWorker TP0", "TP0"), ("ApiServer_7", None), ("Worker_PCP1_TP2_DCP0", "PCP1_TP2_DCP0")],
)  # fmt: skip
def test_rank_from_name(name, rank):
    assert rank_from_name(name) == rank
