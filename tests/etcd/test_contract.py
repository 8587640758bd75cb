"""The store contract (tests/store/contract.py) on a real 3-member etcd cluster, plus etcd-specific checks."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

import pytest

from gantt.model import AGGREGATE_HOST, Aggregate, HostReport, HostStats, aggregate_node
from gantt.replication.audit import audit
from gantt.store import open_store
from gantt.store.base import Batch, Compacted, ConsumerHeld, Expect, Store
from gantt.store.etcd import EtcdStore
from gantt.store.etcd_keys import _q
from tests.store.contract import CONTRACT, alloc, report

pytestmark = pytest.mark.etcd


@pytest.mark.parametrize("check", CONTRACT, ids=lambda f: f.__name__)
def test_etcd_store_contract(check: Callable[[Store], None], store: EtcdStore) -> None:
    check(store)


def test_open_store_dispatches_and_prefixes_isolate(store_url: str) -> None:
    with open_store(store_url) as a, open_store(store_url + "-other") as b:
        assert isinstance(a, EtcdStore)
        a.commit(Batch(reports=[report("h1")]))
        assert [h.host for h in a.snapshot().hosts] == ["h1"]
        assert b.snapshot().hosts == []


def test_names_with_percent_and_spaces_round_trip(store: EtcdStore) -> None:
    # '/' is refused in names (they are URL path segments); '%', an encoded slash and spaces must survive keys.
    host, node = "rack%2F1%", "node a b"
    store.commit(Batch(reports=[report(host, node)], aggregates=[Aggregate(id="a%2Fb", hosts=["x"])]))
    snap = store.snapshot()
    assert [(h.host, h.nodename) for h in snap.hosts] == [(host, node)]
    assert sorted((nr.host, nr.node) for nr in snap.node_revisions) == sorted([(host, node),
                                                                              aggregate_node("a%2Fb")])
    store.commit(Batch(delete_hosts=[(host, None)], delete_aggregates=["a%2Fb"]))
    kinds = [(c.kind, c.node or c.aggregate_id) for c in store.changes(0, timeout=0)]
    assert ("host_deleted", (host, node)) in kinds and ("aggregate_deleted", "a%2Fb") in kinds


def test_usage_revision_is_the_usage_keys_mod_revision(store: EtcdStore) -> None:
    r1 = store.commit(Batch(reports=[report("h1"), report("h2")])).revision
    [nr1, nr2] = sorted(store.snapshot().node_revisions, key=lambda nr: nr.host)
    assert nr1.revision == nr2.revision == r1
    r2 = store.commit(Batch(expect=[Expect("h1", "h1", r1)], allocations=[alloc("c1", "h1")])).revision
    revs = {nr.host: nr.revision for nr in store.snapshot().node_revisions}
    assert revs == {"h1": r2, "h2": r1}
    # Instances and aggregates do not touch a node's usage (an aggregate moves its own pseudo-node only).
    store.commit(Batch(aggregates=[Aggregate(id=1, hosts=["h1"])]))
    assert {nr.host: nr.revision for nr in store.snapshot().node_revisions if nr.host != AGGREGATE_HOST} == revs
    # A claim for a consumer that already holds an allocation is refused; the replica answers with the booking.
    with pytest.raises(ConsumerHeld):
        store.commit(Batch(expect=[Expect("h2", "h2", r1)], allocations=[alloc("c1", "h2")]))


def test_concurrent_report_merges_lose_nothing(store: EtcdStore, store_url: str) -> None:
    import threading

    store.commit(Batch(reports=[report("h1")]))
    fields = ["vcpus_used", "memory_mb_used", "local_gb_used", "num_io_ops", "running_vms", "current_workload"]

    def write(name: str) -> None:
        with EtcdStore(store_url) as own:
            own.commit(Batch(reports=[HostReport(host="h1", stats=HostStats(**{name: 3}))]))

    threads = [threading.Thread(target=write, args=(f,)) for f in fields]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    [merged] = store.snapshot().hosts
    assert all(getattr(merged.stats, f) == 3 for f in fields)  # every read-modify-write landed
    assert merged.stats.vcpus == 8


def test_compaction_raises_compacted_and_a_new_snapshot_resumes(store: EtcdStore) -> None:
    r1 = store.commit(Batch(reports=[report("h1")])).revision
    store.commit(Batch(reports=[report("h2")]))
    r3 = store.commit(Batch(reports=[report("h3")])).revision
    store.compact(r3)
    with EtcdStore(store.url) as fresh:
        with pytest.raises(Compacted):
            fresh.changes(r1, timeout=0)
        snap = fresh.snapshot()
        assert {h.host for h in snap.hosts} == {"h1", "h2", "h3"}
        r4 = store.commit(Batch(reports=[report("h4")])).revision
        changes = fresh.changes(snap.revision, timeout=5)
        assert [c.revision for c in changes] == [r4]


def test_audit_path_works_against_etcd(store_url: str) -> None:
    """What ``gantt audit --store etcd://…`` runs: audit(open_store(url).snapshot())."""
    with open_store(store_url) as s:
        rev = s.commit(Batch(reports=[report("h1", vcpus=2, cpu_allocation_ratio=1.0)])).revision
        s.commit(Batch(expect=[Expect("h1", "h1", rev)], allocations=[alloc("a", "h1", vcpu=2)]))
        assert audit(open_store(store_url).snapshot()) == []
        s.commit(Batch(allocations=[alloc("b", "h1", vcpu=1)]))  # forced past capacity, no expect
        problems = audit(open_store(store_url).snapshot())
        assert len(problems) == 1 and "VCPU" in problems[0]


@pytest.mark.parametrize("name", ["node000123", "3f2a9c1e-8b1d-4c55-9a51-7a0e2f6b1c3d", "a.b_c~d-e", "", "a b",
                                  "rack%2F1", "x/y", "héllo", "tab\there", "end\n", "ü", "+=&?#"])
def test_a_key_segment_is_quoted_as_quote_does(name: str) -> None:
    """Plain names skip quote() (a claim names ~9 keys); every other is quoted exactly as before, so keys written
    by an earlier version are the same keys."""
    assert _q(name) == quote(name, safe="")
