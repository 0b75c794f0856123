"""Every credential format of tests/data/credentials/formats.tsv (fakes of the documented shapes and
vendors' published examples), in the style it is written in, through every redacting function the
outputs use; and the other side: redaction never takes away what a rule needs (every shipped rule's
fires bundles still fire, quiet ones stay quiet, after their files went through redact_files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hangwatch.bundle.archive import read_bundle_files
from hangwatch.bundle.read import evidence_from_files
from hangwatch.classify import classify
from hangwatch.classify.language.loader import load_rules
from hangwatch.classify.language.rule import Rule
from hangwatch.classify.language.ruletest import check_rule
from hangwatch.redact import redact_argv, redact_cmdline, redact_files, redact_obj, redact_text, terminal_safe
from helpers.paths import DATA, DEV_CORPUS, RULE_BUNDLES

FORMATS = DATA / "credentials" / "formats.tsv"


def load_formats(path: Path = FORMATS) -> list[tuple[str, str, str]]:
    """(family, secret, text) rows; `{}` in the context is the secret, `\\n` a line break."""
    rows = []
    for line in path.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        family, secret, context = line.split("\t")
        rows.append((family, secret, context.replace("\\n", "\n").replace("{}", secret, 1).replace("{{", "{").replace("}}", "}")))
    return rows


ROWS = load_formats()


def test_the_corpus_covers_every_family_the_boundary_claims() -> None:
    families = " ".join(family for family, _, _ in ROWS)
    for word in ("github", "huggingface", "openai", "slack", "google", "ngc", "gitlab", "npm", "pypi", "aws", "jwt",
                 "pem", "pgp", "bearer", "basic", "url", "connection string", "api-key flag", "curl", "env by word"):
        assert word in families, word


@pytest.mark.parametrize(("family", "secret", "text"), ROWS, ids=[r[0] for r in ROWS])
def test_no_format_survives_any_redactor(family: str, secret: str, text: str) -> None:
    assert secret not in redact_text(text), family
    assert secret not in redact_cmdline(text), family
    assert secret not in json.dumps(redact_obj({"message": text, "evidence": [{"text": text}], text: 1}))
    assert secret not in terminal_safe(redact_text(text))
    files = redact_files({"server.log": f"[2026-12-01 10:00:00 TP0] {text}\n".encode(),
                          "procs.json": json.dumps([{"pid": 1, "cmdline": text}]).encode(),
                          "cmdline.txt": text.encode(), "env.txt": f"{text}\n".encode()})
    assert all(secret.encode() not in data for data in files.values()), family


def test_every_value_of_a_secret_flag_in_an_argv() -> None:
    argv = ["vllm", "serve", "m", "--api-key", "k1SECRET", "k2SECRET", "--port", "8000", "-u", "alice:pwSECRET",
            "-p", "8080", "--password", "p3SECRET"]
    out = redact_argv(argv)
    assert out == ["vllm", "serve", "m", "--api-key", "<redacted>", "<redacted>", "--port", "8000", "-u",
                   "alice:<redacted>", "-p", "8080", "--password", "<redacted>"]


# what looks like a secret flag or key but is the diagnosis: kept as it is
KEEP = [
    "docker run -p 8080:80 img", "mkdir -p /tmp/x", "ssh -p 22 host", "--tp 2 --pp 1 --port 30000",
    "max_prefill_tokens=16384 tokenizer_mode=auto", "[TP0] Load weight end. type=Qwen2ForCausalLM, avail mem=70.12 GB",
    "curl -u alice https://x", "docker run -u 1000:1000 img", "python -P -m sglang.launch_server --tp 2", "NCCL INFO Channel 00/24 : 0 1 via P2P/IPC, stack_signature=abc",
    "sk-learn version 1.5", "hf_transfer is enabled",
]


@pytest.mark.parametrize("text", KEEP)
def test_diagnosis_text_is_kept(text: str) -> None:
    assert redact_text(text) == text
    assert redact_cmdline(text) == text


SHIPPED = load_rules()


def _redacted_evidence(path: Path):  # type: ignore[no-untyped-def]
    return evidence_from_files(redact_files(read_bundle_files(path)))


@pytest.mark.parametrize("rule", SHIPPED, ids=[rule.id for rule in SHIPPED])
def test_redaction_keeps_what_every_rule_needs(rule: Rule) -> None:
    results = check_rule(rule, RULE_BUNDLES, _redacted_evidence)
    failed = [f"{r.status} {r.kind or ''} {r.bundle or ''}: {r.detail}" for r in results if r.failed]
    assert not failed, "\n".join(failed)


@pytest.mark.skipif(not DEV_CORPUS.is_dir(), reason="no dev corpus (HANGWATCH_CORPUS)")
def test_redaction_keeps_every_dev_corpus_verdict() -> None:
    # the real reports of the dev corpus: the same verdict (state, cause, rule) read as they are and redacted
    differ = []
    for case in sorted(p for p in DEV_CORPUS.iterdir() if p.is_dir()):
        files = read_bundle_files(case)
        plain = classify(evidence_from_files(files), SHIPPED)
        masked = classify(evidence_from_files(redact_files(files)), SHIPPED)
        if (plain.state, plain.cause, plain.rule) != (masked.state, masked.cause, masked.rule):
            differ.append((case.name, plain.cause, masked.cause))
    assert not differ, differ
