"""VMs with volumes (issue 15): the real VolumeScheduler places them, pools fill and are lost, the report counts it.

The invariants are checked on the backends' own books, not on the scheduler's cache: a scheduler that lets a
claim past a pool's capacity, or forgets the claims it made, is caught.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

import pytest

from gantt.sim import ScenarioError, Simulation, parse_scenario
from gantt.sim.cli import main
from gantt.sim.report import timeline_figures
from gantt.sim.sweep import invariants_hold
from gantt.sim.volumes import VolumeSide
from gantt.volume.table import PoolTable

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vms-and-volumes.toml"
ALL_FILTERS = 'scheduler_default_filters = ["AvailabilityZoneFilter", "CapacityFilter", "CapabilitiesFilter"]'


def data(text: str | None = None) -> dict[str, Any]:
    return tomllib.loads(text if text is not None else EXAMPLE.read_text())


def run(d: dict[str, Any], requests: int | None = None) -> tuple[Simulation, dict[str, Any]]:
    sim = Simulation(parse_scenario(d), max_requests=requests)
    return sim, sim.run()


@pytest.fixture(scope="module")
def example() -> tuple[Simulation, dict[str, Any]]:
    return run(data())


def test_vms_and_volumes_figures_and_invariants(example: tuple[Simulation, dict[str, Any]]) -> None:
    sim, r = example
    side = sim.volumes
    assert isinstance(side, VolumeSide)
    v = r["volumes"]
    inv = r["invariants"]
    assert invariants_hold(r)
    assert inv["volume_pools_over_capacity"] == 0 and inv["volume_claims_on_lost_pools_after_detection"] == 0
    # VMs: a volume that finds no pool fails its VM's build, counted with the VMs' other failures
    inst = r["instances"]
    assert inst["placed"] + inst["failed"] == inst["requested"] == 1500
    reasons = r["failed_instances"]["by_reason"]
    assert reasons["VolumeNoValidPool"] > 0 and reasons["VolumeCreateFailed"] > 0
    assert sum(reasons.values()) == inst["failed"]
    # volumes: every request is placed, failed, or deleted with a build that failed on a later volume
    n = v["volumes"]
    assert n["placed"] > 1000
    assert n["requested"] == n["placed"] + n["failed"] + n["deleted_after_failed_build"]
    failed = v["failed_volumes"]
    assert sum(failed["by_reason"].values()) == n["failed"]
    assert failed["by_reason"]["NoValidPool"] == reasons["VolumeNoValidPool"]
    assert failed["by_reason"]["PoolLost"] == reasons["VolumeCreateFailed"] == v["placed_on_lost_pools"]
    assert sum(failed["no_valid_pool_by_filter"].values()) == failed["by_reason"]["NoValidPool"]
    assert failed["no_valid_pool_by_filter"]["CapacityFilter"] > 0  # pools did fill
    # az2's ssd pools are both lost by the end: its ssd volumes then have no pool of their kind. Counted by the
    # filter that removed the last pools (the zone filter removes the most, every time, and says nothing).
    assert failed["no_valid_pool_by_filter"]["CapabilitiesFilter"] > 0
    assert "AvailabilityZoneFilter" not in failed["no_valid_pool_by_filter"]
    # the pools: a thin pool went to its over-subscription ratio and no further; thick ones to their capacity
    pools = v["by_pool"]
    assert pools["stor2@ceph#rbd"]["peak_oversubscription"] == pytest.approx(4.0, abs=0.05)
    assert pools["stor2@ceph#rbd"]["provisioned_fill"] > 1 > pools["stor2@ceph#rbd"]["physical_fill"]
    for name, p in pools.items():
        assert p["peak_oversubscription"] <= p["max_over_subscription_ratio"] + 1e-9 or name == "stor1@lvm#lvm-a"
    assert pools["stor1@lvm#lvm-a"]["physical_fill"] > 0.9  # filled from outside: the scheduler stopped there
    # the events: what was lost, and the VMs attached to it
    events = {e["kind"]: e for e in v["events"]}
    assert set(events) == {"pool_filled", "pool_lost", "backend_lost"}
    lost = events["pool_lost"]["volumes_lost"] + events["backend_lost"]["volumes_lost"]
    assert lost == n["lost"] > 0
    assert 0 < v["vms_affected_by_lost_pools"] <= lost
    assert pools["stor3@netapp#aggr-ssd"]["lost"] and pools["stor4@lvm#lvm"]["lost"]
    assert pools["stor4@lvm#lvm"]["volumes"] == pools["stor3@netapp#aggr-ssd"]["volumes"] == 0
    # new volumes avoid the lost pools: the scheduler's cache no longer holds them
    assert side.table.row("stor4@lvm", "lvm") is None and side.table.row("stor3@netapp", "aggr-ssd") is None


def test_pool_timeline_and_its_plot(example: tuple[Simulation, dict[str, Any]]) -> None:
    _, r = example
    tl = r["volumes"]["timeline"]
    assert tl["t"] == r["timeline"]["t"]
    lost_at = {e["target"]: e["at"] for e in r["volumes"]["events"] if e["kind"] == "pool_lost"}
    series = tl["oversubscription"]["stor3@netapp#aggr-ssd"]
    assert all((x is None) == (t >= lost_at["stor3@netapp#aggr-ssd"]) for t, x in zip(tl["t"], series, strict=True))
    assert max(x for x in tl["oversubscription"]["stor2@ceph#rbd"] if x is not None) <= 4.0
    fig = timeline_figures([r])["volumes"]
    assert any("over-subscription" in ax.get_title() for ax in fig.axes)


def test_claims_and_releases_follow_the_books(example: tuple[Simulation, dict[str, Any]]) -> None:
    """A VM's deletion deletes its volumes; once the backends report, the cache and the books agree exactly."""
    sim, r = example
    side = sim.volumes
    assert side is not None
    assert r["volumes"]["volumes"]["deleted"] > 0
    for vm in side.vm_volumes:
        assert sim.truth.allocation(vm) is not None, f"{vm} was deleted but kept its volumes"
    side.report_all(sim.clock.now)
    for (host, pool), book in side.books.items():
        row = side.table.row(host, pool)
        if book.lost_at != math.inf:
            continue
        assert row is not None
        assert side.table.allocated[row] == book.allocated()
        assert side.table.provisioned[row] == pytest.approx(book.provisioned())
        assert side.table.volume_count[row] == len(book.volumes)


