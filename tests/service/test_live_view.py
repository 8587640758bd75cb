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
        # Heat, on a colour-blind-safe scale (viridis): lightness rises with use, from dark violet to yellow, so
        # it reads in greyscale too. Half full is teal to yellow, nearly empty dark violet (unstyled: grey).
        red, green, blue = _pixel(cell.screenshot())
        assert green > 130 and red < green, (red, green, blue)
        low = _pixel(page.locator('.heat[data-class="VCPU"] .cell[data-node="b1"]').screenshot())  # 1 of 16 vCPUs
        assert low[0] < 110 and low[1] < 80 and low[2] > 70, low
        assert _lightness(red, green, blue) > _lightness(*low) + 60

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


def _lightness(red: int, green: int, blue: int) -> float:
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def _refreshes(page: Any) -> int:
    return int(page.get_attribute("body", "data-refreshes") or "0")


def _after_refreshes(page: Any, count: int) -> None:
    """Wait until the page has polled ``count`` more times (through selectors: the CSP forbids a predicate's eval)."""
    page.wait_for_selector(f'body[data-refreshes="{_refreshes(page) + count}"]', state="attached", timeout=WAIT_MS)


def _open(browser: Any, url: str) -> Any:
    page = browser.new_page()
    page.goto(f"{url}/ui#token={TOKEN}")
    page.wait_for_selector("body[data-loaded=true]", state="attached", timeout=WAIT_MS)
    return page


def test_what_a_person_does_survives_a_refresh(cloud: tuple[ServerProcess, SchedulerClient]) -> None:
    """A hovered cell (its tooltip) and a selected node stay the same elements across refreshes; a pause stops
    them; a list under the pointer is held still."""
    server, client = cloud
    client.select_destinations(request(vcpus=2, request_id="req-keep-1", availability_zone="az1"))
    with chromium() as browser:
        page = _open(browser, server.url)
        cell = page.locator('.heat[data-class="VCPU"] .cell[data-node="a1"]')
        cell.hover()
        hovered = cell.element_handle()
        tip = hovered.get_attribute("title")
        client.select_destinations(request(vcpus=1, request_id="req-keep-2", availability_zone="az1"))
        _after_refreshes(page, 2)
        # the very element still hovered, with its tooltip's text (a replaced element would be disconnected)
        assert hovered.evaluate("e => e.isConnected && e.matches(':hover')")
        assert hovered.get_attribute("title") is not None and "a1" in (tip or "")

        cell.click()
        page.wait_for_selector("#node-panel:not([hidden])", timeout=WAIT_MS)
        page.locator("#node-body dl").wait_for(timeout=WAIT_MS)
        assert page.inner_text("#node-title") == "a1"
        assert "az1" in page.inner_text("#node-body") and "GiB" in page.inner_text("#node-body")
        _after_refreshes(page, 2)
        assert "selected" in (cell.get_attribute("class") or "") and page.is_visible("#node-panel")
        assert hovered.evaluate("e => e.isConnected")
        page.keyboard.press("Escape")
        assert page.is_hidden("#node-panel") and "selected" not in (cell.get_attribute("class") or "")

        page.click("#pause")
        assert page.inner_text("#status").startswith("paused") and page.inner_text("#pause") == "resume"
        paused_at = _refreshes(page)
        client.select_destinations(request(vcpus=1, request_id="req-while-paused", availability_zone="az1"))
        page.wait_for_timeout(4500)
        assert _refreshes(page) == paused_at and "req-while-paused" not in page.inner_text("#decisions")
        page.click("#pause")
        page.locator("#decisions tbody tr").first.filter(has_text="req-while-paused").wait_for(timeout=WAIT_MS)

        page.hover("#decisions tbody tr >> nth=0")
        held = page.inner_text("#decisions tbody")
        client.select_destinations(request(vcpus=1, request_id="req-while-held", availability_zone="az1"))
        _after_refreshes(page, 2)
        assert page.inner_text("#decisions tbody") == held  # the list under the pointer stays readable
        page.mouse.move(0, 0)
        page.locator("#decisions tbody tr").first.filter(has_text="req-while-held").wait_for(timeout=WAIT_MS)


