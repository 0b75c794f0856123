"""The fleet page of `hangwatch fleet --prometheus --serve` in a real Chromium, 500 nodes in a real
Prometheus (their series backfilled with promtool: tests/helpers/fleet_series.py), one launch stuck:
the node and the launch apart are named first, and the calm launches are folded and paged."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By

from helpers.chrome import Browser
from helpers.fleet_series import PROMTOOL, backfill, instance, launch_name, openmetrics
from helpers.pageprocs import HANGWATCH, Procs, free_port, get_json, wait_until
from helpers.promserver import PROMETHEUS, Prometheus

pytestmark = [pytest.mark.slow, pytest.mark.skipif(PROMETHEUS is None or PROMTOOL is None,
                                                   reason="prometheus/promtool not installed (apt-get install prometheus)")]

NODES, PER_LAUNCH, STUCK = 500, 8, 3


@pytest.fixture
def fleet_page(procs: Procs, tmp_path: Path) -> Iterator[str]:
    closed = f"http://127.0.0.1:{free_port()}"  # the stuck node's agent is gone: its details cannot be read
    data = backfill(openmetrics(NODES, per_launch=PER_LAUNCH, stuck=STUCK, now=time.time() - 5, dead_url=closed), tmp_path)
    prometheus = Prometheus(tmp_path, [], data=data)
    try:
        port = free_port()
        proc = procs.start([HANGWATCH, "fleet", "--prometheus", prometheus.url, "--serve", "--port", str(port)], "fleet")
        url = f"http://127.0.0.1:{port}"

        def up() -> bool:
            assert proc.poll() is None, procs.output("fleet")
            return get_json(url + "/healthz")["nodes"] == NODES

        wait_until(up, 60, "the fleet page")
        yield url
    finally:
        prometheus.close()


def _page(browser: Browser) -> dict[str, Any]:
    return browser.js("""
      const launches = Array.from(document.querySelectorAll('#launches .launch'));
      const first = launches[0];
      return {apart: (document.getElementById('apart') || {}).textContent || '',
              count: (document.getElementById('fleet-count') || {}).textContent || '',
              launches: launches.map((l) => l.dataset.launch),
              firstRows: first ? Array.from(first.querySelectorAll('tr.member')).map((r) => [r.dataset.node, r.className]) : [],
              calm: (document.querySelector('#calm summary') || {}).textContent || '',
              calmOpen: !!(document.getElementById('calm') || {}).open,
              state: document.getElementById('state').textContent};
    """)


def test_the_stuck_node_and_its_launch_are_named_first_among_500(fleet_page: str, browser: Browser) -> None:
    stuck, launch = instance(STUCK), launch_name(STUCK, PER_LAUNCH)
    browser.driver.get(fleet_page + "/")
    page = wait_until(lambda: (p := _page(browser)) and stuck in p["apart"] and p, 60, "the node apart named")
    # THEN the first line names the node apart and its launch, and why (furthest behind, its cause)
    assert page["apart"].startswith(f"Node {stuck} stands apart: launch {launch}:"), page["apart"]
    assert "dist_init" in page["apart"] and "multinode_rendezvous" in page["apart"]
    assert page["count"].startswith(f"{NODES} nodes in {NODES // PER_LAUNCH + 1} launches")
    # the stuck launch is the only one drawn in full, its node apart first and marked
    assert page["launches"] == [launch]
    assert page["firstRows"][0] == [stuck, "member apart"] and len(page["firstRows"]) == PER_LAUNCH
    assert page["state"] == "stalled"
    # the calm launches are folded: one line until opened, then 50 rows a page
    calm = NODES // PER_LAUNCH + 1 - 1
    assert page["calm"].startswith(f"{calm} launches with no node apart") and not page["calmOpen"]
    browser.driver.find_element(By.CSS_SELECTOR, "#calm summary").click()
    rows = lambda: browser.js("return document.querySelectorAll('#calm-table tr[data-launch]').length")  # noqa: E731
    assert wait_until(lambda: rows() == 50, 20, "the first page of calm launches")
    assert wait_until(lambda: _click(browser, "#calm button[data-page='1']"), 20, "the second page's button")
    assert wait_until(lambda: rows() == calm - 50, 20, "the second page")
    # it stays open and on its page across refreshes
    time.sleep(2.5)
    assert rows() == calm - 50 and _page(browser)["calmOpen"]
    assert not [e for e in browser.errors() if "favicon" not in e]


def _click(browser: Browser, selector: str) -> bool:
    """Click, again if the page re-rendered the element between finding and clicking it: the page
    redraws on its own refresh, and a loaded host can put one between the two."""
    try:
        browser.driver.find_element(By.CSS_SELECTOR, selector).click()
    except StaleElementReferenceException:
        return False
    return True