def test_a_claim_past_capacity_breaks_the_invariant(tmp_path: Path) -> None:
    """Without CapacityFilter the scheduler overfills pools: the invariant counts them and the run exits 1."""
    text = EXAMPLE.read_text()
    assert ALL_FILTERS in text
    broken = tmp_path / "no-capacity.toml"
    broken.write_text(text.replace(ALL_FILTERS, ALL_FILTERS.replace('"CapacityFilter", ', "")))
    _, r = run(data(broken.read_text()), requests=800)
    assert r["invariants"]["volume_pools_over_capacity"] > 0
    assert not invariants_hold(r)
    assert main([str(broken), "--requests", "800", "--quiet", "--json", str(tmp_path / "r.json")]) == 1
    assert main([str(EXAMPLE), "--requests", "300", "--quiet", "--json", str(tmp_path / "ok.json")]) == 0


def test_a_cache_that_forgets_its_claims_overfills(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check reads the backends' books: a scheduler cache that does not consume between reports lets
    several volumes into the room of one, and is caught."""
    consume = PoolTable.consume
    monkeypatch.setattr(PoolTable, "consume", lambda self, row, size: None if size > 0 else consume(self, row, size))
    _, r = run(data(), requests=800)
    assert r["invariants"]["volume_pools_over_capacity"] > 0


@pytest.mark.parametrize(("path", "value", "where", "says"), [
    (("volumes", "backends", 0, "az"), "az9", "volumes.backends[0].az", "unknown zone 'az9'"),
    (("volumes", "events", 1, "pool"), "nope", "volumes.events", "events[1].pool 'nope'"),
    (("volumes", "scheduler", "scheduler_default_filters"), ["NoSuchFilter"], "volumes.scheduler", "NoSuchFilter"),
    (("volumes", "backends", 1, "pools", 0, "max_over_subscription_ratio"), 0.5,
     "volumes.backends[1].pools[0].max_over_subscription_ratio", ">= 1"),
    (("volumes", "bogus"), 1, "volumes", "bogus"),
])
def test_bad_volume_sections_name_their_field(path: tuple[Any, ...], value: Any, where: str, says: str) -> None:
    d = data()
    node: Any = d
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(d)
    assert exc.value.field == where
    assert says in exc.value.message
