"""The filter contract: capabilities are declared and checked, the engine asks them, the order is the list's."""

from __future__ import annotations

import numpy as np
import pytest

from gantt.compute.filters import ALWAYS_ON, FILTERS, pipeline, register
from gantt.compute.filters.base import Filter
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable
from gantt.model import NearestMiss
from tests.conftest import make_scheduler, request


@pytest.mark.parametrize(("flag", "missing"), [("static", "cache_key"), ("explains_miss", "nearest_miss")])
def test_a_capability_without_its_method_is_refused_at_registration(flag: str, missing: str) -> None:
    with pytest.raises(TypeError, match=missing):
        register(type("Incomplete", (Filter,), {"name": "Incomplete", flag: True}))
    assert "Incomplete" not in FILTERS


def test_the_always_on_filters_run_first_in_the_listed_order_then_the_enabled_ones_in_theirs() -> None:
    classes = pipeline(["SameHostFilter", "ComputeFilter", "SameHostFilter"])
    assert [cls.name for cls in classes] == [*ALWAYS_ON, "SameHostFilter", "ComputeFilter"]
    assert {name for name, cls in FILTERS.items() if cls.always_on} == set(ALWAYS_ON)


class _Explaining(Filter):
    name = "ExplainingFilter"
    explains_miss = True

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        return np.zeros(table.n, dtype=np.bool_)

    def nearest_miss(self, table: HostTable, ctx: RequestContext, others: np.ndarray) -> list[NearestMiss]:
        return [NearestMiss(resource_class="CUSTOM_X", requested=1, best_free=float(others.sum()), short_by=1.0)]


def test_the_engine_asks_every_filter_that_declares_it_explains_misses_not_one_by_name() -> None:
    sched = make_scheduler(3, filters=["ComputeFilter"])
    sched.engine.ranker.filters.append(_Explaining(sched.config))
    misses = sched.explain(request(vcpus=1)).nearest_miss
    # Its own mask is left out of "others": all three nodes pass every other step.
    assert [(m.resource_class, m.best_free) for m in misses] == [("CUSTOM_X", 3.0)]
