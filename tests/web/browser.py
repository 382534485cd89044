"""The system's headless Chromium driven by Selenium, for the page tests: Debian's `chromium` and
`chromium-driver` (apt), never a browser or driver downloaded at run time (SE_OFFLINE, the driver's
path given). A machine without them fails the test loudly, saying how to install them: no skip."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("AOTX_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("AOTX_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
INSTALL_HINT = ("the page test needs Debian's headless browser: run `apt-get install -y chromium chromium-driver` "
                "as root (`make test` does it when it may), or point AOTX_TEST_CHROMIUM / AOTX_TEST_CHROMEDRIVER "
                "at a Chromium and its chromedriver")
WINDOW = (1100, 760)


def artifact_dir(name: str) -> Path:
    """Where the test's screenshots go: $AOTX_TEST_ARTIFACTS/<name> or var/test-artifacts/<name>."""
    root = Path(os.environ.get("AOTX_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "var" / "test-artifacts"))
    out = root / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    return out


def chromium(binary: str = CHROMIUM, driver: str = CHROMEDRIVER):
    """A new headless Chromium session (its console log kept: goog:loggingPrefs)."""
    missing = [p for p in (binary, driver) if not os.access(p, os.X_OK)]
    if missing:
        pytest.fail(f"NO BROWSER: {', '.join(missing)} not found or not executable; {INSTALL_HINT}", pytrace=False)
    os.environ["SE_OFFLINE"] = "true"   # Selenium Manager must not fetch anything
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--disable-extensions", "--no-first-run", f"--window-size={WINDOW[0]},{WINDOW[1]}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def console_problems(driver) -> list[dict]:
    """The console entries of level SEVERE (errors, uncaught exceptions, failed loads, CSP refusals)
    and WARNING since the last call."""
    return [e for e in driver.get_log("browser") if e.get("level") in ("SEVERE", "WARNING")]
