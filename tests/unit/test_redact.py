"""hangwatch.redact: the environment allow-list, and no secret leaves in a bundle."""

from __future__ import annotations

import pytest

from hangwatch.engines import env_prefixes
from hangwatch.redact import (
    REDACTED,
    filter_env,
    is_secret_name,
    redact_cmdline,
    redact_env_text,
    redact_text,
    redact_url,
)


def test_filter_env_keeps_only_diagnosis_variables() -> None:
    env = {
        "NCCL_DEBUG": "INFO",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "TORCH_NCCL_BLOCKING_WAIT": "1",
        "SGLANG_CPU_OMP_THREADS_BIND": "0|1",
        "VLLM_USE_V1": "1",
        "FLASHINFER_WORKSPACE_BASE": "/cache",
        "OMP_NUM_THREADS": "8",
        "MKL_NUM_THREADS": "8",
        "LD_PRELOAD": "/lib/libjemalloc.so",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
        "HF_HOME": "/hf",
        "TRANSFORMERS_OFFLINE": "1",
        "TRITON_CACHE_DIR": "/t",
        "GLOO_SOCKET_IFNAME": "eth0",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
        "WORLD_SIZE": "2",
        "RANK": "0",
        "LOCAL_RANK": "0",
        "NVIDIA_VISIBLE_DEVICES": "all",
        "DG_JIT_CACHE_DIR": "/dg",
        "DEEP_GEMM_X": "1",
        "TORCHINDUCTOR_CACHE_DIR": "/ind",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "no_proxy": "localhost",
        "HTTPS_PROXY": "http://proxy:3128",
        # dropped
        "PATH": "/usr/bin",
        "HOME": "/root",
        "AWS_SECRET_ACCESS_KEY": "abc",
        "GITHUB_TOKEN": "ghp_x",
        "PS1": "$ ",
        "RANKING": "x",
    }
    kept = filter_env(env, env_prefixes())
    assert set(kept) == set(list(env)[:26])
    assert kept["NCCL_DEBUG"] == "INFO" and kept["HTTPS_PROXY"] == "http://proxy:3128"


def test_filter_env_redacts_secret_names_it_keeps() -> None:
    kept = filter_env({"HF_TOKEN": "hf_abc", "VLLM_API_KEY": "k", "HF_HUB_ENABLE_HF_TRANSFER": "1", "NCCL_IB_PASSWORD": "p",
                       "SGLANG_AUTH_HEADER": "Bearer x", "HF_CREDENTIALS_FILE": "/c", "TORCH_SECRET": "s"}, env_prefixes())  # fmt: skip
    assert kept == {
        "HF_TOKEN": REDACTED,
        "VLLM_API_KEY": REDACTED,
        "HF_HUB_ENABLE_HF_TRANSFER": "1",
        "NCCL_IB_PASSWORD": REDACTED,
        "SGLANG_AUTH_HEADER": REDACTED,
        "HF_CREDENTIALS_FILE": REDACTED,
        "TORCH_SECRET": REDACTED,
    }


@pytest.mark.parametrize("name", ["http_proxy", "HTTP_PROXY", "https_proxy", "Https_Proxy", "all_proxy"])
def test_proxy_passwords_never_leak(name: str) -> None:
    kept = filter_env({name: "http://alice:s3cret@proxy.corp:3128/"})
    assert kept == {name: "http://proxy.corp:3128/"}
    # curl also takes a proxy without a scheme
    assert filter_env({name: "alice:s3cret@proxy.corp:3128"}) == {name: "proxy.corp:3128"}


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://user:pw@host:8080/path?x=1", "http://host:8080/path?x=1"),
        ("https://host/api?token=abc&rev=main", "https://host/api?rev=main"),
        ("https://host/?access_token=abc&api_key=k&sig=s&X-Amz-Signature=z&keep=1", "https://host/?keep=1"),
        ("socks5h://u@10.0.0.1:1080", "socks5h://10.0.0.1:1080"),
        ("http://[::1]:8000/v1/models", "http://[::1]:8000/v1/models"),
        ("http://[::1:8000/x@y", "http://[::1:8000/x@y"),  # unparsable: userinfo cut only if present before host
        ("https://host/path", "https://host/path"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_redact_env_text_keeps_every_line() -> None:
    text = "\n".join([
        "NCCL_DEBUG=INFO",
        "export HF_TOKEN=hf_abc",
        "WANDB_API_KEY='k'",
        "TOKENIZERS_PARALLELISM=false",
        "MY_DB_PASSWORD=hunter2",
        "https_proxy=http://bob:pw@proxy:3128",
        "# a comment with https://u:p@example.com/x?token=t",
        "not an assignment",
        "",
    ])  # fmt: skip
    assert redact_env_text(text).split("\n") == [
        "NCCL_DEBUG=INFO",
        "export HF_TOKEN=<redacted>",
        "WANDB_API_KEY='<redacted>'",
        "TOKENIZERS_PARALLELISM=false",
        "MY_DB_PASSWORD=<redacted>",
        "https_proxy=http://proxy:3128",
        "# a comment with https://example.com/x",
        "not an assignment",
        "",
    ]
    assert redact_text is redact_env_text


def test_url_credentials_redacted_under_any_name() -> None:
    assert redact_env_text("HF_ENDPOINT=https://me:pw@mirror.local/hf") == "HF_ENDPOINT=https://mirror.local/hf"


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True), ("HUGGING_FACE_HUB_TOKEN", True), ("OPENAI_APIKEY", True), ("x_secret", True),
        ("BASIC_AUTH", True), ("GCP_CREDENTIALS", True), ("TOKENIZERS_PARALLELISM", False), ("NCCL_DEBUG", False),
    ],
)  # fmt: skip
def test_is_secret_name(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


@pytest.mark.parametrize(
    ("cmdline", "expected"),
    [
        ("python -m sglang.launch_server --api-key sk-1 --tp 2", "python -m sglang.launch_server --api-key <redacted> --tp 2"),
        ("vllm serve m --api-key=sk-1", "vllm serve m --api-key=<redacted>"),
        ("x --hf-token 'hf abc' --admin-api-key k", "x --hf-token <redacted> --admin-api-key <redacted>"),
        ("x --tokenizer-path /models/tok --skip-tokenizer-init", "x --tokenizer-path /models/tok --skip-tokenizer-init"),
        ("x --ssl-keyfile /k.pem --disable-auth --tp 2", "x --ssl-keyfile /k.pem --disable-auth --tp 2"),
        ("x --model-path https://u:p@hub.local/m", "x --model-path https://hub.local/m"),
    ],
)
def test_redact_cmdline(cmdline: str, expected: str) -> None:
    assert redact_cmdline(cmdline) == expected


def test_a_count_of_tokens_is_no_secret_but_a_tokens_value_is() -> None:
    # SGLang's own batch lines and an eval line name tokens by count; a token's value stays masked
    line = "Prefill batch. #new-seq: 1, #new-token: 8, #cached-token: 0, token usage: 0.00, #running-req: 0"
    assert redact_text(line) == line
    assert redact_text("freetoken-371: expected cpu_thread_oversubscription").endswith("expected cpu_thread_oversubscription")
    for secret in ("HF_TOKEN=hf_abc", "api_token: abc", "token=9f8e7d6c5b4a39281706f5e4d3c2b1a0", "authToken: 12345678"):
        assert REDACTED in redact_text(secret), secret
