"""NUMATopologyFilter's fast path against its exact mask (which the parity suite holds to Nova 34).

- ``prefilter`` is a necessary condition: it keeps every node the exact mask keeps, on the parity suite's random
  topologies and requests, before and after claims moved the per-cell columns;
- ``exact(row)`` gives the exact mask's verdict;
- a decision ranked lazily (prefilter, weights made exact, exact verdicts only on the rows walked) orders the
  exact candidates as the exact ranking does, so it picks the node Nova would.
"""

from __future__ import annotations

import contextlib
import random
from typing import Any

import numpy as np
import pytest

from gantt import NoValidHost, Scheduler
from gantt.compute.engine import Engine
from gantt.compute.filters import FILTERS
from gantt.compute.request import RequestContext
from gantt.config import Config
from gantt.model import InvalidRequest, RequestSpec, decode
from tests.parity import numa_cases

NOW = numa_cases.NOW


def _placeable(doc: dict[str, Any]) -> dict[str, Any]:
    """The parity hosts with what Placement's side needs for pinned guests: a PCPU inventory of their dedicated
    CPUs and the hyperthreading trait where cores have siblings (else the always-on resource and trait checks
    leave too few nodes to order)."""
    hosts = []
    for host in doc["hosts"]:
        stats = dict(host["stats"])
        cells = (stats.get("numa_topology") or {}).get("cells", [])
        pcpus = sum(len(c["pcpuset"]) for c in cells)
        if pcpus:
            stats["inventories"] = {"PCPU": {"total": pcpus}}
        if any(len(s) > 1 for c in cells for s in c.get("siblings", [])):
            stats["traits"] = ["HW_CPU_HYPERTHREADING"]
        hosts.append({**host, "stats": stats})
    return {**doc, "hosts": hosts}


def _scheduler(doc: dict[str, Any], **filter_scheduler: Any) -> tuple[Scheduler, Config]:
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": ["NUMATopologyFilter"], **filter_scheduler},
                               "compute": doc["options"]["compute"], "gantt": {"seed": 1}})
    sched = Scheduler(config, clock=lambda: NOW)
    for host in doc["hosts"]:
        stats = {k: v for k, v in host["stats"].items() if v is not None}
        sched.report({"host": host["host"], "stats": stats, "reported_at": NOW - host["age"]})
    return sched, config


def _contexts(doc: dict[str, Any], config: Config) -> list[RequestContext]:
    out = []
    for spec in doc["requests"]:
        try:
            ctx = RequestContext.build(decode(spec, RequestSpec), config, NOW)
        except InvalidRequest:
            continue
        if ctx.numa is not None:
            out.append(ctx)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_prefilter_keeps_every_node_the_exact_mask_keeps(seed: int) -> None:
    doc = numa_cases.cases(seed, 16, 200)
    sched, config = _scheduler(doc)
    table = sched.table
    filt = FILTERS["NUMATopologyFilter"](config)
    contexts = _contexts(doc, config)
    kept = dropped = 0
    for round_ in range(2):
        for ctx in contexts:
            exact = filt.mask(table, ctx)
            pre = filt.prefilter(table, ctx)
            assert exact is not None and pre is not None
            missed = np.flatnonzero(exact & ~pre)
            assert not missed.size, f"prefilter drops {[table.node_names[r] for r in missed]} for {ctx.spec.flavor}"
            check = filt.exact(table, ctx)
            assert check is not None
            assert [check(r) for r in range(table.n)] == exact.tolist()
            kept += int(np.count_nonzero(exact))
            dropped += int(np.count_nonzero(~pre))
        if round_ == 0:  # claims move the per-cell columns (pinned CPUs, pages, usage): check again on them
            for k, spec in enumerate(doc["requests"][:60]):
                spec = {**spec, "instance_uuids": [f"claim-{k}"]}
                with contextlib.suppress(NoValidHost, InvalidRequest):
                    sched.select_destinations(spec)
    # the cases decide both ways, and the prefilter does remove nodes on its own
    assert kept > 100 and dropped > 100, (kept, dropped)


def _walk(engine: Engine, ranking: Any, k: int) -> list[tuple[str, float]]:
    out = []
    for row, weight in engine.order.walk(ranking):
        out.append((engine.table.node_names[row], round(weight, 9)))
        if len(out) >= k:
            break
    return out


@pytest.mark.parametrize("seed", range(3))
def test_a_lazy_ranking_orders_the_exact_candidates_as_the_exact_ranking(seed: int) -> None:
    doc = _placeable(numa_cases.cases(100 + seed, 24, 160))
    sched, config = _scheduler(doc, host_subset_size=3)
    table = sched.table
    compared = 0
    for ctx in _contexts(doc, config):
        exact_engine = Engine(table, config, rng=random.Random(seed))
        lazy_engine = Engine(table, config, rng=random.Random(seed))
        exact = exact_engine.ranker.rank(ctx)
        lazy = lazy_engine.ranker.rank(ctx, lazy=True)
        assert lazy.exact is not None
        assert lazy.count >= exact.count
        expected = _walk(exact_engine, exact, exact.count)
        assert _walk(lazy_engine, lazy, exact.count + 1) == expected
        compared += bool(len(expected) > 1)
    assert compared > 25


def test_cell_columns_follow_rows_that_move_and_hosts_with_more_cells() -> None:
    """A removal moves the last row into the freed one (its cell columns with it); a host with more cells than
    any before widens every cell column; the prefilter stays a superset of the exact mask throughout."""
    doc = numa_cases.cases(7, 16, 120)
    sched, config = _scheduler(doc)
    table = sched.table
    filt = FILTERS["NUMATopologyFilter"](config)
    contexts = _contexts(doc, config)
    widest = max(len((h["stats"]["numa_topology"] or {}).get("cells", [])) for h in doc["hosts"])
    assert table.numa_cell_arrays().width == widest
    for host in ("n0", "n5", "n15"):  # n15 is the last row: removing it moves nothing
        sched.delete_host(host)
    cells = [{"id": k, "cpuset": [2 * k, 2 * k + 1], "pcpuset": [], "memory": 1024, "siblings": [[2 * k, 2 * k + 1]]}
             for k in range(widest + 2)]
    sched.report({"host": "wide", "stats": {**doc["hosts"][1]["stats"], "numa_topology": {"cells": cells}},
                  "reported_at": NOW})
    assert table.numa_cell_arrays().width == widest + 2
    checked = 0
    for ctx in contexts:
        exact = filt.mask(table, ctx)
        pre = filt.prefilter(table, ctx)
        assert exact is not None and pre is not None and not np.any(exact & ~pre)
        checked += int(np.count_nonzero(exact))
    assert checked > 20
