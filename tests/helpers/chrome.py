"""A real headless Chromium (Debian's chromium + chromedriver) driven by selenium, for the page tests.

Each browser gets a fresh profile directory and the flags that keep Chromium off the network
(no background fetches, no component updates, no sync), so a test sees only what the page asks for.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,1000"]


def chromium_paths() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


class Browser:
    """One Chromium; `close()` quits it and removes its profile."""

    def __init__(self, width: int = 1400, height: int = 1000) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        paths = chromium_paths()
        if paths is None:
            raise RuntimeError("chromium and chromedriver are not installed (apt-get install chromium chromium-driver)")
        self.profile = Path(tempfile.mkdtemp(prefix="hangwatch-chromium-"))
        options = webdriver.ChromeOptions()
        options.binary_location = paths[0]
        for flag in FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--window-size={width},{height}")
        options.add_argument(f"--user-data-dir={self.profile}")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver = webdriver.Chrome(options=options, service=Service(paths[1]))
        self.driver.set_page_load_timeout(30)

    def logs(self) -> list[dict[str, Any]]:
        return list(self.driver.get_log("browser"))

    def errors(self) -> list[str]:
        """Console errors and failed loads since the last call."""
        return [entry["message"] for entry in self.logs() if entry.get("level") == "SEVERE"]

    def text(self, element_id: str) -> str:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.ID, element_id).text

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def screenshot(self, path: Path) -> None:
        height = self.js("return Math.max(document.body.scrollHeight, 800)")
        self.driver.set_window_size(1400, min(int(height) + 40, 2600))
        self.driver.save_screenshot(str(path))

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)


PAGE_FACTS = """
const q = (s) => Array.from(document.querySelectorAll(s));
const text = (id) => { const e = document.getElementById(id); return e ? e.textContent : null; };
return {state: document.getElementById('banner').dataset.state, cause: text('cause'),
        rows: q('#gantt g.rank-row').map((g) => g.dataset.rank),
        outliers: q('#tree-outliers .culprit').map((e) => e.dataset.rank),
        treeRanks: (document.getElementById('stacktree') || {textContent: ''}).textContent,
        remedy: text('remedy'), evidence: q('#evidence-list li').length,
        tokenForm: !document.getElementById('token-form').hidden, main: !document.getElementById('main').hidden,
        tokenError: text('token-error')};
"""


def facts(browser: Browser) -> dict[str, Any]:
    return browser.js(PAGE_FACTS)
