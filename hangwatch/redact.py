"""The one redaction boundary: what of a server's secrets may leave the machine (nothing).

Every output of hangwatch passes through here: bundle files (`redact_files`, incl. procs.json,
cmdline.txt, env.txt, server.log), API responses and history (`redact_obj`), Slack and webhook
payloads, the terminal (`redact_text`, then `terminal_safe`).

    redact_text(text) -> str          any text: flags, env and k=v/JSON/YAML/Python-repr styles,
                                      URL credentials, bearer/basic headers, known token shapes
    redact_obj(value) -> value        a JSON-able value: strings redacted, values under secret keys masked
    redact_argv(argv) -> list[str]    a process's argv: the value after a secret flag masked
    redact_files(files) -> files      a bundle's files, each redacted by its kind
    redact_cmdline / redact_url / redact_value / filter_env / is_secret_name: the pieces
    terminal_safe(text) -> str        control and escape sequences removed (OSC 52, titles, CSI)

A bundle is meant to be attached to a public bug report, so anything that looks like a secret is
replaced by `<redacted>`, whatever its style. The rule is deliberately wide (a `--ssl-keyfile-password`
or a `"sessionToken"` key is masked) and deliberately narrow on names that only look alike
(`TOKENIZERS_PARALLELISM`, `max_prefill_tokens`, `--ssl-keyfile`, `hf_transfer` are kept): names are
split into words and a word decides. Every pattern here is linear in the text's length (no nested
quantifiers, bounded repeats): redaction runs on logs of megabytes inside the watched server's node.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from hangwatch.model import Verdict

__all__ = [
    "REDACTED",
    "filter_env",
    "is_allowed_name",
    "is_secret_name",
    "redact_argv",
    "redact_cmdline",
    "redact_env_text",
    "redact_files",
    "redact_obj",
    "redact_string",
    "redact_text",
    "redact_url",
    "redact_urls",
    "redact_value",
    "redacted",
    "redacted_verdict",
    "terminal_safe",
    "terminal_text",
    "TerminalWriter",
]  # fmt: skip

REDACTED = "<redacted>"

_ALLOWED_PREFIXES = (
    "NCCL_", "CUDA_", "TORCH_", "FLASHINFER_", "HF_", "TRANSFORMERS_", "TRITON_",
    "GLOO_", "NVIDIA_", "DG_", "DEEP_GEMM_", "TORCHINDUCTOR_", "PYTORCH_",
)  # fmt: skip
_ALLOWED_NAMES = frozenset(
    ["XDG_CACHE_HOME", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "LD_PRELOAD", "LD_LIBRARY_PATH", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK"]
)
# proxies decide whether weights and JIT downloads can run at all; any case is honoured by tools
_PROXY_NAMES = frozenset({"http_proxy", "https_proxy", "no_proxy", "all_proxy"})

# ---------------------------------------------------------------- names

# A name is split into words (`HF_TOKEN`, `hf-token`, `apiKey`, `x.secret`); one secret word makes it secret.
_SECRET_WORDS = frozenset(
    ["token", "tokens_secret", "key", "keys", "secret", "secrets", "password", "passwords", "passwd", "pwd", "pw", "pass",
     "passphrase", "cred", "creds", "credential", "credentials", "auth", "authorization", "authentication", "oauth",
     "bearer", "cookie", "apikey", "apikeys", "privatekey", "privkey", "accesskey", "secretkey", "authtoken",
     "accesstoken", "sessiontoken", "refreshtoken", "clientsecret", "jwt", "pat", "sas", "dsn"]
)
# compound words without a separator (`OPENAI_APIKEY`, `authToken` handled by the camel split)
_SECRET_SUFFIXES = ("apikey", "token", "secret", "password", "passwd", "creds", "cred")
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def is_secret_name(name: str) -> bool:
    """`HF_TOKEN`, `WANDB_API_KEY`, `--hf-token`, `"apiKey"` -> True; `TOKENIZERS_PARALLELISM`, `max_tokens` -> False."""
    for word in _WORD_SPLIT.split(name[:200]):
        low = word.lower()
        if low in _SECRET_WORDS or (len(low) > 5 and low.endswith(_SECRET_SUFFIXES)):
            return True
    return False


def is_allowed_name(name: str, engine_prefixes: Sequence[str] = ()) -> bool:
    return (
        name.startswith(_ALLOWED_PREFIXES)
        or name.startswith(tuple(engine_prefixes))
        or name in _ALLOWED_NAMES
        or name.lower() in _PROXY_NAMES
    )


def filter_env(env: Mapping[str, str], engine_prefixes: Sequence[str] = ()) -> dict[str, str]:
    """The diagnosis-relevant variables of `env`, with secret values redacted. `engine_prefixes`
    are the engines' own (`hangwatch.engines.env_prefixes()`: `SGLANG_`, `VLLM_`); this module
    sits below the engines, so callers pass them in."""
    return {name: redact_value(name, value) for name, value in env.items() if is_allowed_name(name, engine_prefixes)}


def redact_value(name: str, value: str) -> str:
    """The value of variable `name`: masked when the name is secret, else with its secrets masked."""
    if is_secret_name(name):
        return REDACTED
    if name.lower() in _PROXY_NAMES and "://" not in value:
        value = _BARE_USERINFO.sub("", value)
    return redact_text(value)


# ---------------------------------------------------------------- URLs

_SECRET_PARAMS = frozenset({"sig", "signature", "x-amz-signature", "x-amz-credential", "x-amz-security-token", "code",
                            "x-goog-signature", "x-goog-credential", "googleaccessid", "ossaccesskeyid", "x-oss-signature"})
_URL = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s'\"<>`]+")  # lookbehind: linear on long lines
_USERINFO = re.compile(r"(://)[^/@\s]*@")
_BARE_USERINFO = re.compile(r"^[^\s/@]+@(?=[\w.\-\[\]:]+/?$)")  # `user:pw@proxy:3128`, no scheme
# webhook URLs whose path is the secret (Slack `/services/T/B/X`, Discord, Teams, Google Chat)
_SECRET_PATH = re.compile(r"(?i)(/(?:services|api/webhooks|webhookb2|webhook|hooks)/).+")


def redact_urls(text: str) -> str:
    """Every URL inside `text`, through `redact_url`."""
    return _URL.sub(lambda m: redact_url(m.group(0)), text)


def redact_url(url: str) -> str:
    """`https://user:pw@host/x?token=abc&rev=main` -> `https://host/x?rev=main`; webhook paths masked."""
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced IPv6 bracket: cut the userinfo textually
        return _USERINFO.sub(r"\1", url)
    netloc = parts.netloc.rpartition("@")[2]
    # split by hand rather than parse_qsl/urlencode: the kept parameters stay byte-for-byte
    query = "&".join(p for p in parts.query.split("&") if p and not _secret_param(p))
    path = _SECRET_PATH.sub(lambda m: m[1] + REDACTED, parts.path)
    return urlunsplit((parts.scheme, netloc, path, query, parts.fragment))


def _secret_param(pair: str) -> bool:
    name = pair.split("=", 1)[0]
    return name.lower() in _SECRET_PARAMS or is_secret_name(name)


# ---------------------------------------------------------------- text

# `--api-key X`, `--hf-token=X`, `-api_key 'X'`: any flag whose name is secret (checked by is_secret_name);
# `more` are the words after it up to the next flag (vLLM's `--api-key K1 K2` takes several)
_VALUE = r"(?:'[^'\n]{0,4096}'|\"[^\"\n]{0,4096}\"|[^\s'\"]+)"
_FLAG = re.compile(rf"(?<![\w-])(?P<flag>--?[A-Za-z][\w.-]{{0,80}})(?P<sep>=|[ \t]+)(?P<value>(?!-){_VALUE})(?P<more>(?:[ \t]+(?!-){_VALUE}){{0,16}})")
# flags whose value is `user:password` (curl -u, --proxy-user, wget --user) or a password (mysql -p)
_USER_FLAGS = frozenset({"-u", "--user", "--proxy-user", "-U", "--http-user", "--ftp-user"})
_PASSWORD_FLAGS = frozenset({"-p", "--pass"})
_NOT_A_PASSWORD = re.compile(r"[\d:]+|[/.~].*")  # `-p 8080`, `-p 8080:80`, `mkdir -p /x`
_UID_GID = re.compile(r"\d+:\d+")  # `docker run -u 1000:1000`: ids, not a user and password
# `name=value`, `name = value`, `'name': value`, `"name": "value"`, `NAME: value` (YAML), `name=['v']` (vLLM's
# `non-default args: {...}` dict repr). The name must be secret; the callback leaves others untouched, and
# the name pattern cannot swallow a call (`server_args=ServerArgs(api_key='x')` is two assignments).
_ASSIGN = re.compile(
    r"(?P<q>['\"]?)(?P<name>(?<![\w.-])[A-Za-z_][\w.-]{0,80})(?P=q)(?P<sep>[ \t]{0,4}[=:][ \t]{0,4})"
    r"(?P<value>'[^'\n]{0,4096}'|\"[^\"\n]{0,4096}\"|\[[^\]\n]{0,4096}\]|[^\s,;&'\"()\[\]{}<>]+)"
)
_KEEP_VALUES = frozenset({"None", "none", "null", "''", '""', "[]", "false", "False", "true", "True"})
_AUTH_HEADER = re.compile(r"(?i)\b(bearer|basic|token|digest|apikey|sso-key)([ \t]+)[A-Za-z0-9._~+/=:-]{4,}")
# credentials with a recognisable shape, wherever they stand: `token hf_...`, a bare AWS key id, a JWT
_TOKEN_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"hf_[A-Za-z0-9]{10,}"
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16,}"
    r"|sk-[A-Za-z0-9_-]{10,}"
    r"|(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{10,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abposre]-[A-Za-z0-9-]{8,}|xapp-[A-Za-z0-9-]{8,}"
    r"|glpat-[A-Za-z0-9_-]{16,}|gl(?:dt|rt|ptt|ft|soat|cbt)-[A-Za-z0-9_-]{16,}"
    r"|AIza[0-9A-Za-z_-]{30,}|npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_-]{40,}"
    r"|ya29\.[A-Za-z0-9_-]{20,}|1//0[A-Za-z0-9_-]{20,}|nvapi-[A-Za-z0-9_-]{20,}"
    r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{16,}|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"
    r"|hv[sbr]\.[A-Za-z0-9_-]{20,}|r8_[A-Za-z0-9]{20,}|gsk_[A-Za-z0-9]{20,}"
    r"|api_org_[A-Za-z0-9]{20,}|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{20,}|LTAI[A-Za-z0-9]{12,}"
    r"|dapi[a-f0-9]{32}|pplx-[A-Za-z0-9]{32,}|lin_api_[A-Za-z0-9]{32,}|ntn_[A-Za-z0-9]{32,}|ATATT3[A-Za-z0-9_=-]{32,}"
    r"|do[por]_v1_[a-f0-9]{32,}|SK[0-9a-fA-F]{32}|\d{8,10}:AA[A-Za-z0-9_-]{33}"
    r"|[MN][A-Za-z\d]{23,25}\.[\w-]{6}\.[\w-]{27,38}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{0,2000}"
    r")(?![A-Za-z0-9_])"
)
# PEM and PGP private key blocks; the body may hold headers with dashes (`Proc-Type: 4,ENCRYPTED`)
_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:[^-]|-(?!----END)){0,65536}"
    r"(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)?"
)
# lower-case prefixes that also start ordinary identifiers: a token mixes case or has digits
_IDENT_LIKE = ("hf_", "sk-")


def redact_text(text: str) -> str:
    """Secrets in any text masked: flags, assignments in every style, URLs, auth headers, token shapes."""
    if not text:
        return text
    text = _PRIVATE_KEY.sub(REDACTED, text)
    text = redact_urls(text)
    text = _FLAG.sub(_flag, text)
    text = _AUTH_HEADER.sub(_auth_header, text)
    text = _ASSIGN.sub(_assign, text)
    return _TOKEN_SHAPES.sub(_token, text)


redact_env_text = redact_text  # env.txt lines are `KEY=VALUE` text like any other


def _flag(m: re.Match[str]) -> str:
    flag, value, more = m["flag"], m["value"], m["more"] or ""
    if flag in _USER_FLAGS:
        user, colon, password = value.strip("'\"").partition(":")
        plain = colon and password and (password == REDACTED or _UID_GID.fullmatch(value.strip("'\"")))
        masked = f"{user}:{REDACTED}" if colon and password and not plain else value
        return f"{flag}{m['sep']}{masked}{_more(more, False)}"
    if flag in _PASSWORD_FLAGS and not _NOT_A_PASSWORD.fullmatch(value.strip("'\"")):
        return f"{flag}{m['sep']}{REDACTED}{_more(more, False)}"
    if not is_secret_name(flag) or value == REDACTED:
        return f"{flag}{m['sep']}{value}{_more(more, False)}"
    return f"{flag}{m['sep']}{REDACTED}{_more(more, True)}"


def _more(more: str, secret: bool) -> str:
    """The words after a flag's first value: a secret flag's further values that look like keys are
    masked (`--api-key K1 K2`); prose after a flag is kept. Others go through the flag pattern again."""
    if not more or not secret:
        return more  # no word of `more` starts with "-": none is a flag
    return re.sub(r"[^\s]+", lambda w: REDACTED if _looks_random(w[0].strip("'\"")) or _TOKEN_SHAPES.fullmatch(w[0]) else w[0], more)


# "token" also counts things: `#new-token: 8`, `cached-token: 0`, `freetoken-371: expected`. Under a name
# whose only secret word is that one, and no word of a service or an access (`HF_TOKEN`, `api_token`), a
# number or a short plain word is a count or prose, not a key.
_COUNTING_WORDS = frozenset({"token", "tokens"})
_SERVICE_WORDS = frozenset({"hf", "api", "access", "auth", "refresh", "session", "bearer", "github", "gh", "gitlab",
                            "slack", "openai", "wandb", "hub", "aws", "ngc", "id", "oauth", "client", "bot"})
_PLAIN_VALUE = re.compile(r"[-+]?\d+(?:\.\d+)?%?|[a-z][a-z_-]{0,11}")


def _counting_name(name: str) -> bool:
    words = [w.lower() for w in _WORD_SPLIT.split(name[:200]) if w]
    secret = [w for w in words if w in _SECRET_WORDS or (len(w) > 5 and w.endswith(_SECRET_SUFFIXES))]
    counting = all(w in _COUNTING_WORDS or (w.endswith("token") and w not in _SECRET_WORDS) for w in secret)
    return bool(secret) and counting and not _SERVICE_WORDS.intersection(words)


def _assign(m: re.Match[str]) -> str:
    value = m["value"]
    if not is_secret_name(m["name"]) or value in _KEEP_VALUES or REDACTED in value or value.lower() in _SCHEMES:
        return m[0]
    if _counting_name(m["name"]) and _PLAIN_VALUE.fullmatch(value):
        return m[0]
    if value[0] in "'\"" and len(value) >= 2:
        masked = f"{value[0]}{REDACTED}{value[0]}"
    elif value[0] == "[":
        masked = f"['{REDACTED}']"
    else:
        masked = REDACTED
    return f"{m['q']}{m['name']}{m['q']}{m['sep']}{masked}"


_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "apikey", "sso-key"})


def _auth_header(m: re.Match[str]) -> str:
    if m[0].endswith(REDACTED) or (m[1].lower() != "bearer" and not _looks_random(m[0].split()[-1])):
        return m[0]  # "token budget", "basic usage": prose, not a credential
    return f"{m[1]}{m[2]}{REDACTED}"


def _token(m: re.Match[str]) -> str:
    value = m[0]
    if value.startswith(_IDENT_LIKE) and not _looks_random(value[3:]):
        return value  # `hf_transfer`, `sk-learn-compat`: identifiers, not keys
    return REDACTED


def _looks_random(value: str) -> bool:
    """Mixed case or digits among letters, of a credential's length: `hf_aB3...`, not `hf_overrides`."""
    return len(value) >= 8 and (any(c.isdigit() for c in value) or (value.lower() != value and value.upper() != value))


