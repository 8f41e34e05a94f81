"""Headless Chromium for the web view's tests: Debian's `chromium` and `chromium-driver` (installed
by .ci/install), driven by selenium pointed at them (never a downloaded browser or driver).

`browser()` yields a WebDriver; where the browser is missing the test is skipped, except under
CI (CI=true), where a missing browser is a broken install and fails. `served(command, dir)` runs
a `kraftlab` command that serves the page (`kraftlab ui`, `kraftlab sim replay --ui`) with
`--port 0`, returns its URL once printed, and stops it by PID afterwards. Waits poll the DOM
with a deadline (WebDriverWait), never sleep.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.live import poll

CHROMIUM = ("chromium", "chromium-browser")
DRIVER = "chromedriver"
WINDOW = (1400, 1100)


def _find(names: tuple[str, ...]) -> str | None:
    return next((path for name in names if (path := shutil.which(name))), None)


@contextlib.contextmanager
def browser() -> Iterator[Any]:
    chromium, driver_path = _find(CHROMIUM), _find((DRIVER,))
    if chromium is None or driver_path is None:
        message = "chromium and chromium-driver are not installed (bash .ci/install installs them)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={WINDOW[0]},{WINDOW[1]}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@contextlib.contextmanager
def served(args: list[str], work_dir: Path) -> Iterator[str]:
    """`kraftlab ARGS --port 0` in the background; yields the page's URL."""
    out = work_dir / "served.out"
    with out.open("w") as handle:
        proc = subprocess.Popen([sys.executable, "-m", "harness", *args, "--port", "0"],
                                stdout=handle, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        def url() -> str | None:
            found = re.search(r"http://\S+/", out.read_text())
            if found is None and proc.poll() is not None:
                raise AssertionError(f"exited {proc.returncode}: {out.read_text()}")
            return found.group(0) if found else None

        yield poll(url, 120, f"the URL of {' '.join(args)}")
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


def wait_for(driver: Any, condition: Callable[[Any], Any], timeout_s: float, what: str) -> Any:
    """WebDriverWait with a message saying what did not happen (and the page's status)."""
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout_s, poll_frequency=0.1,
                             ignored_exceptions=(StaleElementReferenceException,)
                             ).until(condition)
    except TimeoutException:
        shown = driver.execute_script(
            "return [document.querySelector('#status')?.textContent,"
            " document.querySelector('main')?.innerText.slice(0, 3000)]")
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what} "
                             f"(page status: {shown[0]}; page text: {shown[1]})") from None
