"""The static filters' masks are kept per request class (``MaskCache.static_class``): decisions that read them must
be those that look every static mask up one filter at a time, while aggregates move (zones, tenant isolation,
flavor affinity, extra specs, a weigher's multiplier) and requests alternate between classes and instances."""

from __future__ import annotations

import random

import msgspec

from gantt.bench.cloud import FLAVORS, build_aggregates, build_reports, make_config
from gantt.compute.engine import Engine
from gantt.compute.state import HostTable
from gantt.model import Aggregate, NoValidHost, RequestSpec

NOW = 1_000_000.0


def _engine(reports: list, aggs: list[Aggregate], per_filter: bool) -> Engine:
    config, _, _ = make_config(3)
    table = HostTable(clock=lambda: NOW, initial_rows=len(reports))
    table.load(reports, now=NOW)
    for agg in aggs:
        table.update_aggregate(agg)
    engine = Engine(table, config)
    if per_filter:  # the reference: every static mask looked up on its own, as before the class memo
        engine.ranker.masks.static_class = lambda ctx, n: None  # type: ignore[method-assign]
    return engine


def _answer(engine: Engine, spec: RequestSpec) -> object:
    try:
        return [[(s.host, s.nodename, s.weight, sorted(s.limits)) for s in sel]
                for sel in engine.select_destinations(spec)]
    except NoValidHost as exc:
        return str(exc)


def test_decisions_by_request_class_equal_those_by_filter() -> None:
    rng = random.Random(8)
    reports = build_reports(240, 3)
    aggs = build_aggregates(reports, 3)
    fast, slow = _engine(reports, aggs, False), _engine(reports, aggs, True)
    names = sorted({r.host for r in reports})
    answers = 0
    for step in range(500):
        if step % 40 == 39:  # the static revision moves: a zone, the isolated tenant's hosts, an affinity
            zone = rng.randrange(4)
            moved = [Aggregate(id=f"az{zone}", name=f"az{zone}", hosts=rng.sample(names, 60),
                               metadata={"availability_zone": f"az{zone}"}),
                     Aggregate(id="tenant-a", hosts=rng.sample(names, rng.choice([5, 30])),
                               metadata={"filter_tenant_id": rng.choice(["proj-a", "proj-b"])}),
                     Aggregate(id="large-only", hosts=rng.sample(names, 20),
                               metadata={"instance_type": rng.choice(["m1.large", "m1.small,m1.tiny"])}),
                     Aggregate(id="spread", hosts=rng.sample(names, 40),  # a weigher's multiplier per row
                               metadata={"ram_weight_multiplier": rng.choice(["2.0", "-1.0", "0.5"])})]
            for agg in moved:
                fast.table.update_aggregate(agg)
                slow.table.update_aggregate(agg)
        body = {"flavor": rng.choice(FLAVORS), "project_id": rng.choice(["proj-a", "proj-b", "proj-c"]),
                "user_id": "u", "image": {"id": "img", "properties": {}},
                "num_instances": rng.choice([1, 1, 1, 2, 3])}
        if rng.random() < 0.5:
            body["availability_zone"] = f"az{rng.randrange(4)}"
        if rng.random() < 0.2:
            body["flavor"] = {**body["flavor"], "extra_specs": {"ssd": "true"}}
        elif rng.random() < 0.05:  # a trait no host has: refused (by the class's own traits mask)
            body["flavor"] = {**body["flavor"], "extra_specs": {"trait:CUSTOM_NOWHERE": "required"}}
        body["instance_uuids"] = [f"c{step}-{i}" for i in range(body["num_instances"])]  # the same on both
        spec = msgspec.convert(body, RequestSpec)
        got, want = _answer(fast, spec), _answer(slow, spec)
        assert got == want, step
        answers += isinstance(got, list)
        if step % 5 == 4:  # the cloud fills and drains: release the oldest claims
            for engine in (fast, slow):
                held = sorted(a.consumer_uuid for a in engine.table.allocations())
                for consumer in held[: len(held) // 3]:
                    engine.release(consumer)
    assert answers > 300  # most requests were placed (the comparison is not between two refusals)
    assert fast.ranker.masks.classes  # the classes were kept (and read: the reference never fills them)
    assert not slow.ranker.masks.classes
