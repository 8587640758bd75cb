"""``GET /v1/overview``: what the façade gathers (nodes by zone and state, the heat map and its cap, the rings of
decisions and refusals), on a replica of a real SQLite store; and how the service serves it and the /ui page."""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gantt.config import Config
from gantt.model import HostStats, NoValidHost, ServiceInfo, activity
from gantt.replication.replica import Replica
from gantt.store.sqlite import SQLiteStore
from tests.conftest import FakeClock, host_stats, request
from tests.service.conftest import TOKEN
from tests.service.server import ServerProcess


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def replica(tmp_path: Path, clock: FakeClock) -> Iterator[Replica]:
    config = Config.from_dict({"DEFAULT": {"service_down_time": 60},
                               "filter_scheduler": {"enabled_filters": ["ComputeFilter", "AvailabilityZoneFilter"]}})
    store = SQLiteStore(f"sqlite:///{tmp_path}/gantt.sqlite")
    built = Replica(store, config, clock=clock).start(follow=False)
    yield built
    built.stop()
    store.close()


def _zone(replica: Replica, zone: str, hosts: list[str]) -> None:
    replica.update_aggregate({"id": zone, "name": zone, "hosts": hosts, "metadata": {"availability_zone": zone}})


def test_nodes_are_counted_per_zone_as_up_disabled_or_down(replica: Replica, clock: FakeClock) -> None:
    replica.update_resource_stats("quiet", host_stats())  # stops reporting: down once service_down_time passes
    clock.advance(120)
    for name in ("a1", "a2", "b1", "b2", "b3", "loose"):
        replica.update_resource_stats(name, host_stats())
    replica.update_host("a2", None, HostStats(service=ServiceInfo(disabled=True, disabled_reason="disk swap")))
    replica.update_resource_stats("b3", host_stats(service={"forced_down": True}))
    _zone(replica, "az1", ["a1", "a2", "quiet"])
    _zone(replica, "az2", ["b1", "b2", "b3"])
    glance = replica.overview()
    zones = {z.zone: (z.up, z.disabled, z.down) for z in glance.zones}
    # "loose" is in no zoned aggregate: it counts in the default zone, as its Selection would name it.
    assert zones == {"az1": (1, 1, 1), "az2": (2, 0, 1), "nova": (1, 0, 0)}
    assert glance.hosts == 7 and glance.utilization_omitted == 0
    states = {h.host: h.state for h in glance.utilization}
    assert states == {"a1": "up", "a2": "disabled", "quiet": "down", "b1": "up", "b2": "up", "b3": "down",
                      "loose": "up"}
    assert [h.host for h in glance.utilization] == ["a1", "a2", "quiet", "b1", "b2", "b3", "loose"]


def test_the_heat_map_shows_each_class_as_a_fraction_and_only_the_most_used_nodes_past_the_cap(
        replica: Replica) -> None:
    for i in range(12):
        replica.update_resource_stats(f"h{i:02d}", host_stats(vcpus=10, vcpus_used=i, memory_mb=1000,
                                                              memory_mb_used=0))
    replica.update_resource_stats("gpu", host_stats(vcpus=10, vcpus_used=0, memory_mb=1000, memory_mb_used=1000,
                                                    inventories={"CUSTOM_GPU": {"total": 4, "used": 1}}))
    full = replica.overview()
    assert full.resource_classes == ["VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_GPU"]
    by_host = {h.host: h.usage for h in full.utilization}
    assert by_host["h03"] == [0.3, 0.0, 0.0, None]  # no GPU on h03: null, not 0
    assert by_host["gpu"] == [0.0, 1.0, 0.0, 0.25]
    gpu = next(c for c in full.classes if c.resource_class == "CUSTOM_GPU")
    assert (gpu.used, gpu.capacity, gpu.hosts) == (1.0, 4.0, 1)
    vcpu = next(c for c in full.classes if c.resource_class == "VCPU")
    assert vcpu.used == sum(range(12)) and vcpu.capacity == 130 and vcpu.hosts == 13

    capped = replica.overview(max_hosts=4)
    # The fullest class of each node decides: gpu (memory 100%), then h11, h10, h09 (VCPU 110%… 90%).
    assert sorted(h.host for h in capped.utilization) == ["gpu", "h09", "h10", "h11"]
    assert capped.utilization_omitted == 9 and capped.hosts == 13