def test_search_units_trends_capacity_and_a_node_page(cloud: tuple[ServerProcess, SchedulerClient]) -> None:
    server, client = cloud
    for n in range(3):
        client.select_destinations(request(vcpus=1, request_id=f"req-find-{n}", availability_zone="az1",
                                           project_id=f"proj-{n}"))
    with chromium() as browser:
        page = _open(browser, server.url)
        memory = [row for row in _texts(page, "#classes tbody tr") if row.startswith("MEMORY_MB")]
        assert memory and "GiB" in memory[0], memory
        page.fill("#search", "req-find-1")
        visible = [row for row in page.locator("#decisions tbody tr").all() if row.is_visible()]
        assert len(visible) == 1 and "req-find-1" in visible[0].inner_text()
        page.fill("#search", "proj-2")
        shown = [row.inner_text() for row in page.locator("#allocations tbody tr").all() if row.is_visible()]
        assert len(shown) == 1 and "proj-2" in shown[0]
        page.fill("#search", "az2")
        assert page.locator('.cell.hit[data-zone="az2"]').count() == 9  # 3 nodes x 3 classes
        assert page.locator('.cell.dim[data-zone="az1"]').count() == 6
        page.keyboard.press("Escape")
        assert page.locator(".cell.dim").count() == 0

        bars = page.locator('#trends [data-trend="placed"] rect')
        assert bars.count() >= 1 and page.inner_text('#trends [data-trend="placed"] .trend-now') == "3"
        assert page.locator('#trends [data-trend="VCPU"] polyline').count() == 1

        page.fill("#capacity-form input[name=vcpus]", "4")
        page.fill("#capacity-form input[name=memory_mb]", "1024")
        page.fill("#capacity-form input[name=root_gb]", "10")
        page.fill("#capacity-form input[name=az]", "az1")
        page.click("#capacity-form button[type=submit]")
        page.locator(".capacity-count").wait_for(timeout=WAIT_MS)
        counted = client.capacity({"requests": [{"flavor": {"vcpus": 4, "memory_mb": 1024, "root_gb": 10},
                                                 "availability_zone": "az1"}]}).requests[0]
        assert page.inner_text(".capacity-count") == f"{counted.instances} more fit on {counted.nodes} nodes"

        page.click('#decisions tbody tr:has-text("req-find-0") .claimed button')
        page.locator("#node-body dl").wait_for(timeout=WAIT_MS)
        assert "req-find-0" in page.inner_text("#node-body")  # its recent decisions


def test_the_page_works_behind_a_path_prefix(cloud: tuple[ServerProcess, SchedulerClient]) -> None:
    """A proxy serving Gantt under /infra/gantt/: the page, its files and its API calls all go through it."""
    server, _ = cloud
    with _PrefixProxy(server.url, "/infra/gantt") as proxy, chromium() as browser:
        page = browser.new_page()
        page.goto(f"{proxy.url}/infra/gantt/ui#token={TOKEN}")
        page.wait_for_selector("body[data-loaded=true]", state="attached", timeout=WAIT_MS)
        assert page.inner_text("#hosts-total") == "5"
        assert page.url.endswith("/infra/gantt/ui/")
        assert proxy.paths and all(path.startswith("/infra/gantt/") for path in proxy.paths), proxy.paths
        assert {"/infra/gantt/ui/app.js", "/infra/gantt/v1/overview"} <= set(proxy.paths)


class _PrefixProxy:
    """A reverse proxy on loopback that serves ``target`` under ``prefix`` (and nothing else: a path outside the
    prefix is a 404, as an address the page must not use)."""

    def __init__(self, target: str, prefix: str) -> None:
        import http.server
        import threading

        import httpx

        self.paths: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _forward(self) -> None:
                outer.paths.append(self.path.split("?")[0])
                if not self.path.startswith(prefix + "/"):
                    self.send_error(404)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                answer = httpx.request(self.command, target + self.path[len(prefix):], headers=headers, content=body,
                                       follow_redirects=False, timeout=10)
                self.send_response(answer.status_code)
                for name, value in answer.headers.items():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = _forward

            def log_message(self, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> _PrefixProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


def _pixel(png: bytes) -> tuple[int, int, int]:
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    r, g, b = image.getpixel((image.width // 2, image.height // 2))
    return int(r), int(g), int(b)


def test_the_volume_namespace_has_its_pools_on_the_page(tmp_path_factory: pytest.TempPathFactory) -> None:
    _require_browser()
    import httpx

    from tests.service.test_volume_namespace import BACKEND, BASE
    from tests.service.test_volume_namespace import CONFIG as VOLUME_CONFIG

    workdir = tmp_path_factory.mktemp("live-view-volume")
    with ServerProcess(f"sqlite:///{workdir}/gantt.sqlite", config=VOLUME_CONFIG, workdir=workdir) as server:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            assert http.post(f"{BASE}/resource-stats", json=BACKEND).status_code == 200
            assert http.post(f"{BASE}/select_destinations", json={
                "volume_id": "8b1a9953-c461-4296-a3ea-9bd21b27e9a1",
                "volume_properties": {"size": 10, "project_id": "p1"}}).status_code == 200
        with chromium() as browser:
            page = browser.new_page()
            page.goto(f"{server.url}/ui")
            page.wait_for_selector("#volumes:not([hidden]) #volume-pools tbody tr", timeout=WAIT_MS)
            rows = _texts(page, "#volume-pools tbody tr")
            assert rows and rows[0].startswith("node1@lvm#thin 100 GiB"), rows
            assert "namespace vol" in page.inner_text("#volume-pools")
