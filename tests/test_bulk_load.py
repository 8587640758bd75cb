"""``HostTable.load`` (a cold start's bulk path) builds the table ``update`` per report builds: every column, every
row-aligned list, the indexes, the interned values, the revisions and journal, and what decisions derive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from gantt.bench.cloud import build_aggregates, build_reports, build_requests, load_table, make_config
from gantt.compute.engine import Engine
from gantt.compute.state import reports as reports_module
from gantt.compute.state.table import HostTable
from gantt.config import Config
from gantt.model import Aggregate, Allocation, HostReport, NoValidHost
from gantt.replication.replica import Replica
from gantt.store.sqlite import SQLiteStore
from tests.conftest import FakeClock, host_stats, request
from tests.filters.test_numa import cell, numa_host

NOW = 1_000_000.0


def _report(host: str, node: str | None = None, reported_at: float | None = None, **fields: Any) -> HostReport:
    return msgspec.convert({"host": host, "node": node, "stats": fields.pop("stats"), "reported_at": reported_at,
                            **fields}, HostReport)


def varied_reports() -> list[HostReport]:
    """The benchmark's mix, and around it every kind of report the bulk path writes itself or hands to ``update``."""
    reports = build_reports(400, 3)
    pools = [{"vendor_id": "8086", "product_id": "1520", "numa_node": 0, "count": 2, "dev_type": "type-VF"}]
    reports += [
        # classic usage, ratio and reserved inventories named without totals; no service; disk least below free
        _report("odd-0", stats={"vcpus_used": 3, "cpu_allocation_ratio": 2.0, "disk_available_least": 5,
                                "local_gb": 100, "local_gb_used": 10}),
        _report("odd-1", stats=host_stats(service={"disabled": True, "disabled_reason": "maintenance"},
                                          hypervisor_hostname="odd-1.example", host_ip="not-an-ip",
                                          cpu_allocation_ratio=None, running_vms=4, current_workload=2,
                                          failed_builds=1, stats={"k": "v"}, traits=["CUSTOM_A", "CUSTOM_B"])),
        _report("odd-2", stats=host_stats(inventories={
            "VCPU": {"total": 64, "reserved": 4, "min_unit": 2, "max_unit": 8, "step_size": 2,
                     "allocation_ratio": 3.0},
            "CUSTOM_NEW_CLASS": {"total": 5, "used": 2}, "CUSTOM_B2": {"total": 1}, "CUSTOM_B3": {"total": 1},
            "CUSTOM_B4": {"total": 1}, "CUSTOM_B5": {"total": 1}, "CUSTOM_B6": {"total": 1}})),  # widens rc
        _report("odd-3", reported_at=NOW - 5, stats=host_stats(service={"disabled": False, "forced_down": True})),
        # handed to update: metrics, NUMA cells, PCI pools, an instance list, a child provider
        _report("cx-0", stats=host_stats(metrics=[{"name": "cpu.percent", "value": 0.4, "timestamp": "t",
                                                   "source": "s"}])),
        _report("cx-1", stats=numa_host(cell(0, range(0, 8)), cell(1, range(8, 16)))),
        _report("cx-2", stats=host_stats(pci_stats=pools)),
        _report("cx-3", stats=host_stats(instances=["i-1", "i-2"], num_instances=None)),
        _report("cx-4", provider={"uuid": "u-cx4", "name": "cx-4", "parent_provider_uuid": "u-cx3",
                                  "root_provider_uuid": "u-cx3"}, stats={"vcpus": 4}),
        _report("held-0", stats=host_stats()),  # an allocation counts on it before it reports
        _report("odd-4", stats=host_stats(hypervisor_type=None, hypervisor_version=None,
                                          supported_instances=None, traits=[])),
        _report("odd-5", stats={}),
    ]
    return reports


def _held() -> Allocation:
    return Allocation(consumer_uuid="c-held", host="held-0", nodename="held-0", resources={"VCPU": 2},
                      created_at=NOW)


def build(reports: list[HostReport], *, bulk: bool, whole: bool, aggs: list[Aggregate]) -> HostTable:
    table = HostTable(clock=lambda: NOW, initial_rows=64)
    for agg in aggs[:3]:  # some before (as a snapshot loads them), some after (as the benchmark does)
        table.update_aggregate(agg)
    table.put_allocation(_held())
    if bulk:
        table.load(reports, whole=whole)
    else:
        for report in reports:
            table.update(report, whole=whole)
    for agg in aggs[3:]:
        table.update_aggregate(agg)
    return table


def _same(a: Any, b: Any, what: str) -> None:
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, what
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), what
    else:
        assert a == b, what


