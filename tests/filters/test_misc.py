"""MetricsFilter and AllHostsFilter."""

from __future__ import annotations

import pytest

from gantt import NoValidHost
from tests.conftest import make_scheduler, passing, request


def metrics(**values: float) -> list[dict]:  # type: ignore[type-arg]
    return [{"name": k.replace("_", "."), "value": v, "source": "test"} for k, v in values.items()]


def test_metrics_filter_needs_every_weighed_metric() -> None:
    s = make_scheduler({"both": {"metrics": metrics(cpu_percent=1, cpu_frequency=2)},
                        "one": {"metrics": metrics(cpu_percent=1)}, "none": {}},
                       filters=["MetricsFilter"], metrics={"weight_setting": ["cpu.percent=1.0", "cpu.frequency=-1"]})
    assert passing(s, request()) == {"both"}
    s.update_resource_stats("both", {"metrics": metrics(cpu_frequency=2)})  # a report replaces the metric list
    with pytest.raises(NoValidHost) as err:
        s.select_destinations(request())
    assert "MetricsFilter removed 3" in str(err.value)


def test_metrics_filter_ignores_malformed_settings_and_unknown_metrics() -> None:
    s = make_scheduler({"a": {"metrics": metrics(cpu_percent=1)}, "b": {}}, filters=["MetricsFilter"],
                       metrics={"weight_setting": ["cpu.percent=1.0", "garbage", "x=notanumber"]})
    assert passing(s, request()) == {"a"}
    s = make_scheduler(2, filters=["MetricsFilter"], metrics={"weight_setting": ["never.reported=1"]})
    assert passing(s, request()) == set()
    s = make_scheduler(2, filters=["MetricsFilter"])
    assert passing(s, request()) == {"h0", "h1"}


def test_all_hosts_filter() -> None:
    s = make_scheduler(3, filters=["AllHostsFilter", "nova.scheduler.filters.all_hosts_filter.AllHostsFilter"])
    assert passing(s, request()) == {"h0", "h1", "h2"}
