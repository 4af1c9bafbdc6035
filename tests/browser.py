"""A real browser for the tests that need one: Debian's chromium, headless, driven by
Playwright's Python client (its own browser download cannot work offline). CI installs
chromium and sets KIWB_REQUIRE_BROWSER, so there a missing browser fails instead of skipping."""

from __future__ import annotations

import contextlib
import os
import shutil

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

needs_browser = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("KIWB_REQUIRE_BROWSER"),
    reason="no chromium here (apt-get install chromium; CI installs it)")


@contextlib.contextmanager
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()