def assert_same_table(a: HostTable, b: HostTable) -> None:
    ca, cb = a._columns, b._columns
    assert ca.n == cb.n
    for name in ca.cols:
        _same(ca.cols[name], cb.cols[name], f"column {name}")
    assert ca.rc_index == cb.rc_index
    for name in ca.rc:
        _same(ca.rc[name], cb.rc[name], f"rc column {name}")
    for attr in ("has_inventory", "reports_usage", "reports_instances", "pci_devices"):
        _same(getattr(ca, attr), getattr(cb, attr), attr)
    assert ca.metrics.keys() == cb.metrics.keys()
    for name in ca.metrics:
        _same(ca.metrics[name], cb.metrics[name], f"metric {name}")
    for name in ca.cells.arrays.fields:
        _same(ca.cells.arrays.fields[name], cb.cells.arrays.fields[name], f"cell field {name}")
    for attr in ("host_names", "node_names", "node_uuids", "hypervisor_hostnames", "host_ips", "numa_reported",
                 "numa", "pci_reported", "pci_taken", "row_of", "rows_of_host", "pci_index"):
        _same(getattr(ca, attr), getattr(cb, attr), attr)
    for interner in ("caps", "traitsets", "pcisets"):
        _same(getattr(ca, interner).values, getattr(cb, interner).values, interner)
    assert [a.instances(r) for r in range(a.n)] == [b.instances(r) for r in range(b.n)]
    assert a._instances._reported_instances == b._instances._reported_instances
    assert a._disabled_reasons == b._disabled_reasons
    assert a.revision == b.revision
    # each table's static revisions start in a range of their own (state.changes.Changes): compare the moves
    assert a.static_revision % (1 << 32) == b.static_revision % (1 << 32)
    assert a._changes.journal.seq == b._changes.journal.seq
    assert {c.consumer_uuid for c in a.allocations()} == {c.consumer_uuid for c in b.allocations()}
    # what decisions derive from the columns
    for attribute in ("caps", "traits", "aggregates", "pci_pools"):
        fa, fb = a.factor(attribute), b.factor(attribute)
        _same(fa.codes, fb.codes, f"factor {attribute}")
    _same(a.alive(NOW), b.alive(NOW), "alive")
    ra, rb = a.roots(), b.roots()
    assert (ra is None) == (rb is None) and (ra is None or np.array_equal(ra, rb))
    assert a.zones() == b.zones()
    for rc in a.rc_index:
        _same(a.used(rc), b.used(rc), f"used {rc}")


