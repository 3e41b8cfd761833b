"""Headless Chromium through Selenium, for the UI's browser tests and its screenshot script.

Debian's ``chromium`` and ``chromium-driver`` packages (``apt-get install -y chromium chromium-driver``)
and ``selenium`` from PyPI (the ``test`` extra). The driver is named explicitly, so Selenium Manager
never tries to download one; the browser runs with a fresh profile in a temporary directory and
without any of its own network traffic (updates, sync, safe browsing lists).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

BROWSER_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
DRIVER_CANDIDATES = ("chromedriver", "chromium-driver")
HEADLESS_FLAGS = (
    "--headless",
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",  # containers with a small /dev/shm
)


def _which(names: tuple[str, ...], env: str) -> str | None:
    if os.environ.get(env):
        return os.environ[env]
    return next((path for name in names if (path := shutil.which(name))), None)


def browser_unavailable() -> str | None:
    """Why no headless browser can be driven here, or None when one can."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install 'memlab[test]')"
    if _which(BROWSER_CANDIDATES, "MEMLAB_CHROMIUM") is None:
        return "no Chromium found (apt-get install -y chromium chromium-driver, or set MEMLAB_CHROMIUM)"
    if _which(DRIVER_CANDIDATES, "MEMLAB_CHROMEDRIVER") is None:
        return "no chromedriver found (apt-get install -y chromium-driver, or set MEMLAB_CHROMEDRIVER)"
    return None


@contextlib.contextmanager
def headless_chromium(width: int = 1366, height: int = 900) -> Iterator[Any]:
    """A Selenium ``WebDriver`` on headless Chromium with a fresh profile; quit and cleaned up after."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    reason = browser_unavailable()
    if reason is not None:
        raise RuntimeError(reason)
    browser = _which(BROWSER_CANDIDATES, "MEMLAB_CHROMIUM")
    driver_path = _which(DRIVER_CANDIDATES, "MEMLAB_CHROMEDRIVER")
    profile = tempfile.mkdtemp(prefix="memlab-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(browser)
    for flag in (*HEADLESS_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.add_experimental_option("prefs", {"download.default_directory": profile})
    driver = webdriver.Chrome(service=Service(executable_path=str(driver_path)), options=options)
    try:
        driver.set_page_load_timeout(30)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


__all__ = ["HEADLESS_FLAGS", "browser_unavailable", "headless_chromium"]
