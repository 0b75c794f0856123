"""parse_flags / server_port on launch lines from the DEV corpus (cmdline.txt) and the references."""

from __future__ import annotations

import pytest

from hangwatch.engines import get_engine
from hangwatch.parse.flags import parse_flags, server_port


def test_sglang_corpus_line_with_boolean_and_alias():
    flags = parse_flags("python -m sglang.launch_server --tp 4 --enable-hierarchical-cache --hicache-size 150")
    assert flags == {"tp": "4", "enable-hierarchical-cache": True, "hicache-size": "150"}


def test_empty_quoted_value_is_a_value_not_a_boolean():
    assert parse_flags("python -m sglang.launch_server --host ''") == {"host": ""}


def test_interpreter_options_before_the_program_are_not_flags():
    flags = parse_flags("/usr/bin/python3 -u -X faulthandler -m sglang.launch_server --model-path /m --trust-remote-code")
    assert flags == {"model-path": "/m", "model": "/m", "trust-remote-code": True}


def test_vllm_serve_positional_model_and_long_aliases():
    flags = parse_flags(
        "vllm serve Qwen/Qwen3.5-397B-A17B-FP8 --tensor-parallel-size 8 --language-model-only "
        "--gpu-memory-utilization 0.90 --max-model-len 32768"
    )
    assert flags["model"] == "Qwen/Qwen3.5-397B-A17B-FP8"
    assert flags["tensor-parallel-size"] == flags["tp"] == "8"
    assert flags["language-model-only"] is True
    assert flags["gpu-memory-utilization"] == "0.90"


def test_vllm_serve_without_model_positional():
    flags = parse_flags("vllm serve --tensor-parallel-size 2 --attention-backend FLASH_ATTN_V100 --kv-cache-dtype fp8_e5m2")
    assert "model" not in flags
    assert flags["attention-backend"] == "FLASH_ATTN_V100"


def test_vllm_serve_model_after_flags():
    flags = parse_flags("vllm serve --tensor-parallel-size 2 nvidia/Qwen3.5-397B-A17B-NVFP4")
    assert (flags["tp"], flags["model"]) == ("2", "nvidia/Qwen3.5-397B-A17B-NVFP4")


def test_equals_form_underscores_and_single_dash():
    flags = parse_flags("vllm serve m --port=8123 --max_model_len=4096 -tp 2 -pp 2 --data-parallel-size 4")
    assert flags["port"] == "8123"
    assert flags["max-model-len"] == "4096"
    assert (flags["tp"], flags["pp"], flags["dp"]) == ("2", "2", "4")


@pytest.mark.parametrize(
    "cmdline, key, value",
    [
        ("python -m sglang.launch_server --tp-size 8", "tp", "8"),
        ("python -m sglang.launch_server --dp-size 2", "dp", "2"),
        ("python -m sglang.launch_server --pp-size 2", "pp", "2"),
        ("python -m sglang.launch_server --dp 2", "dp", "2"),
        ("vllm serve m --pipeline-parallel-size 3", "pp", "3"),
        ("python -m sglang.launch_server --nccl-init-addr 10.0.0.1:25000", "dist-init-addr", "10.0.0.1:25000"),
        ("python -m sglang.launch_server --dist-init-addr 10.0.0.1:25000", "dist-init-addr", "10.0.0.1:25000"),
        ("python -m vllm.entrypoints.openai.api_server --model facebook/opt-125m", "model", "facebook/opt-125m"),
    ],
)
def test_aliases(cmdline, key, value):
    assert parse_flags(cmdline)[key] == value


def test_list_values_and_negative_numbers():
    flags = parse_flags("python -m sglang.launch_server --cuda-graph-bs 1 2 4 8 --random-seed -1 --disable-cuda-graph")
    assert flags["cuda-graph-bs"] == "1 2 4 8"
    assert flags["random-seed"] == "-1"
    assert flags["disable-cuda-graph"] is True


def test_unbalanced_quotes_fall_back_to_whitespace_split():
    flags = parse_flags("""python -m sglang.launch_server --chat-template "{{ x }} --tp 2""")
    assert flags["tp"] == "2"
    assert flags["chat-template"] == '"{{ x }}'


def test_nul_separated_proc_cmdline():
    flags = parse_flags("python3\x00-m\x00sglang.launch_server\x00--tp\x002\x00--port\x0031000\x00")
    assert (flags["tp"], flags["port"]) == ("2", "31000")


def test_double_dash_ends_options_and_empty_line():
    assert parse_flags("python -m sglang.launch_server --tp 2 -- --port 1") == {"tp": "2"}
    assert parse_flags("") == {}


def test_server_port():
    assert server_port(parse_flags("vllm serve m"), "vllm") == 8000
    assert server_port(parse_flags("python -m sglang.launch_server"), "sglang") == 30000
    assert server_port(parse_flags("python -m sglang.launch_server --port 31000"), get_engine("sglang")) == 31000
    assert server_port({"port": True}, "sglang") == 30000  # `--port` with no value: the engine default
    assert server_port({"port": "abc"}, "vllm") == 8000
