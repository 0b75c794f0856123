"""No secret in any output, end to end (issues 11, 24): a real server whose argv, environment and log
carry secrets, watched by a real `hangwatch attach --serve` with Slack and webhook receivers and a
history file; then `collect` (.tar.gz and folder) and `diagnose` of what it wrote. Every byte that
comes out — HTTP bodies (API, /snapshot, the page, the one-file report), the SQLite files, both
receivers, stdout/stderr, the bundles, the terminal's text, hangwatch's own /proc/PID/cmdline — is
searched for every planted secret, including every format of tests/data/credentials/formats.tsv
(written into the log) and vLLM's several `--api-key` values and `curl -u user:pw` in the argv.
"""

from __future__ import annotations

import json
import subprocess
import tarfile
import time
from pathlib import Path

import httpx

from helpers.livetools import HANGWATCH, Procs, _env, free_port, server_cmd, wait_for_text
from helpers.paths import DATA
from helpers.serve_support import Receiver


def _formats() -> list[tuple[str, str]]:
    rows = []
    for line in (DATA / "credentials" / "formats.tsv").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            _, secret, context = line.split("\t")
            rows.append((secret, context.replace("{}", secret, 1).replace("{{", "{").replace("}}", "}")))
    return rows


FORMATS = _formats()

ENV_SECRETS = {
    "HF_TOKEN": "hf_abcSECRETtok0123456789",
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7SECRETID",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMIKSECRETKEYxyz",
    "HTTPS_PROXY": "http://proxyuser:pxSECRETpw@proxy.local:3128",
    "HF_ENDPOINT": "https://hfuser:hfSECRETpw@hf.mirror.local/api",
    "SGLANG_REMOTE": "s3://bucket/x?X-Amz-Signature=sigSECRET123",
    "SGLANG_DB_PASS": "passWORDsecret77",
    "VLLM_STORE_CRED": "credVALUEsecret88",
}
ARGV = ["--api-key", "sk-liveSECRETapikey", "second2KEYsecret", "--hf-token", "hf_SECRETflagtoken",
        "--served-model-name", "https://mpuser:mpSECRETpw@models.local/llama", "--user", "alice:curlPWsecret9"]
LOG_LINES = [
    "server_args=ServerArgs(api_key='sk-logSECRETkey', hf_token='hf_logSECRETtok', tp_size=2)",
    "(APIServer pid=1) INFO 08-14 10:01:27 [api_utils.py:273] non-default args: {'api_key': ['sk-vllmSECRETkey']}",
    "Downloading with token hf_plainSECRETtok / Authorization: Bearer brSECRETbearer / Using AWS key AKIAPLAINSECRETKEY01",
    "postgres://dbuser:dbSECRETpw@db.local:5432/x / env dump: HF_TOKEN=hf_inlineSECRETtok AWS_SECRET_ACCESS_KEY=inlineSECRETaws",
    '{"api_key": "jsonSECRETvalue"} HF_TOKEN: yamlSECRETvalue aws_secret_access_key = kvSECRETwJal',
]
HANGWATCH_SECRETS = ["whSECRETq", "slackSECRETpath", "pubSECRETpw", "tokSECRET42"]
SECRETS = [*ENV_SECRETS.values(), "sk-liveSECRETapikey", "hf_SECRETflagtoken", "mpSECRETpw", "pxSECRETpw", "hfSECRETpw",
           "sigSECRET123", "sk-logSECRETkey", "hf_logSECRETtok", "sk-vllmSECRETkey", "hf_plainSECRETtok", "brSECRETbearer",
           "AKIAPLAINSECRETKEY01", "dbSECRETpw", "hf_inlineSECRETtok", "inlineSECRETaws", "jsonSECRETvalue",
           "yamlSECRETvalue", "kvSECRETwJal", "second2KEYsecret", "curlPWsecret9", *HANGWATCH_SECRETS,
           *(secret for secret, _ in FORMATS)]


def _leaks(name: str, data: bytes | str) -> list[str]:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return [f"{name}: {secret}" for secret in SECRETS if secret in text]


def _tar_texts(data: bytes) -> dict[str, bytes]:
    import io

    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]


