"""What of a server's environment and command line may leave the machine.

    filter_env(env) -> dict           only the variables that matter for a diagnosis, secrets redacted
    redact_env_text(text) -> str      the same redaction on `KEY=VALUE` lines, keeping every line
    redact_cmdline(cmdline) -> str    `--api-key X` / `--hf-token=X` values redacted
    redact_url(url) -> str            userinfo and token query parameters removed
    redact_string(text) -> str        all of the above anywhere in free text (log lines, messages)
    redacted(value) / redacted_verdict(verdict)   JSON-able copies with every string redacted

This module is the one redaction boundary: every output (bundles, API, alerts, history, terminal)
passes what it publishes through it.

A bundle is meant to be attached to a public bug report, so anything that looks like a secret is
replaced by `<redacted>`, and credentials inside URLs (`http_proxy=http://user:pw@proxy:3128`) are
cut out, whatever the variable is called.
"""

from __future__ import annotations

import re
from typing import Any, Mapping
from urllib.parse import urlsplit, urlunsplit

from hangwatch.model import Verdict

__all__ = [
    "REDACTED", "filter_env", "is_secret_name", "redact_cmdline", "redact_env_text", "redact_string", "redact_text",
    "redact_url", "redact_value", "redacted", "redacted_verdict",
]  # fmt: skip

REDACTED = "<redacted>"

_ALLOWED_PREFIXES = (
    "NCCL_", "CUDA_", "TORCH_", "SGLANG_", "VLLM_", "FLASHINFER_", "HF_", "TRANSFORMERS_", "TRITON_",
    "GLOO_", "NVIDIA_", "DG_", "DEEP_GEMM_", "TORCHINDUCTOR_", "PYTORCH_",
)  # fmt: skip
_ALLOWED_NAMES = frozenset(
    "XDG_CACHE_HOME OMP_NUM_THREADS MKL_NUM_THREADS LD_PRELOAD LD_LIBRARY_PATH MASTER_ADDR MASTER_PORT WORLD_SIZE RANK "
    "LOCAL_RANK".split()
)
# proxies decide whether weights and JIT downloads can run at all; any case is honoured by tools
_PROXY_NAMES = frozenset({"http_proxy", "https_proxy", "no_proxy", "all_proxy"})
# `TOKEN(?!IZER)`: TOKENIZERS_PARALLELISM is a setting, not a secret
_SECRET_NAME = re.compile(r"TOKEN(?!IZER)|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.I)
_SECRET_PARAMS = frozenset({"sig", "signature", "x-amz-signature", "x-amz-credential", "x-amz-security-token"})
_URL = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")  # lookbehind: linear on long lines
_USERINFO = re.compile(r"(://)[^/@\s]*@")
_BARE_USERINFO = re.compile(r"^[^\s/@]+@(?=[\w.\-\[\]:]+/?$)")  # `user:pw@proxy:3128`, no scheme
_ENV_LINE = re.compile(r"^(?P<lead>\s*(?:export\s+)?)(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)=(?P<value>.*)$")
# a flag whose dash-separated words include a secret word: `--api-key`, `--hf-token`, `--ssl-keyfile-password`
_SECRET_FLAG = re.compile(
    r"(?P<flag>(?<![\w-])--?(?:[\w]+-)*(?:key|token|secret|password|passwd|credentials?|auth)(?:-[\w]+)*)"
    r"(?P<sep>=|\s+)(?P<value>(?!-)(?:'[^']*'|\"[^\"]*\"|\S+))",
    re.I,
)


def is_secret_name(name: str) -> bool:
    """`HF_TOKEN`, `WANDB_API_KEY`, `DB_PASSWORD`, ... (the name, not the value, decides)."""
    return bool(_SECRET_NAME.search(name))


def is_allowed_name(name: str) -> bool:
    return name.startswith(_ALLOWED_PREFIXES) or name in _ALLOWED_NAMES or name.lower() in _PROXY_NAMES


def filter_env(env: Mapping[str, str]) -> dict[str, str]:
    """The diagnosis-relevant variables of `env`, with secret values redacted."""
    return {name: redact_value(name, value) for name, value in env.items() if is_allowed_name(name)}


def redact_value(name: str, value: str) -> str:
    if is_secret_name(name):
        return REDACTED
    if name.lower() in _PROXY_NAMES and "://" not in value:
        value = _BARE_USERINFO.sub("", value)
    return redact_urls(value)


def redact_urls(text: str) -> str:
    """Every URL inside `text`, through `redact_url`."""
    return _URL.sub(lambda m: redact_url(m.group(0)), text)


def redact_url(url: str) -> str:
    """`https://user:pw@host/x?token=abc&rev=main` -> `https://host/x?rev=main`."""
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced IPv6 bracket: cut the userinfo textually
        return _USERINFO.sub(r"\1", url)
    netloc = parts.netloc.rpartition("@")[2]
    # split by hand rather than parse_qsl/urlencode: the kept parameters stay byte-for-byte
    query = "&".join(p for p in parts.query.split("&") if p and not _secret_param(p))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _secret_param(pair: str) -> bool:
    name = pair.split("=", 1)[0]
    return name.lower() in _SECRET_PARAMS or is_secret_name(name)


def redact_env_text(text: str) -> str:
    """Redact `KEY=VALUE` lines by name (and URLs on any line); every line is kept."""
    return "\n".join(_redact_env_line(line) for line in text.split("\n"))


redact_text = redact_env_text  # the name docs/architecture.md uses


def _redact_env_line(line: str) -> str:
    m = _ENV_LINE.match(line)
    if not m:
        return redact_urls(line)
    return f"{m['lead']}{m['name']}={redact_value(m['name'], m['value'])}"


def redact_cmdline(cmdline: str) -> str:
    """`--api-key sk-1 --tp 2` -> `--api-key <redacted> --tp 2`; URLs lose their credentials."""
    redacted = _SECRET_FLAG.sub(lambda m: f"{m['flag']}{m['sep']}{REDACTED}", cmdline)
    return redact_urls(redacted)


# redact_env_text looks at `KEY=VALUE` at the start of a line; verdict messages quote log lines
# mid-sentence ("... HF_TOKEN=hf_x"), and headers may be quoted too ("Authorization: Bearer x").
_INLINE_ASSIGN = re.compile(r"\b(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>\"[^\"]*\"|'[^']*'|[^\s,;&\"']+)")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+")


def redact_string(text: str) -> str:
    """`KEY=VALUE` (anywhere), secret flags (`--api-key X`), bearer tokens and URL credentials masked."""
    text = redact_cmdline(redact_env_text(text))
    text = _INLINE_ASSIGN.sub(lambda m: f"{m['name']}={REDACTED}" if is_secret_name(m["name"]) else m[0], text)
    return _BEARER.sub(lambda m: f"{m[1]}{REDACTED}", text)


def redacted(value: Any) -> Any:
    """A copy of JSON-able `value` with secrets masked in every string (keys included)."""
    if isinstance(value, str):
        return redact_string(value)
    if isinstance(value, Mapping):
        return {redacted(k) if isinstance(k, str) else k: redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redacted(v) for v in value]
    return value


def redacted_verdict(verdict: Verdict) -> dict[str, Any]:
    """`Verdict.to_dict()` with secrets masked: what every sink publishes."""
    return redacted(verdict.to_dict())