@pytest.mark.parametrize(("whole", "chunk"), [(False, None), (True, None), (False, 7)])
def test_bulk_load_builds_the_table_per_report_updates_build(whole: bool, chunk: int | None,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    if chunk is not None:  # the numbers are gathered in chunks: several of them, the last one short
        monkeypatch.setattr(reports_module, "_CHUNK", chunk)
    reports = varied_reports()
    aggs = build_aggregates(reports, 3)
    a = build(reports, bulk=False, whole=whole, aggs=aggs)
    b = build(reports, bulk=True, whole=whole, aggs=aggs)
    assert_same_table(a, b)
    # and the two decide alike
    config, _, _ = make_config(3)
    ea, eb = Engine(a, config), Engine(b, config)
    for spec in build_requests(60, 3):
        try:
            got_a = [[s.host for s in alternates] for alternates in ea.select_destinations(spec)]
        except NoValidHost:
            got_a = None
        try:
            got_b = [[s.host for s in alternates] for alternates in eb.select_destinations(spec)]
        except NoValidHost:
            got_b = None
        assert got_a == got_b


def test_a_batch_that_names_a_node_again_or_one_held_applies_in_order() -> None:
    reports = varied_reports()
    first = reports[:50]
    again = [_report(reports[3].host, reports[3].node, stats={"vcpus_used": 1, "num_io_ops": 3}),
             *reports[50:100], _report(reports[60].host, reports[60].node, stats={"memory_mb_used": 2048})]
    a = build(first, bulk=False, whole=False, aggs=[])
    b = build(first, bulk=True, whole=False, aggs=[])
    for report in again:
        a.update(report)
    b.load(again)
    assert_same_table(a, b)
    assert b.n == 100


@pytest.mark.parametrize("batches", [[5], [3000], [100, 40000], [20000, 7], [32766, 5, 3], [9000, 30000]])
def test_journal_extend_keeps_what_appends_keep(batches: list[int]) -> None:
    from gantt.compute.journal import RowJournal

    one, bulk = RowJournal(keep=8192), RowJournal(keep=8192)
    start = 0
    for count in batches:
        rows = np.arange(start, start + count, dtype=np.intp)
        start += count
        for row in rows.tolist():
            one.append(row)
        bulk.extend(rows)
        assert bulk.seq == one.seq
        newest = one.seq - min(one.seq, one.keep)
        _same(bulk.since(newest, bulk.seq), one.since(newest, one.seq), "newest entries")


def test_a_replica_loads_a_stored_snapshot_as_per_report_updates_would(tmp_path: Path) -> None:
    """The cold start's real path: hosts stored in SQLite (report times, claims held, instance lists) and a
    fresh replica's ``load``, against the per-report build of the same snapshot."""
    store = SQLiteStore(f"sqlite:///{tmp_path / 'gantt.db'}")
    clock = FakeClock()
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter"]}})
    first = Replica(store, config, clock=clock).start(follow=False)
    for agg in build_aggregates(varied_reports(), 3)[:4]:
        first.update_aggregate(agg)
    for report in varied_reports():
        clock.advance(1)
        first.report(report)
    for k in range(5):
        first.select_destinations(request(vcpus=1) | {"instance_uuids": [f"vm-{k}"]})
    later = Replica(store, config, clock=clock).start(follow=False)
    snap = store.snapshot()
    expected = HostTable.from_config(config, clock=clock)
    with expected.lock:
        for aggregate in snap.aggregates:
            expected.update_aggregate(aggregate)
        for report in snap.hosts:
            expected.update(report, whole=True)
        for allocation in snap.allocations:
            expected.put_allocation(allocation)
        for info in snap.instances:
            if expected.rows_of_host(info.host):
                expected.set_instances(info.host, info.instances, replace=True)
    assert len(snap.allocations) == 5
    assert_same_table(expected, later.table)


def _ipv4_by_parts(ip: str) -> int:
    """The rule ``host_ip4`` follows, read part by part (what reports._ipv4_int did before its C fast path)."""
    parts = ip.split(".")
    if len(parts) != 4:
        return -1
    try:
        octets = [int(part) for part in parts]
    except ValueError:
        return -1
    if not all(0 <= octet <= 255 for octet in octets):
        return -1
    return (octets[0] << 24) | (octets[1] << 16) | (octets[2] << 8) | octets[3]


def test_host_ip4_reads_every_address_as_the_part_by_part_rule_does() -> None:
    """The fast path (inet_pton) takes only strict dotted quads; whatever it refuses or reads must come out as the
    part-by-part rule has it: leading zeros, signs, spaces, underscores, non-ASCII digits, short or long forms."""
    rng = np.random.default_rng(7)
    cases = ["1.2.3.4", "01.2.3.4", "1.2.3.04", "00.0.0.0", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.999",
             " 1.2.3.4", "1.2.3.4 ", "+1.2.3.4", "1_0.2.3.4", "0x1.2.3.4", "", "...", "1..2.3", "0.0.0.0",
             "255.255.255.255", "1.2.3.-0", "\u0661.2.3.4", "1.2.3.4\x00", "::1", "10.0.0.1"]
    alphabet = list("0123456789. +-_x\t\u0661")
    for _ in range(5000):
        cases.append("".join(rng.choice(alphabet, size=int(rng.integers(0, 13)))))
        cases.append(".".join(str(int(rng.integers(0, 300))).zfill(int(rng.choice([1, 1, 2, 3]))) for _ in range(4)))
    wrong = [ip for ip in cases if reports_module._ipv4_int(ip) != _ipv4_by_parts(ip)]
    assert not wrong, wrong[:10]


def test_the_benchmark_loads_aggregates_first_as_a_replica_loads_its_snapshot() -> None:
    """``bench.cloud.load_table`` (every in-process benchmark's cold start) loads as ``load_snapshot`` does: the
    aggregates first, so no row is written a second time for its aggregate set. Its table holds every node in the
    aggregates the other order puts it in, and decides alike."""
    reports = varied_reports()
    aggs = build_aggregates(reports, 3)
    recoded: list[str] = []
    recode = HostTable._recode_hosts

    def counted(self: HostTable, hosts: Any) -> None:
        hosts = list(hosts)
        recoded.extend(h for h in hosts if self._columns.rows_of_host.get(h))
        recode(self, hosts)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(HostTable, "_recode_hosts", counted)
        first = load_table(reports, aggs, NOW)
    assert not recoded
    after = HostTable(clock=lambda: NOW, initial_rows=len(reports))
    after.load(reports, now=NOW)
    for agg in aggs:
        after.update_aggregate(agg)
    assert first.n == after.n == len(reports)
    for row in range(first.n):
        assert (first.host_names[row], first.node_names[row]) == (after.host_names[row], after.node_names[row])
        assert [a.key for a in first.node_aggregates(row)] == [a.key for a in after.node_aggregates(row)]
    config, _, _ = make_config(3)
    ea, eb = Engine(first, config), Engine(after, config)
    for spec in build_requests(60, 3):
        answers = []
        for engine in (ea, eb):
            try:
                answers.append([[(s.host, s.weight) for s in alts] for alts in engine.select_destinations(spec)])
            except NoValidHost as exc:
                answers.append(str(exc))
        assert answers[0] == answers[1]


def test_a_bulk_load_makes_one_capabilities_struct_per_distinct_set_of_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's nodes report 4 distinct capability sets: a cold start makes (and encodes) a HostCaps for
    each of those, not one per node, and interns them as per-report updates do (the table test above)."""
    made: list[Any] = []
    struct = reports_module.HostCaps

    def counted(**fields: Any) -> Any:
        made.append(fields)
        return struct(**fields)

    monkeypatch.setattr(reports_module, "HostCaps", counted)
    reports = build_reports(2000, 5)
    table = HostTable(clock=lambda: NOW, initial_rows=64)
    table.load(reports, now=NOW)
    distinct = {(r.stats.hypervisor_type, r.stats.hypervisor_version) for r in reports}
    assert len(made) == len(distinct) == 4
    assert {table.node_caps(row).hypervisor_version for row in range(table.n)} == {v for _, v in distinct}