def test_decisions_and_refusals_are_kept_newest_first_and_bounded(replica: Replica, clock: FakeClock) -> None:
    for name in ("a1", "a2", "a3", "a4"):
        replica.update_resource_stats(name, host_stats(vcpus=64))
    _zone(replica, "az1", ["a1", "a2", "a3", "a4"])
    for n in range(activity.DECISIONS + 5):
        replica.select_destinations(request(request_id=f"req-{n}"))
        clock.advance(0.5)  # the newest allocations are told apart by when they were made
    two = replica.select_destinations(request(request_id="req-two", num_instances=2))
    with pytest.raises(NoValidHost):
        replica.select_destinations(request(vcpus=1000, request_id="req-huge"))
    with pytest.raises(NoValidHost):
        replica.select_destinations(request(availability_zone="az9", request_id="req-nowhere"))
    glance = replica.overview()

    assert len(glance.decisions) == activity.DECISIONS
    assert [d.request_id for d in glance.decisions[:3]] == ["req-two", f"req-{activity.DECISIONS + 4}",
                                                              f"req-{activity.DECISIONS + 3}"]
    newest = glance.decisions[0]
    assert newest.instances == 2
    assert [(p.consumer_uuid, p.host) for p in newest.placements] == [(s[0].consumer_uuid, s[0].host) for s in two]
    for placement, selections in zip(newest.placements, two, strict=True):
        # The claimed node and the answer's alternates (max_attempts 3), best weight first.
        assert {(c.host, c.weight) for c in placement.candidates} == {(s.host, s.weight) for s in selections}
        assert len(placement.candidates) == 3
        weights = [c.weight for c in placement.candidates]
        assert weights == sorted(weights, reverse=True)

    assert [r.request_id for r in glance.refusals] == ["req-nowhere", "req-huge"]
    nowhere, huge = glance.refusals
    assert nowhere.reason == "AvailabilityZoneFilter" and "AvailabilityZoneFilter removed 4" in nowhere.message
    assert huge.explanation is not None and huge.explanation.nearest_miss[0].resource_class == "VCPU"
    assert glance.counters["no_valid_host"] == 2 and glance.counters["placements"] == activity.DECISIONS + 7
    assert glance.allocations == activity.DECISIONS + 7
    assert len(glance.recent_allocations) == 10
    assert {a.consumer_uuid for a in glance.recent_allocations[:2]} == {s[0].consumer_uuid for s in two}


def test_overview_needs_the_token_and_the_page_does_not(secured: ServerProcess) -> None:
    with httpx.Client(base_url=secured.url, timeout=10) as http:
        refused = http.get("/v1/overview")
        assert refused.status_code == 401 and refused.headers["content-type"] == "application/problem+json"
        auth = {"Authorization": f"Bearer {TOKEN}"}
        answered = http.get("/v1/overview", headers=auth)
        assert answered.status_code == 200 and "zones" in answered.json()
        for path, media in (("/ui/", "text/html"), ("/ui/app.js", "text/javascript"), ("/ui/style.css", "text/css")):
            page = http.get(path)
            assert page.status_code == 200 and page.headers["content-type"].startswith(media), path
            assert "default-src 'self'" in page.headers["content-security-policy"]
        # The page names its files and the API relative to itself (it may be served under a proxy's prefix):
        # /ui is sent on to ui/, relatively.
        bare = http.get("/ui")
        assert bare.status_code == 308 and bare.headers["location"] == "ui/"
        assert 'src="app.js"' in http.get("/ui/").text
        # A decision whose spec names no request_id is shown under the x-openstack-request-id it was answered with.
        refused = http.post("/v1/select_destinations", json=request(vcpus=10**6), headers=auth)
        assert refused.status_code == 409
        latest = http.get("/v1/overview", headers=auth).json()["refusals"][0]
        assert latest["request_id"] == refused.headers["x-openstack-request-id"] and latest["instances"] == 1
        missing = http.get("/ui/nothing.js")
        assert missing.status_code == 404 and missing.json()["detail"] == "no such path /ui/nothing.js"
        wrong = http.post("/ui")
        assert wrong.status_code == 405 and wrong.headers["allow"] == "GET, HEAD"
    with secured.client() as client:
        assert client.overview().pid > 0


def test_every_file_of_the_page_ships_in_the_package() -> None:
    """An installed Gantt (not this checkout) serves the page only if pyproject's package-data names its files."""
    root = Path(__file__).resolve().parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["gantt"]
    package = root / "src" / "gantt"
    files = [path.relative_to(package).as_posix() for path in (package / "service" / "ui").iterdir()]
    assert {"service/ui/index.html", "service/ui/app.js", "service/ui/style.css"} <= set(files)
    assert [f for f in files if not any(fnmatch.fnmatch(f, p) for p in patterns)] == []