def redact_cmdline(cmdline: str) -> str:
    """`--api-key sk-1 sk-2 --tp 2` -> `--api-key <redacted> <redacted> --tp 2` (see _redact_cmdline).
    Every sample redacts every process's command line again: the same lines come from a cache,
    bounded in entries and in the size of what it keeps (a JIT's compiler lines are long and many)."""
    return _cached_cmdline(cmdline) if len(cmdline) <= 8192 else _redact_cmdline(cmdline)


def _redact_cmdline(cmdline: str) -> str:
    """`--api-key sk-1 sk-2 --tp 2` -> `--api-key <redacted> <redacted> --tp 2`; URLs lose their
    credentials. A command line that splits as a shell's words is redacted as an argv (every value
    of a secret flag, up to the next flag); any other text as text."""
    text = redact_text(cmdline)  # first as text: `key = value` spans words
    try:
        words = shlex.split(text)
    except ValueError:
        return text
    redacted_words = redact_argv(words)
    if redacted_words == words:
        return text
    return " ".join(_quoted(word) for word in redacted_words)


_cached_cmdline = functools.lru_cache(maxsize=512)(_redact_cmdline)


def _quoted(word: str) -> str:
    """shlex.quote, but a word whose only unsafe characters are the mask's own stays readable."""
    plain = word.replace(REDACTED, "x")
    return word if REDACTED in word and shlex.quote(plain) == plain else shlex.quote(word)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """`["--api-key", "sk-1", "sk-2", "--tp", "2"]` -> `["--api-key", "<redacted>", "<redacted>", "--tp", "2"]`:
    every value after a secret flag up to the next flag; `-u user:pw` keeps the user; each word redacted too."""
    out: list[str] = []
    state = ""  # "secret": mask the values that follow; "user"/"password": only the next one
    for arg in argv:
        arg = str(arg)
        if arg.startswith("-") and len(arg) > 1:
            state = ""
        if state == "secret":
            out.append(REDACTED)
            continue
        if state == "user":
            user, colon, password = arg.partition(":")
            out.append(f"{user}:{REDACTED}" if colon and password and not _UID_GID.fullmatch(arg) else redact_text(arg))
            state = ""
            continue
        if state == "password":
            out.append(arg if _NOT_A_PASSWORD.fullmatch(arg) else REDACTED)
            state = ""
            continue
        out.append(redact_text(arg))
        if arg.startswith("-") and "=" not in arg:
            state = "user" if arg in _USER_FLAGS else "password" if arg in _PASSWORD_FLAGS else "secret" if is_secret_name(arg) else ""
    return out


