"""The live page (GET /) in a real headless Chromium, on real stuck servers.

The small test server (tests/integration/programs, `fifo_rank`: TP1 blocks opening a FIFO for its
weights while TP0 has loaded and waits for it) gives two real ranks to tell apart in seconds; the
lab test runs the real SGLang server on CPU.
"""

from __future__ import annotations

import os
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from helpers.chrome import Browser, facts
from helpers.labrun import HELD_PREFIX, HeldScenarios
from helpers.pageprocs import ROOT, Procs, get_json, start_test_server, wait_until


def test_page_shows_the_stuck_rank_of_a_real_two_rank_server(procs: Procs, browser: Browser, tmp_path: Path) -> None:
    # GIVEN a server whose TP1 hangs opening its weights while TP0 waits for it, watched with --serve
    server = start_test_server(procs, tmp_path, "fifo_rank")
    url = procs.agent(server.pid)
    # WHEN a person opens the page before the verdict
    browser.driver.get(url + "/")
    # THEN it shows the stall and its cause, as the API says
    wait_until(lambda: _state(url) == "stalled", 60, "a stalled verdict")
    verdict = get_json(url + "/verdict")
    page = wait_until(lambda: (f := facts(browser))["state"] == "stalled" and f["cause"] and f, 15, "the page to show it")
    assert page["cause"] == get_json(url + "/verdict")["cause"] == verdict["cause"]
    assert page["remedy"] and page["evidence"] >= 1
    # one timeline row per rank the API's timeline has
    timeline = get_json(url + "/timeline")
    assert sorted(page["rows"]) == sorted(timeline["ranks"]) and {"TP0", "TP1"} <= set(page["rows"])
    # the merged stack tree names TP1, the rank still loading, as the one that stands apart
    assert page["outliers"] == ["TP1"], page
    assert "load_from_fifo" in page["treeRanks"] and "barrier_after_load" in page["treeRanks"]
    # and nothing went wrong in the browser
    assert browser.errors() == []


def test_page_asks_for_the_token_once_and_never_puts_it_in_a_url_or_a_log(procs: Procs, browser: Browser, tmp_path: Path) -> None:
    token = "page-token-4c1f9e"
    server = start_test_server(procs, tmp_path, "fifo_rank")
    url = procs.agent(server.pid, token=token)
    # the page loads without the token (it holds no data) and the data does not
    with pytest.raises(urllib.error.HTTPError) as refused:
        get_json(url + "/snapshot")
    assert refused.value.code == 401
    browser.driver.get(url + "/")
    assert wait_until(lambda: facts(browser)["tokenForm"], 10, "the token prompt")
    assert not facts(browser)["main"]
    # a wrong token is refused and asked again
    _type_token(browser, "wrong-token")
    assert wait_until(lambda: "refused" in (facts(browser)["tokenError"] or ""), 10, "the refusal")
    refusals = browser.errors()
    assert refusals and all("401" in line for line in refusals), refusals
    # the right one opens the page, which then updates by itself
    _type_token(browser, token)
    page = wait_until(lambda: (f := facts(browser))["main"] and f["state"] and f, 30, "the page with data")
    assert not page["tokenForm"]
    # it is kept for this tab only (sessionStorage), so a reload does not ask again
    assert browser.js("return sessionStorage.getItem('hangwatch-token')") == token
    browser.driver.refresh()
    assert wait_until(lambda: (f := facts(browser))["main"] and f["state"], 30, "the page after a reload")
    assert not facts(browser)["tokenForm"]
    # never in a URL, never in the agent's output, no console error once it is right
    assert token not in browser.driver.current_url
    assert token not in browser.js("return performance.getEntries().map((e) => e.name).join(' ')")
    assert browser.errors() == []
    assert token not in procs.output("agent")


def _state(url: str) -> str | None:
    try:
        return get_json(url + "/verdict")["state"]
    except urllib.error.HTTPError as exc:  # 503 before the first verdict
        assert exc.code == 503
        return None


def _type_token(browser: Browser, value: str) -> None:
    from selenium.webdriver.common.by import By

    field = browser.driver.find_element(By.ID, "token-input")
    field.clear()
    field.send_keys(value)
    browser.driver.find_element(By.ID, "token-submit").click()


LAB_PYTHON = os.environ.get("HANGWATCH_LAB_PYTHON") or str(ROOT / ".lab-venv" / "bin" / "python")


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.skipif(not Path(LAB_PYTHON).exists(), reason="no lab venv (lab/install.sh, or set HANGWATCH_LAB_PYTHON)")
@pytest.mark.xdist_group(HELD_PREFIX + "weights-fifo")
def test_page_on_a_real_sglang_hang_shows_stalled_and_the_cause(held_lab: HeldScenarios, procs: Procs, browser: Browser) -> None:
    # GIVEN the real SGLang server whose weights file is a FIFO (a hung filesystem; the held run that
    # test_lab.py watches too), watched with --serve
    info, _ = held_lab.stuck("weights-fifo")
    url = procs.agent(info["pid"], log=info["log"])
    browser.driver.get(url + "/")
    # WHEN the verdict becomes stalled, THEN the page shows it and the cause within a few seconds
    seen_api = seen_page = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and seen_page is None:
        assert held_lab.alive("weights-fifo"), "the held weights-fifo run has exited"
        if seen_api is None and _state(url) == "stalled":
            seen_api = time.monotonic()
        page = facts(browser)
        if seen_api is not None and page["state"] == "stalled" and page["cause"]:
            seen_page = time.monotonic()
        time.sleep(0.2)
    assert seen_api is not None and seen_page is not None, facts(browser)
    print(f"page showed the stall {seen_page - seen_api:.1f} s after the API did")
    verdict = get_json(url + "/verdict")
    page = facts(browser)
    assert (page["state"], page["cause"]) == ("stalled", verdict["cause"]) == ("stalled", "weight_loading_io")
    assert sorted(page["rows"]) == sorted(get_json(url + "/timeline")["ranks"])
    # the tree holds every sampled process and names the one whose stack decided the verdict
    deciding = sorted({m.group(1) for e in verdict["evidence"] if (m := re.match(r"stacks/([^/.]+)", e["source"]))})
    stacks = get_json(url + "/stacks")["stacks"]
    assert deciding and set(deciding) <= set(stacks), (verdict["evidence"], list(stacks))
    # its innermost Python frame: the same in a Python dump and in a native one (the native rung's
    # C frames around it), whichever of the two the page drew and /stacks holds a moment later
    innermost = [f["function"] for t in stacks[deciding[0]] if t["name"] == "MainThread"
                 for f in t["frames"] if f.get("origin") != "native"][:1]
    assert innermost and innermost[0] in page["treeRanks"], (innermost, page["treeRanks"])
    if len(stacks) > 1:
        assert page["outliers"] == deciding, page
    assert browser.errors() == []
