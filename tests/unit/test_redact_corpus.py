"""The redaction boundary against a corpus of real secret shapes, over every kind of output.

Each corpus line carries one secret value (the `secret` column); whatever style it is written in
(flags, env, URLs, JSON, YAML, Python repr, `k = v`, vLLM's `non-default args: {...}` line, a bare
token), the value must not survive redact_text, redact_obj, a bundle's files, a Slack message or the
terminal. The keep list guards the other side: diagnosis text that only looks like a secret stays.
"""

from __future__ import annotations

import json

import pytest

from hangwatch.redact import (
    REDACTED,
    redact_argv,
    redact_files,
    redact_obj,
    redact_text,
    terminal_safe,
)

# (text as a server, a launcher or a user writes it, the secret value that must not survive)
CORPUS: list[tuple[str, str]] = [
    ("python -m sglang.launch_server --api-key sk-liveSECRETapikey --tp 2", "sk-liveSECRETapikey"),
    ("vllm serve m --hf-token=hf_SECRETflagtoken", "hf_SECRETflagtoken"),
    ("x --admin-api-key 'quoted SECRET value'", "quoted SECRET value"),
    ("x --ssl-keyfile-password kfSECRETpw", "kfSECRETpw"),
    ("--model-path https://mpuser:mpSECRETpw@models.local/llama", "mpSECRETpw"),
    ("HF_TOKEN=hf_abcSECRETtok0123456789", "hf_abcSECRETtok0123456789"),
    ("export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIKSECRETKEYxyz", "wJalrXUtnFEMIKSECRETKEYxyz"),
    ("HTTPS_PROXY=http://proxyuser:pxSECRETpw@proxy.local:3128", "pxSECRETpw"),
    ("SGLANG_REMOTE=s3://bucket/x?X-Amz-Signature=sigSECRET123&keep=1", "sigSECRET123"),
    ("server_args=ServerArgs(api_key='sk-logSECRETkey', hf_token='hf_logSECRETtok', tp_size=2)", "sk-logSECRETkey"),
    ("server_args=ServerArgs(model_path='m', hf_token='hf_logSECRETtok2')", "hf_logSECRETtok2"),
    (("(APIServer pid=1) INFO 08-14 10:01:27 [api_utils.py:273] non-default args: {'model_tag': 'm', "
      "'api_key': ['sk-vllmSECRETkey']}"), "sk-vllmSECRETkey"),
    ('{"api_key": "jsonSECRETvalue", "tp": 2}', "jsonSECRETvalue"),
    ('{"HF_TOKEN":"jsonSECRET2"}', "jsonSECRET2"),
    ("HF_TOKEN: yamlSECRETvalue", "yamlSECRETvalue"),
    ("  password: 'yamlSECRETquoted'", "yamlSECRETquoted"),
    ("aws_secret_access_key = kvSECRETwJal", "kvSECRETwJal"),
    ("db_password=kvSECRET2;next=1", "kvSECRET2"),
    ("Downloading with token hf_plainSECRETtok", "hf_plainSECRETtok"),
    ("Authorization: Bearer brSECRETbearer", "brSECRETbearer"),
    ("curl -H 'Authorization: Basic dXNlcjpwYXNzU0VDUkVU'", "dXNlcjpwYXNzU0VDUkVU"),
    ("Using AWS key AKIAPLAINSECRETKEY01", "AKIAPLAINSECRETKEY01"),
    ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("openai key sk-proj-Ab3dEf6hIj9kLm2nOp5q", "sk-proj-Ab3dEf6hIj9kLm2nOp5q"),
    ("gh token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
    ("slack xoxb-123456789012-abcdefSECRET", "xoxb-123456789012-abcdefSECRET"),
    ("postgres://dbuser:dbSECRETpw@db.local:5432/x", "dbSECRETpw"),
    ("env dump: HF_TOKEN=hf_inlineSECRETtok AWS_SECRET_ACCESS_KEY=inlineSECRETaws", "inlineSECRETaws"),
    ("env dump: HF_TOKEN=hf_inlineSECRETtok AWS_SECRET_ACCESS_KEY=inlineSECRETaws", "hf_inlineSECRETtok"),
    ("posting to http://127.0.0.1:18081/hook?token=whSECRETq", "whSECRETq"),
    ("SlackRequestError: Invalid URL detected: hxxps://hooks.slack.com/services/T0/B0/slackPathSECRET", "slackPathSECRET"),
    ("https://hooks.slack.com/services/T000/B000/slackSECRETpath", "slackSECRETpath"),
    ("public http://pubuser:pubSECRETpw@node7:19464", "pubSECRETpw"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJTRUNSRVQifQ.c2lnU0VDUkVU", "eyJzdWIiOiJTRUNSRVQifQ"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpkSECRETkeybody\n-----END RSA PRIVATE KEY-----", "MIIEpkSECRETkeybody"),
    ("settings {'sessionToken': 'camelSECRET'}", "camelSECRET"),
    ("OPENAI_APIKEY=compoundSECRET", "compoundSECRET"),
]

# diagnosis text that must come through unchanged
KEEP = [
    "TOKENIZERS_PARALLELISM=false",
    "server_args=ServerArgs(max_prefill_tokens=16384, max_total_tokens=None, tokenizer_path='/m')",
    "x --ssl-keyfile /k.pem --disable-auth --tp 2 --skip-tokenizer-init",
    "INFO using hf_transfer and hf_overrides; the token budget is 8192",
    "[2026-11-30 10:00:00 TP0] Load weight end. type=LlamaForCausalLM, avail mem=70.12 GB",
    "NCCL INFO Channel 00/24 : 0 1 via P2P/IPC, stack_signature=abc",
    "http://127.0.0.1:30000/v1/models?rev=main",
    "api_key=None",
]


@pytest.mark.parametrize(("text", "secret"), CORPUS)
def test_text_output_never_carries_the_secret(text: str, secret: str) -> None:
    out = redact_text(text)
    assert secret not in out and out != text  # URL credentials are cut out, the rest masked


@pytest.mark.parametrize("text", KEEP)
def test_diagnosis_text_is_kept(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(("text", "secret"), CORPUS)
def test_structured_outputs_never_carry_the_secret(text: str, secret: str) -> None:
    value = {"message": text, "evidence": [{"text": text, "source": "server.log:3"}], text: 1}
    assert secret not in json.dumps(redact_obj(value))


def test_values_under_secret_keys_are_masked_whatever_they_look_like() -> None:
    out = redact_obj({"env": {"HF_TOKEN": "plain", "NCCL_DEBUG": "INFO"}, "apiKey": 12345, "tokens": 5})
    assert out == {"env": {"HF_TOKEN": REDACTED, "NCCL_DEBUG": "INFO"}, "apiKey": REDACTED, "tokens": 5}


def test_argv_lists_mask_the_word_after_a_secret_flag() -> None:
    argv = ["python", "-m", "sglang.launch_server", "--api-key", "opaque", "--tp", "2", "--hf-token=x1"]
    assert redact_argv(argv) == ["python", "-m", "sglang.launch_server", "--api-key", REDACTED, "--tp", "2",
                                 f"--hf-token={REDACTED}"]
    assert redact_obj({"cmdline": argv})["cmdline"][4] == REDACTED


def test_every_bundle_file_is_redacted_by_its_kind() -> None:
    log = "\n".join(text for text, _ in CORPUS).encode()
    procs = json.dumps([{"pid": 1, "cmdline": ["launch", "--api-key", "procSECRETargv"]}]).encode()
    files = {"server.log": log, "procs.json": procs, "cmdline.txt": b"launch --api-key cmdSECRET\n",
             "cmdline0.txt": b"launch\x00--api-key\x00nulSECRET\x00", "env.txt": b"HF_TOKEN=envSECRET\n",
             "meta.json": b'{"format": "hangwatch-bundle/1", "note": "HF_TOKEN=metaSECRET"}',
             "latin1.log": b"\xff\xfe HF_TOKEN=strayByteSECRET\n"}
    out = b"".join(redact_files(files).values())
    for _, secret in CORPUS:
        assert secret.encode() not in out
    for secret in (b"procSECRETargv", b"cmdSECRET", b"envSECRET", b"metaSECRET", b"strayByteSECRET"):
        assert secret not in out
    assert json.loads(redact_files(files)["procs.json"])[0]["cmdline"] == ["launch", "--api-key", REDACTED]


def test_terminal_output_loses_escape_sequences() -> None:
    hostile = "gpus \x1b]0;PWNED\x07 \x1b]52;c;ZXZpbA==\x1b\\ \x1b[2J \x9b31m done\tok\n"
    out = terminal_safe(hostile)
    assert "\x1b" not in out and "\x9b" not in out and "\x07" not in out
    assert out.startswith("gpus") and out.endswith("done\tok\n")


def test_redaction_is_linear_on_long_lines() -> None:
    # a 1 MiB line of each adversarial shape: every pattern is bounded, so this is a size check, not a timer
    for unit in ("a=", "--a ", "'k': ", "x" * 79 + "=", "hf_", "sk-", "\x1b[", "Bearer "):
        line = unit * (2**20 // len(unit))
        assert len(redact_text(line)) <= len(line) * 3
        assert len(terminal_safe(line)) <= len(line)