# ---------------------------------------------------------------- structured values and files


def redact_obj(value: Any, _key: str | None = None, _depth: int = 0) -> Any:
    """A copy of JSON-able `value`: strings redacted, values under a secret key masked, argv lists by flag."""
    if _depth > 600:
        # deeper than any evidence we write: not worth walking. The merged stack tree is the deepest:
        # two levels per frame, and a stuck rank's stack is often 40-100 frames deep.
        return REDACTED
    if _key is not None and is_secret_name(_key) and isinstance(value, (str, int, float, list)) and value not in (None, "", []):
        return REDACTED if not isinstance(value, list) else [REDACTED]
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {redact_text(k) if isinstance(k, str) else k: redact_obj(v, k if isinstance(k, str) else None, _depth + 1)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if _key in ("cmdline", "argv", "args") and all(isinstance(v, str) for v in value):
            return redact_argv(value)
        return [redact_obj(v, None, _depth + 1) for v in value]
    return value


def redact_files(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """Bundle files with secrets masked in each: JSON by structure, text by line, binary as it is."""
    return {name: _redact_file(name, data) for name, data in files.items()}


def _redact_file(name: str, data: bytes) -> bytes:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", "surrogateescape")  # a log with a stray byte is still a log: redact it
        if "\x00" in text[:4096]:
            return data  # binary: no text secret to find, and re-encoding would change it
        return redact_text(text).encode("utf-8", "surrogateescape")
    if name.endswith(".json"):
        # Redact inside the parsed strings: a text substitution could eat a closing quote.
        try:
            return json.dumps(redact_obj(json.loads(text)), indent=1).encode()
        except (ValueError, RecursionError):
            pass
    if name == "cmdline.txt" and "\x00" in text:  # /proc/PID/cmdline form
        return "\x00".join(redact_argv(text.split("\x00"))).encode()
    return redact_text(text).encode("utf-8")


def redact_string(text: str) -> str:
    """The name the sinks use for `redact_text`."""
    return redact_text(text)


def redacted(value: Any) -> Any:
    """The name the sinks use for `redact_obj`."""
    return redact_obj(value)


def redacted_verdict(verdict: Verdict) -> dict[str, Any]:
    """`Verdict.to_dict()` with secrets masked: what every sink publishes."""
    body = redact_obj(verdict.to_dict())
    assert isinstance(body, dict)  # redact_obj keeps the shape of what it is given
    return body


# ---------------------------------------------------------------- terminal

# ESC [ ... final (CSI), ESC ] ... BEL/ST (OSC: titles, OSC 52 clipboard, hyperlinks), ESC P/X/^/_ ... ST,
# two-byte ESC sequences, the 8-bit CSI/OSC/DCS/SOS/PM/APC (0x9b, 0x9d, 0x90, 0x98, 0x9e, 0x9f) with their
# payload, other C1 and C0 controls but \t and \n; and what reorders or hides text: bidi embeddings,
# overrides and isolates (Trojan Source), zero-width characters, the BOM, line/paragraph separators.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]{0,64}[ -/]{0,8}[@-~]?"
    r"|\x9b[0-?]{0,64}[ -/]{0,8}[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x9d\x90\x98\x9e\x9f])[^\x07\x1b\x9c]{0,65536}(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -~]?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
    r"|[\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]"
)


def terminal_safe(text: str) -> str:
    """`text` without terminal control sequences: a bundle's strings cannot retitle or write the clipboard.

    Lone surrogates (undecodable file names) become U+FFFD, so a strict UTF-8 terminal can print it."""
    text = _ESCAPES.sub("", text)
    if not _has_surrogates(text):
        return text
    return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)


def terminal_text(text: object) -> str:
    """What any watched-side string becomes before a terminal shows it: without control sequences,
    bidi overrides and invisible characters (so none can split a token), then redacted."""
    return redact_text(terminal_safe(str(text)))


class TerminalWriter:
    """A text stream that passes every write through `terminal_text`: the one gate for plain
    prints of watched-side text (preflight paths, fleet agents' strings)."""

    def __init__(self, out: Any) -> None:
        self._out = out

    def write(self, text: str) -> int:
        written: int = self._out.write(terminal_text(text))
        return written

    def flush(self) -> None:
        self._out.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._out, name)


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
