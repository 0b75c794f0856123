"""The Kubernetes manifests in deploy/, checked offline (no cluster, no network): each object has the
fields its kind requires, uses only fields its kind has (a vendored minimal schema below, from the
Kubernetes API reference and the Prometheus Operator's CRDs), and every name one object uses (a
secret and its key, a volume, a port, the labels a selector matches) is defined by another. The
agent's command line uses only options `hangwatch attach` has.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from hangwatch.cli.app import app
from helpers.paths import ROOT

MANIFESTS = sorted((ROOT / "deploy").glob("k8s-*.yaml"))

# kind -> (apiVersion, required dotted paths)
KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "Namespace": ("v1", ()),
    "Secret": ("v1", ()),
    "Pod": ("v1", ("spec.containers",)),
    "DaemonSet": ("apps/v1", ("spec.selector.matchLabels", "spec.template.metadata.labels",
                              "spec.template.spec.containers")),
    "PodMonitor": ("monitoring.coreos.com/v1", ("spec.selector", "spec.podMetricsEndpoints")),
}
# the fields each structure may have (a subset of the API's: the manifests use no others)
FIELDS = {
    "pod_spec": {"containers", "volumes", "hostPID", "shareProcessNamespace", "nodeSelector", "tolerations",
                 "serviceAccountName", "securityContext", "initContainers", "affinity", "priorityClassName"},
    "container": {"name", "image", "command", "args", "env", "ports", "securityContext", "readinessProbe",
                  "livenessProbe", "startupProbe", "resources", "volumeMounts", "imagePullPolicy", "workingDir"},
    "security_context": {"runAsUser", "runAsNonRoot", "allowPrivilegeEscalation", "readOnlyRootFilesystem",
                         "capabilities", "privileged"},
    "pod_metrics_endpoint": {"port", "path", "interval", "scrapeTimeout", "scheme", "authorization", "relabelings",
                             "metricRelabelings", "honorLabels"},
}
PORT_NAME = re.compile(r"^(?=.{1,15}$)[a-z0-9]([a-z0-9-]*[a-z0-9])?$")  # IANA_SVC_NAME
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _get(doc: dict[str, Any], dotted: str) -> Any:
    value: Any = doc
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"] if doc["kind"] == "Pod" else doc["spec"]["template"]["spec"]


def _pod_labels(doc: dict[str, Any]) -> dict[str, str]:
    return doc["metadata"].get("labels", {}) if doc["kind"] == "Pod" else doc["spec"]["template"]["metadata"]["labels"]


def test_there_are_manifests() -> None:
    assert {p.name for p in MANIFESTS} >= {"k8s-daemonset.yaml", "k8s-sidecar.yaml"}


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_object_has_its_kinds_fields(path: Path) -> None:
    for doc in _docs(path):
        kind = doc.get("kind")
        assert kind in KINDS, f"{path.name}: unknown kind {kind!r}"
        api, required = KINDS[kind]
        assert doc.get("apiVersion") == api, f"{path.name}: {kind} wants apiVersion {api}"
        assert doc.get("metadata", {}).get("name"), f"{path.name}: {kind} has no metadata.name"
        for dotted in required:
            assert _get(doc, dotted), f"{path.name}: {kind} {doc['metadata']['name']} lacks {dotted}"
        if kind in ("Pod", "DaemonSet"):
            _check_pod(path, doc)


def _check_pod(path: Path, doc: dict[str, Any]) -> None:
    spec = _pod_spec(doc)
    assert set(spec) <= FIELDS["pod_spec"], set(spec) - FIELDS["pod_spec"]
    volumes = {v["name"] for v in spec.get("volumes", [])}
    for c in spec["containers"]:
        assert c.get("name") and c.get("image"), f"{path.name}: a container needs a name and an image"
        assert set(c) <= FIELDS["container"], set(c) - FIELDS["container"]
        assert set(c.get("securityContext", {})) <= FIELDS["security_context"]
        for port in c.get("ports", []):
            assert isinstance(port["containerPort"], int) and 0 < port["containerPort"] < 65536
            assert "name" not in port or PORT_NAME.match(port["name"]), port
        for mount in c.get("volumeMounts", []):
            assert mount["name"] in volumes, f"{path.name}: {c['name']} mounts an undefined volume {mount['name']}"
        for env in c.get("env", []):
            assert ENV_NAME.match(env["name"]) and ("value" in env) != ("valueFrom" in env), env
        numbers = {p["containerPort"] for p in c.get("ports", [])} | {p.get("name") for p in c.get("ports", [])}
        for probe in ("readinessProbe", "livenessProbe"):
            if probe in c and c["name"] == "hangwatch":
                assert c[probe]["httpGet"]["port"] in numbers, f"{probe} on a port the container does not declare"
    if doc["kind"] == "DaemonSet":
        match = doc["spec"]["selector"]["matchLabels"]
        assert match.items() <= _pod_labels(doc).items(), "the DaemonSet's selector must match its pods' labels"


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_secret_key_used_is_defined(path: Path) -> None:
    docs = _docs(path)
    secrets = {(d["metadata"]["name"], key) for d in docs if d["kind"] == "Secret"
               for key in {**d.get("stringData", {}), **d.get("data", {})}}
    used = []
    for d in docs:
        if d["kind"] in ("Pod", "DaemonSet"):
            used += [(e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
                     for c in _pod_spec(d)["containers"] for e in c.get("env", [])
                     if "secretKeyRef" in e.get("valueFrom", {})]
        if d["kind"] == "PodMonitor":
            used += [(ep["authorization"]["credentials"]["name"], ep["authorization"]["credentials"]["key"])
                     for ep in d["spec"]["podMetricsEndpoints"] if "authorization" in ep]
    assert used and set(used) <= secrets, set(used) - secrets


def test_the_pod_monitor_scrapes_the_daemonsets_agent_port() -> None:
    docs = _docs(ROOT / "deploy" / "k8s-daemonset.yaml")
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    (pm,) = [d for d in docs if d["kind"] == "PodMonitor"]
    assert pm["spec"]["selector"]["matchLabels"].items() <= _pod_labels(ds).items()
    assert ds["metadata"]["namespace"] in pm["spec"]["namespaceSelector"]["matchNames"]
    names = {p["name"] for c in _pod_spec(ds)["containers"] for p in c.get("ports", [])}
    for endpoint in pm["spec"]["podMetricsEndpoints"]:
        assert set(endpoint) <= FIELDS["pod_metrics_endpoint"], set(endpoint) - FIELDS["pod_metrics_endpoint"]
        assert endpoint["port"] in names and endpoint["path"] == "/metrics"
        assert endpoint["authorization"]["type"] == "Bearer"


def _attach_options() -> set[str]:
    attach = typer.main.get_command(app).commands["attach"]  # type: ignore[attr-defined]  # a group's
    return {opt for p in attach.params for opt in (*p.opts, *p.secondary_opts) if opt.startswith("--")}


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_the_agents_command_uses_only_options_attach_has(path: Path) -> None:
    known = _attach_options()
    scripts = [" ".join(c.get("args", [])) for d in _docs(path) if d["kind"] in ("Pod", "DaemonSet")
               for c in _pod_spec(d)["containers"] if c["name"] == "hangwatch"]
    assert scripts
    for script in scripts:
        line = script[script.index("hangwatch attach"):].replace("\\\n", " ").split("\n")[0]
        used = {word.split("=")[0] for word in shlex.split(line.replace("${log:+--log \"$log\"}", "--log x"))
                if word.startswith("--")}
        assert used and used <= known, used - known


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_the_start_script_finds_a_launcher_and_not_itself(path: Path) -> None:
    # with hostPID (or a shared process namespace) `pgrep -f` sees the start script's own command
    # line, which holds the pattern: the pattern must not match its own text
    scripts = [" ".join(c.get("args", [])) for d in _docs(path) if d["kind"] in ("Pod", "DaemonSet")
               for c in _pod_spec(d)["containers"] if c["name"] == "hangwatch"]
    for script in scripts:
        pattern = re.search(r"pgrep -o -f '([^']+)'", script)
        assert pattern is not None, script
        finds = re.compile(pattern.group(1))
        assert not finds.search(f"/bin/sh -c {script}")
        for launcher in ("python3 -m sglang.launch_server --model-path M --tp 8", "/usr/bin/python3 /usr/local/bin/vllm serve M",
                         "python -m vllm.entrypoints.openai.api_server --model M"):
            assert finds.search(launcher), launcher
