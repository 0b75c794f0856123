"""parse/engine_words: a message traced to the engine site that printed it, from a mined index."""

from __future__ import annotations

import gzip
import json

import pytest

from hangwatch.parse.engine_words import EngineWords, anchor_index, split_template, template_regex

ROWS = [
    ["sglang", "sglang/srt/model_executor/pool_configurator.py", "MemoryPoolConfig.__post_init__", 99, "raise",
     "RuntimeError", "Not enough memory. Please try to increase --mem-fraction-static.", 0b110],
    ["sglang", "sglang/srt/utils/network.py", "wait_port_available", 104, "raise", "ValueError",
     "{word:port_name} at {int:port} is not available in {int:timeout_s} seconds. {any:error_message}", 0b100],
    ["vllm", "vllm/v1/worker/utils.py", "request_memory", 74, "raise", "ValueError",
     "Free memory on device {word:device} ({float:free}/{float:total} GiB) on startup is less than desired GPU "
     "memory utilization ({float:util}, {float:requested} GiB). Decrease GPU memory utilization or reduce GPU "
     "memory used by other processes.", 0b11],
    ["vllm", "vllm/worker/worker.py", "Worker.determine_num_available_blocks", 230, "raise", "AssertionError",
     "Error in memory profiling. Initial free memory {float:init} GiB, current free memory {float:free} GiB. "
     "This happens when the GPU memory was not properly cleaned up before initializing the vLLM instance.", 0b01],
    ["vllm", "vllm/v1/core/kv_cache_utils.py", "check_enough_kv_cache_memory", 700, "raise", "ValueError",
     "To serve at least one request with the models's max seq len ({int:max_model_len}), ({float:needed} GiB KV "
     "cache is needed, which is larger than the available KV cache memory ({float:available} GiB). Based on the "
     "available memory, the estimated maximum model length is {int:estimated}. Try increasing "
     "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.", 0b10],
    ["vllm", "vllm/config.py", "ModelConfig.verify", 10, "raise", "ValueError", "{{literal}} braces {any:x} stay", 0b10],
]  # fmt: skip
DOC = {"format": 1, "generator": "test", "versions": {"sglang": ["0.5.4", "0.5.17", "0.5.23"], "vllm": ["0.9.2", "0.32.0"]},
       "sites": ROWS}  # fmt: skip


@pytest.fixture(scope="module")
def words() -> EngineWords:
    return EngineWords.from_bytes(gzip.compress(json.dumps(DOC).encode()))


def test_template_parts_and_regex() -> None:
    assert split_template("{{literal}} braces {any:x} stay") == ["{literal} braces ", ("any", "x"), " stay"]
    found = template_regex("Port {int:port} in use").fullmatch("Port 30000 in use")
    assert found is not None and found.group("h0") == "30000"
    assert not template_regex("Port {int:port} in use").fullmatch("Port 30000 is free")
    # a type guessed from the name only (`device` read as an index) still takes the one word printed
    guessed = template_regex("Free memory on device {int:device} ({float:free}/{float:total} GiB)")
    found = guessed.search("Free memory on device cuda:0 (0.41/79.18 GiB)")
    assert found is not None and found.groups() == ("cuda:0", "0.41", "79.18")


def test_exact_match_reads_the_holes(words: EngineWords) -> None:
    text = ("ValueError: To serve at least one request with the models's max seq len (131072), (16.0 GiB KV cache is "
            "needed, which is larger than the available KV cache memory (2.5 GiB). Based on the available memory, "
            "the estimated maximum model length is 20480. Try increasing `gpu_memory_utilization` or decreasing "
            "`max_model_len` when initializing the engine.")  # fmt: skip
    found = words.match(text)
    assert found is not None and found.exact
    assert found.site.where == "vllm/v1/core/kv_cache_utils.py:check_enough_kv_cache_memory"
    assert dict(found.holes) == {"max_model_len": "131072", "needed": "16.0", "available": "2.5", "estimated": "20480"}
    assert found.summary == "raised by vllm/v1/core/kv_cache_utils.py:check_enough_kv_cache_memory (line 700, vLLM 0.32.0)"


