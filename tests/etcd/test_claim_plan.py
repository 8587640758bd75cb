"""A plain claim's txn, planned the short way (``Transactions.plan_claim``: what the group committer does for each
claim), is the txn the general road plans (its reads, then ``store.planner``): the same compares, writes, changes
and failure reads, on generated claims. Neither reads etcd for a claim, so no cluster is needed."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gantt.model import Allocation, AllocationPart, group_node
from gantt.store import etcd_wire as wire
from gantt.store.base import Batch, Capacity, Expect
from gantt.store.etcd_keys import Keys
from gantt.store.etcd_txn import Transactions, TxnPlan, plain_claim

# odd names too: percent-encoded into one key segment each
names = st.sampled_from(["n1", "n2", "host-3.example", "a/b", "é", "x y"])
consumers = st.sampled_from(["c1", "c2", "7f0c2a3e-2b8e-4c3e-9d7a-5a1f0e6b9c11", "c/4"])
resources = st.dictionaries(st.sampled_from(["VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_X"]),
                            st.integers(min_value=1, max_value=1 << 20), min_size=1, max_size=3)
parts = st.builds(AllocationPart, host=names, nodename=names, resources=resources)
allocations = st.builds(Allocation, consumer_uuid=consumers, host=names, nodename=names, resources=resources,
                        project_id=st.none() | st.just("p"), created_at=st.floats(0, 2e9),
                        group=st.none() | st.sampled_from(["g1", "g/2"]),
                        extra=st.lists(parts, max_size=2).map(lambda xs: xs or None))
expects = st.builds(Expect, host=names, node=names, revision=st.integers(min_value=0, max_value=1 << 40))
claims = st.builds(Batch, expect=st.lists(expects, max_size=4), allocations=st.lists(allocations, min_size=1,
                                                                                     max_size=4))


def _txns() -> Transactions:
    return Transactions(None, Keys("/gantt"))  # type: ignore[arg-type]  # a claim's plan calls no member


def _shape(txns: Transactions, plan: TxnPlan) -> dict[str, Any]:
    return {"compares": plan.compares, "ops": plan.ops, "changes": plan.changes, "expects": plan.expects,
            "claimed": plan.claimed, "read_revision": plan.read_revision, "stale": plan.stale, "quiet": plan.quiet,
            "failure": txns.failure_ops(plan)}


@settings(max_examples=300, deadline=None)
@given(batch=claims)
def test_a_plain_claim_is_planned_as_the_planner_plans_it(batch: Batch) -> None:
    txns = _txns()
    assert plain_claim(batch)
    short, general = txns.plan(batch), txns.plan_read(batch)
    assert _shape(txns, short) == _shape(txns, general)
    # the same writes in the txn's bytes, whatever their order (a multi-node allocation's index entries)
    assert sorted(txns.write_ops(short.ops)) == sorted(txns.write_ops(general.ops))


def test_what_a_claim_writes_and_compares() -> None:
    """One claim by hand: the short road's output is right, not only equal to the planner's."""
    txns = _txns()
    allocation = Allocation(consumer_uuid="c1", host="h", nodename="n", resources={"VCPU": 1}, group="g")
    plan = txns.plan(Batch(expect=[Expect("h", "n", 7)], allocations=[allocation]))
    keys = txns.keys
    assert plan.compares == [wire.compare_mod(keys.usage("h", "n"), 7), wire.compare_mod(keys.allocation("c1"), 0)]
    assert set(plan.ops) == {keys.allocation("c1"), keys.placement(("h", "n"), "c1"), keys.usage("h", "n"),
                             keys.usage(*group_node("g"))}
    assert [c.kind for c in plan.changes] == ["allocation"] and plan.changes[0].allocation == allocation
    assert plan.claimed == [keys.allocation("c1")] and plan.expects == [(("h", "n"), keys.usage("h", "n"), 7)]


@pytest.mark.parametrize("extra", [
    {"reports": [None]}, {"releases": ["c9"]}, {"replaces": ["c1"]}, {"capacity": Capacity()},
    {"fresh_as_of": 3}, {"lenient_releases": True}, {"bump_providers": [("h", "n")]}, {"touch_interval": 1.0},
])
def test_anything_more_than_a_claim_takes_the_general_road(extra: dict[str, Any]) -> None:
    allocation = Allocation(consumer_uuid="c1", host="h", nodename="n", resources={"VCPU": 1})
    assert plain_claim(Batch(allocations=[allocation]))
    assert not plain_claim(Batch(allocations=[allocation], **extra))
    assert not plain_claim(Batch(expect=[Expect("h", "n", 1)]))  # nothing allocated: not a claim