def test_no_secret_leaves_through_any_output(tmp_path: Path) -> None:
    procs = Procs()
    slack, hook = Receiver(), Receiver()
    slack.url = f"http://127.0.0.1:{slack.port}/services/T000/B000/slackSECRETpath"
    outputs: dict[str, bytes | str] = {}
    try:
        log = tmp_path / "server.log"
        with log.open("wb") as fh:
            server = procs.start([*server_cmd(free_port()), *ARGV], stdout=fh, stderr=subprocess.STDOUT,
                                 env=_env(HW_MODE="tcpstore", **ENV_SECRETS))
        wait_for_text(log, "Init torch distributed begin")
        with log.open("a") as fh:
            fh.write("".join(f"[2026-11-30 10:00:01 TP0] {line}\n" for line in LOG_LINES))
            fh.write("".join(f"[2026-11-30 10:00:02 TP0] {context}\n" for _, context in FORMATS))

        token_file = tmp_path / "token"
        token_file.write_text("tokSECRET42\n")
        port = free_port()
        history = tmp_path / "h.db"
        env = _env(HANGWATCH_SLACK_WEBHOOK=slack.url, HANGWATCH_WEBHOOK=f"{hook.url}?token=whSECRETq",
                   HANGWATCH_TOKEN_FILE=str(token_file), HANGWATCH_PUBLIC_URL=f"http://pubuser:pubSECRETpw@node7:{port}")
        attach = procs.hangwatch(["attach", str(server.pid), "--serve", "--port", str(port), "--json",
                                  "--history", str(history), "--log", str(log)], env=env)
        assert slack.wait_for(1, 90) and hook.wait_for(1, 30), "no alert arrived"
        outputs["hangwatch argv"] = Path(f"/proc/{attach.pid}/cmdline").read_bytes()
        api = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": "Bearer tokSECRET42"},
                           timeout=30)
        for path in ("/verdict", "/healthz", "/metrics", "/stacks", "/timeline", "/history", "/openapi.json", "/snapshot",
                     "/", "/report.html", "/gpus"):
            response = api.get(path)
            assert response.status_code == 200, (path, response.status_code)
            outputs[f"GET {path}"] = response.content
        bundle = api.get("/bundle")
        assert bundle.status_code == 200
        for name, data in _tar_texts(bundle.content).items():
            outputs[f"/bundle {name}"] = data
        assert any(name.endswith("procs.json") for name in _tar_texts(bundle.content))

        collected = tmp_path / "c.tar.gz"
        run = subprocess.run([*HANGWATCH, "collect", str(server.pid), "-o", str(collected), "--log", str(log)],
                             capture_output=True, timeout=180, env=_env(**ENV_SECRETS), check=False)
        assert run.returncode == 0, run.stderr.decode()[-2000:]
        outputs["collect stdout+stderr"] = run.stdout + run.stderr
        for name, data in _tar_texts(collected.read_bytes()).items():
            outputs[f"collect {name}"] = data
        folder = tmp_path / "cdir"
        run = subprocess.run([*HANGWATCH, "collect", str(server.pid), "-o", str(folder), "--log", str(log)],
                             capture_output=True, timeout=180, env=_env(**ENV_SECRETS), check=False)
        assert run.returncode == 0
        for path in folder.rglob("*"):
            if path.is_file():
                outputs[f"collect dir {path.name}"] = path.read_bytes()
        for extra in ((), ("--json",), ("--html", str(tmp_path / "report.html"))):
            run = subprocess.run([*HANGWATCH, "diagnose", str(collected), *extra], capture_output=True, timeout=120,
                                 check=False)
            outputs[f"diagnose {extra}"] = run.stdout + run.stderr
        outputs["diagnose --html file"] = (tmp_path / "report.html").read_bytes() if (tmp_path / "report.html").exists() else b""
        # the terminal: the live text view of attach (no --json), as a person watching it reads it
        run = subprocess.run([*HANGWATCH, "attach", str(server.pid), "--log", str(log), "--timeout", "8"], capture_output=True,
                             timeout=120, env=_env(COLUMNS="200"), check=False)
        outputs["attach terminal"] = run.stdout + run.stderr

        time.sleep(1)
        procs.stop()  # hangwatch and the server; the history stays
        outputs["attach stdout"] = attach.stdout.read() if attach.stdout and not attach.stdout.closed else b""
        for suffix in ("", "-wal", "-shm"):
            path = Path(f"{history}{suffix}")
            if path.exists():
                outputs[f"history{suffix}"] = path.read_bytes()
        outputs["slack"] = json.dumps(slack.bodies) + json.dumps(slack.headers)
        outputs["webhook"] = json.dumps(hook.bodies) + json.dumps(hook.headers)
    finally:
        procs.stop()
        slack.close()
        hook.close()

    leaks = [leak for name, data in outputs.items() for leak in _leaks(name, data)]
    assert not leaks, leaks
    assert len(outputs) > 25  # every kind of output was actually looked at