def test_a_message_wrapped_over_lines_and_reindented_still_matches(words: EngineWords) -> None:
    text = ("Error in memory profiling. Initial free memory 70.1 GiB,\n    current free memory 12.0 GiB. This happens "
            "when the GPU memory was\n not properly cleaned up before initializing the vLLM instance.")  # fmt: skip
    found = words.match(text)
    assert found is not None and found.exact and found.site.span == "vLLM 0.9.2"


def test_a_truncated_message_matches_on_its_words(words: EngineWords) -> None:
    found = words.match("[rank0]: ValueError: Free memory on device cuda:0 (10.5/79.1 GiB) on startup is less than "
                        "desired GPU memory utiliz")  # fmt: skip
    assert found is not None and not found.exact
    assert found.site.function == "request_memory"


def test_drifted_wording_matches_fuzzily(words: EngineWords) -> None:
    found = words.match("Not enough memory. Please try to increase --mem-fraction-static. Current value: 0.88")
    assert found is not None and found.site.label == "RuntimeError"
    drifted = words.match("RuntimeError: Not enough GPU memory; please try to increase the --mem-fraction-static value")
    assert drifted is not None and not drifted.exact and drifted.score >= 0.75
    assert drifted.site.span == "SGLang 0.5.17–0.5.23"


def test_unrelated_text_matches_nothing(words: EngineWords) -> None:
    assert words.match("RuntimeError: CUDA error: an illegal memory access was encountered") is None
    assert words.match("") is None
    assert words.match("memory") is None


def test_packages_restrict_the_search(words: EngineWords) -> None:
    text = "server_port at 30000 is not available in 30 seconds. server_port is used by a process already."
    found = words.match(text, packages=("sglang",))
    assert found is not None and dict(found.holes)["port"] == "30000"
    assert words.match(text, packages=("vllm",)) is None


def test_a_bad_format_is_refused() -> None:
    with pytest.raises(ValueError, match="format"):
        EngineWords({"format": 99, "versions": {}, "sites": []})


def test_a_precompiled_index_matches_as_one_built_on_load(words: EngineWords) -> None:
    # GIVEN the same sites as a format-2 index (its anchors precompiled, as the generator writes it)
    compiled = EngineWords({**DOC, "format": 2, "anchors": anchor_index(ROWS)})
    # THEN every message finds the same candidates and the same match
    for text in ("Not enough memory. Please try to increase --mem-fraction-static.",
                 "Free memory on device cuda:0 (1.5/80 GiB) on startup is less than desired GPU memory utilization",
                 "port at 30000 is not available in 30 seconds. boom"):
        assert [s.template for s in compiled.candidates(text)] == [s.template for s in words.candidates(text)]
        assert compiled.match(text) == words.match(text)


def test_the_shipped_anchors_are_those_of_its_sites() -> None:
    # the shipped index carries its anchor index precompiled: it must be the one its sites make
    from hangwatch.parse.engine_words import INDEX_FILE

    doc = json.loads(gzip.decompress(INDEX_FILE.read_bytes()))
    assert doc["format"] == 2
    assert doc["anchors"] == anchor_index(doc["sites"])


def test_a_run_of_spaces_is_one_whitespace_run_in_the_regex() -> None:
    # vLLM's TPU loader logs "Model was already initialized." + 29 spaces + "Loading weights inplace...":
    # one `\s+` per space backtracked for 28 s on a line starting with "Model" that did not match
    template = "Model was already initialized." + " " * 29 + "Loading weights inplace..."
    rx = template_regex(template)
    assert rx.pattern.count(r"\s+") == 6  # one per gap between its seven words
    assert rx.fullmatch("Model was already initialized. Loading weights inplace...")
    assert rx.fullmatch("Model was already initialized.\n        Loading  weights inplace...")
    assert not rx.match("Model was already initialized." + " " * 40 + "Loading the weights")
    assert template_regex(" leading and trailing ").fullmatch("  leading and trailing\t")
