"""Issue 30, item 3: a clock step or skew must neither drop host reports nor keep a dead host up.

Real ``gantt serve`` processes on real SQLite files; each server's wall clock is moved by the test-only offset
file (``gantt.base.clocks.TEST_OFFSET_FILE``), as NTP stepping a server or two servers' clocks differing would move it.
The monotonic clock, as on a real machine, does not move.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gantt.base.clocks import TEST_OFFSET_FILE
from gantt.store.urls import open_store
from tests.conftest import host_stats, request
from tests.etcd.cluster import LocalCluster, require_etcd
from tests.service.server import ServerProcess

HOUR = 3600.0
DOWN = 5.0  # service_down_time: a silent node must be down this long after its last report
CONFIG = {"DEFAULT": {"service_down_time": DOWN}}


def _node(vcpus_used: int, **fields: Any) -> dict[str, Any]:
    return host_stats(uuid="uuid-h1", vcpus=8, vcpus_used=vcpus_used, cpu_allocation_ratio=1.0, **fields)


def _set_offset(path: Path, seconds: float) -> None:
    path.write_text(str(seconds))
    time.sleep(0.1)  # the server reads the file again at most every 20 ms


def _server(tmp_path: Path, url: str, name: str, offset: float) -> tuple[ServerProcess, Path]:
    workdir = tmp_path / name
    workdir.mkdir()
    clock = workdir / "clock-offset"
    clock.write_text(str(offset))
    return ServerProcess(url, config=CONFIG, workdir=workdir, env={TEST_OFFSET_FILE: str(clock)}), clock


def _report(http: httpx.Client, stats: dict[str, Any]) -> None:
    response = http.post("/v1/resource-stats", json={"name": "h1", "stats": stats})
    assert response.status_code == 200, response.text


def _used(url: str) -> int | None:
    store = open_store(url, create=False)
    try:
        [held] = store.snapshot().hosts
        return held.stats.vcpus_used
    finally:
        store.close()


def _shown(http: httpx.Client) -> dict[str, Any]:
    response = http.get("/v1/hosts/h1")
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def _shows_used(http: httpx.Client, vcpus_used: int, timeout: float = 10.0) -> bool:
    """The server's replica shows ``vcpus_used`` (its feed may take a moment for another server's write)."""
    deadline = time.monotonic() + timeout
    while True:
        if _shown(http)["inventories"]["VCPU"]["reported_used"] == vcpus_used:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def _goes_down_on_time(http: httpx.Client, last_report: float, *, early: bool = True) -> None:
    """Silent since ``last_report`` (monotonic): down by service_down_time after it and, ``early`` checked, not
    long before."""
    deadline = last_report + DOWN + 2.0
    while _shown(http)["up"]:
        assert time.monotonic() < deadline, f"still up {time.monotonic() - last_report:.1f} s after its last report"
        time.sleep(0.1)
    if early:  # a repeat within a sixth of service_down_time of the time held writes nothing: that much early
        assert time.monotonic() - last_report > DOWN - DOWN / 6 - 0.5


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/gantt.sqlite"


@pytest.fixture
def stepped(tmp_path: Path, url: str) -> Iterator[tuple[ServerProcess, Path]]:
    server, clock = _server(tmp_path, url, "stepped", HOUR)  # an hour fast until the test corrects it
    with server:
        yield server, clock


def test_a_report_after_the_clock_stepped_back_an_hour_is_applied(stepped: tuple[ServerProcess, Path],
                                                                     url: str) -> None:
    server, clock = stepped
    with httpx.Client(base_url=server.url, timeout=10.0) as http:
        _report(http, _node(0))
        _set_offset(clock, 0.0)  # NTP corrects the server: its wall clock steps back an hour
        _report(http, _node(8))  # answered 200: it must be the node's figures now
        assert _used(url) == 8
        assert _shows_used(http, 8, timeout=0.0)
        response = http.post("/v1/select_destinations", json=request(vcpus=4, memory_mb=512, root_gb=1,
                                                                      instance_uuids=[str(uuid.uuid4())]))
        assert response.status_code == 409 and response.json()["title"] == "No valid host", response.text
        assert http.get("/v1/allocations").json()["allocations"] == []


def test_a_node_goes_down_on_time_after_the_clock_stepped_back(stepped: tuple[ServerProcess, Path]) -> None:
    server, clock = stepped
    with httpx.Client(base_url=server.url, timeout=10.0) as http:
        _report(http, _node(0))
        _set_offset(clock, 0.0)
        for _ in range(3):  # repeats: touches, or nothing when within a sixth of service_down_time
            time.sleep(0.5)
            _report(http, _node(0))
        last = time.monotonic()
        assert _shown(http)["up"]
        _goes_down_on_time(http, last)


def test_a_step_forward_neither_puts_a_live_node_down_nor_keeps_it_up(stepped: tuple[ServerProcess, Path]) -> None:
    server, clock = stepped
    _set_offset(clock, 0.0)
    with httpx.Client(base_url=server.url, timeout=10.0) as http:
        _report(http, _node(0))
        _set_offset(clock, HOUR)  # a step forward: the node reported a moment ago, the feed was read just now
        assert http.get("/health").status_code == 200  # no lag: the feed was read a moment ago
        assert _shown(http)["up"]
        _report(http, _node(0))
        last = time.monotonic()
        _set_offset(clock, 0.0)  # and back
        _goes_down_on_time(http, last)


def test_a_restart_with_the_clock_corrected_applies_reports_and_puts_a_silent_node_down(
        stepped: tuple[ServerProcess, Path], url: str) -> None:
    server, clock = stepped
    with httpx.Client(base_url=server.url, timeout=10.0) as http:
        _report(http, _node(0))  # stamped an hour ahead
    assert server.stop() == 0
    _set_offset(clock, 0.0)
    server.start()
    started = time.monotonic()
    with httpx.Client(base_url=server.url, timeout=10.0) as http:
        # its stamp, an hour ahead, is taken as the snapshot's load: down service_down_time after it at the latest
        _goes_down_on_time(http, started, early=False)
        _report(http, _node(8))
        assert _used(url) == 8 and _shows_used(http, 8, timeout=0.0)
        assert _shown(http)["up"]


@pytest.fixture(params=["sqlite", "etcd"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """One store two servers share: a SQLite file, or a one-member etcd cluster."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/shared.sqlite"
        return
    require_etcd()
    with LocalCluster(tmp_path / "etcd", size=1) as cluster:
        yield cluster.url("/clocks")


def test_every_report_through_a_server_30_s_behind_is_applied(tmp_path: Path, shared_store: str) -> None:
    """Two servers on one store, one of them 30 s behind: each report is the node's figures once answered,
    whichever server took it, and the node stays up on both while it reports through either."""
    url = shared_store
    fast, _ = _server(tmp_path, url, "fast", 0.0)
    slow, _ = _server(tmp_path, url, "slow", -30.0)
    with fast, slow, httpx.Client(base_url=fast.url, timeout=10.0) as to_fast, \
            httpx.Client(base_url=slow.url, timeout=10.0) as to_slow:
        _report(to_fast, _node(1))
        for used, (http, other) in enumerate([(to_slow, to_fast), (to_fast, to_slow)] * 3, start=2):
            _report(http, _node(used))
            assert _used(url) == used
            assert _shows_used(http, used, timeout=0.0) and _shows_used(other, used)
        # repeats through the slow server alone: the node stays up on both, past service_down_time
        started = time.monotonic()
        while time.monotonic() - started < DOWN + 2.0:
            _report(to_slow, _node(7))
            time.sleep(0.5)
            assert _shown(to_fast)["up"] and _shown(to_slow)["up"]
        assert _used(url) == 7
