"""deploy/prometheus-scrape.yml, the plain scrape config for the agents, checked by the real promtool.

Its files (the token, the rules) are pointed at this test's copies. Debian's Prometheus is built
without Kubernetes service discovery: there the `kubernetes_sd_configs` block is replaced by the
static targets it would find, and its relabelling is checked as it is."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from helpers.paths import ROOT

PROMTOOL = shutil.which("promtool")


@pytest.mark.skipif(PROMTOOL is None, reason="apt-get install prometheus")
def test_promtool_checks_the_shipped_scrape_config(tmp_path: Path) -> None:
    assert PROMTOOL is not None
    config = yaml.safe_load((ROOT / "deploy" / "prometheus-scrape.yml").read_text())
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    config["rule_files"] = [str(ROOT / "dashboards" / "alerts.yml")]
    for job in config["scrape_configs"]:
        job["authorization"]["credentials_file"] = str(token)
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    result = subprocess.run([PROMTOOL, "check", "config", str(path)], capture_output=True, text=True, timeout=60)
    if "kubernetes_sd_configs not found" in result.stdout + result.stderr:
        k8s = config["scrape_configs"][0]
        k8s.pop("kubernetes_sd_configs")
        k8s["static_configs"] = [{"targets": ["10.0.0.7:9464"]}]
        path.write_text(yaml.safe_dump(config))
        result = subprocess.run([PROMTOOL, "check", "config", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr
    jobs = {job["job_name"] for job in config["scrape_configs"]}
    assert "hangwatch" in jobs
