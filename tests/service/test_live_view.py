"""The live view (``/ui``) in a real headless Chromium against a real ``gantt serve`` with a bearer token: the page
shows what the service holds, follows it as it changes, asks for a token when it has none, and renders.

Missing Chromium or Playwright: skipped with the reason, except under ``CI=true`` where it fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from gantt.client import SchedulerClient
from gantt.model import NoValidHost
from tests.conftest import host_stats, request
from tests.service.browser import chromium, colours, missing
from tests.service.conftest import CONFIG, TOKEN
from tests.service.server import ServerProcess

WAIT_MS = 15_000


def _require_browser() -> None:
    why = missing()
    if why is None:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(why + " - CI must run the browser tests", pytrace=False)
    pytest.skip(why)


@pytest.fixture
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, SchedulerClient]]:
    """A service of its own (the page counts everything it holds): two zones, one node disabled, one fenced."""
    _require_browser()
    workdir = tmp_path_factory.mktemp("live-view")
    with ServerProcess(f"sqlite:///{workdir}/gantt.sqlite", config=CONFIG, token=TOKEN, workdir=workdir) as server, \
            server.client() as client:
        for name in ("a1", "a2", "b1", "b2"):
            client.update_resource_stats(name, host_stats())
        client.update_resource_stats("b3", host_stats(service={"forced_down": True}))
        client.update_host("b2", {"service": {"disabled": True, "disabled_reason": "fan"}})
        client.update_aggregate({"id": "az1", "name": "az1", "hosts": ["a1", "a2"],
                                 "metadata": {"availability_zone": "az1"}})
        client.update_aggregate({"id": "az2", "name": "az2", "hosts": ["b1", "b2", "b3"],
                                 "metadata": {"availability_zone": "az2"}})
        yield server, client


def _texts(page: Any, selector: str) -> list[str]:
    return [" ".join(text.split()) for text in page.locator(selector).all_inner_texts()]


def test_the_page_shows_the_cloud_follows_it_and_renders(cloud: tuple[ServerProcess, SchedulerClient]) -> None:
    server, client = cloud
    placed = [client.select_destinations(request(vcpus=vcpus, request_id=f"req-ui-{n}", availability_zone="az1"))
              for n, vcpus in enumerate((2, 4, 8), start=1)]
    with pytest.raises(NoValidHost):
        client.select_destinations(request(vcpus=1000, request_id="req-ui-huge"))

    with chromium() as browser:
        page = browser.new_page()
        problems: list[str] = []
        page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
        page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
        page.goto(f"{server.url}/ui#token={TOKEN}")
        page.wait_for_selector("body[data-loaded=true]", state="attached", timeout=WAIT_MS)
        assert "token" not in page.url  # taken from the fragment, then dropped from the address bar

        tiles = {name: page.inner_text(f"#{name}") for name in (
            "hosts-total", "hosts-up", "hosts-disabled", "hosts-down", "allocations-total", "placements-total",
            "refusals-total")}
        assert tiles == {"hosts-total": "5", "hosts-up": "3", "hosts-disabled": "1", "hosts-down": "1",
                         "allocations-total": "3", "placements-total": "3", "refusals-total": "1"}
        assert _texts(page, "#zones tbody tr") == ["az1 2 0 0", "az2 1 1 1"]
        assert _texts(page, "#classes tbody tr")[0] == "VCPU 14 80 17.5%"  # 2+4+8 of 5 x 16

        decisions = _texts(page, "#decisions tbody tr")
        assert [row.split()[1] for row in decisions] == ["req-ui-3", "req-ui-2", "req-ui-1"]
        for row, answer in zip(decisions, reversed(placed), strict=True):
            chosen = answer[0][0]
            assert f" 1 {chosen.host} " in row and f"{chosen.host} {chosen.weight:.3f}" in row
        refusals = _texts(page, "#refusals tbody tr")
        assert len(refusals) == 1 and "req-ui-huge ResourceFilter" in refusals[0]
        assert "VCPU 1000 can never fit" in refusals[0]
        assert {row.split()[1] for row in _texts(page, "#allocations tbody tr")} == \
            {answer[0][0].consumer_uuid for answer in placed}

        for rc in ("VCPU", "MEMORY_MB", "DISK_GB"):
            assert page.locator(f'.heat[data-class="{rc}"] .cell').count() == 5
        assert page.locator(".cell.cell-down").count() == 3 and page.locator(".cell.cell-disabled").count() == 3
        busiest = placed[2][0][0].host  # 8 of 16 vCPUs, the others less
        cell = page.locator(f'.heat[data-class="VCPU"] .cell[data-node="{busiest}"]')
        assert float(cell.get_attribute("data-usage") or "nan") >= 0.5

        # Live: a decision made now shows up at the next poll, without a reload.
        client.select_destinations(request(request_id="req-ui-live", availability_zone="az2"))
        # (Waited for through selectors: the page's CSP forbids the eval a JavaScript predicate would need.)
        page.locator("#decisions tbody tr").first.filter(has_text="req-ui-live").wait_for(timeout=WAIT_MS)
        assert page.inner_text("#allocations-total") == "4"

        png = page.screenshot(full_page=True)
        distinct, spread = colours(png)
        assert distinct > 200 and spread > 20, (distinct, spread)  # text, bars and heat cells, not a blank page
        # Heat: at least half full is amber to red, nearly empty is green (an unstyled cell would be grey).
        red, green, blue = _pixel(cell.screenshot())
        assert red > 150 and blue < 100, (red, green, blue)
        red, green, blue = _pixel(page.locator('.heat[data-class="VCPU"] .cell[data-node="b1"]').screenshot())
        assert green > red + 60 and green > blue + 60, (red, green, blue)  # 1 of 16 vCPUs (the live decision)

        # Without a token the page asks for one, and goes live once it is given.
        fresh = browser.new_page()
        fresh.goto(f"{server.url}/ui")
        fresh.wait_for_selector("#token-form:not([hidden])", timeout=WAIT_MS)
        assert fresh.inner_text("#status") == "a token is needed"
        fresh.fill("#token-input", TOKEN)
        fresh.click("#token-form button[type=submit]")
        fresh.wait_for_selector("body[data-loaded=true]", state="attached", timeout=WAIT_MS)
        assert fresh.inner_text("#hosts-total") == "5" and fresh.is_hidden("#token-form")
    # The refused fetch before the token was given is the browser's own console line; nothing else may be.
    assert [p for p in problems if "401" not in p] == []


def _pixel(png: bytes) -> tuple[int, int, int]:
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    r, g, b = image.getpixel((image.width // 2, image.height // 2))
    return int(r), int(g), int(b)
