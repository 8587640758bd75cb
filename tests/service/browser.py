"""A real headless Chromium for the live view's tests and its screenshot: Debian's ``chromium`` package driven by
Playwright from PyPI. Playwright's own browser download is never used (``playwright install`` needs the network):
it launches the system binary, with everything that would reach out switched off, on a throwaway profile.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext

# Debian's package installs it here; GANTT_CHROMIUM names another build.
CHROMIUM = os.environ.get("GANTT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars"]


def missing() -> str | None:
    """Why no browser test can run here (None: they can)."""
    if not os.path.exists(CHROMIUM):
        return f"no Chromium at {CHROMIUM}: install Debian's chromium package (scripts/setup does it as root)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is missing: pip install -e '.[test]'"
    return None


@contextlib.contextmanager
def chromium(width: int = 1360, height: int = 900) -> Iterator[BrowserContext]:
    """A browser context on a fresh profile, closed (and the profile removed) on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver, tempfile.TemporaryDirectory(prefix="gantt-chromium-") as profile:
        context = driver.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=ARGS,
            viewport={"width": width, "height": height}, device_scale_factor=1, locale="en-GB",
            timezone_id="UTC", service_workers="block")
        try:
            yield context
        finally:
            context.close()


def colours(png: bytes) -> tuple[int, float]:
    """How many distinct colours a PNG has, and the standard deviation of its grey levels (0: one flat colour)."""
    from PIL import Image, ImageStat

    image = Image.open(io.BytesIO(png)).convert("RGB")
    distinct = image.getcolors(maxcolors=1 << 24)
    grey = ImageStat.Stat(image.convert("L"))
    return (len(distinct) if distinct is not None else 1 << 24), float(grey.stddev[0])
