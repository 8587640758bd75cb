"""The live view's trends (``Activity.trend``): per minute, the instances placed and refused and each class's share
in use, for the last hour, a point per minute, oldest first."""

from __future__ import annotations

from gantt.model import Explanation, Flavor, NoValidHost, RequestSpec, Selection
from gantt.model.activity import TREND_MINUTES, Activity, ClassUsage
from tests.conftest import FakeClock


def test_a_point_per_minute_for_the_last_hour() -> None:
    clock = FakeClock(60_000.0 * 60)  # on a minute's start
    activity = Activity(clock)
    pick = [Selection(host="h", nodename="h")]
    activity.decided([pick, pick])  # two instances
    activity.sample([ClassUsage("VCPU", used=4.0, capacity=16.0, hosts=1)])
    clock.now += 30
    activity.sample([ClassUsage("VCPU", used=8.0, capacity=16.0, hosts=1)])  # the minute keeps its first sample
    three = RequestSpec(flavor=Flavor(vcpus=1, memory_mb=1, root_gb=1), num_instances=3)
    activity.refused(three, NoValidHost("none", Explanation(hosts=1, steps=[])))
    clock.now += 60 * 5
    activity.decided([pick])
    trend = activity.trend()
    assert len(trend) == TREND_MINUTES and trend[-1].at.timestamp() == 60_000.0 * 60 + 300
    assert [(p.placed, p.refused) for p in trend[-6:]] == [(2, 3), (0, 0), (0, 0), (0, 0), (0, 0), (1, 0)]
    assert trend[-6].utilization == {"VCPU": 0.25} and trend[-1].utilization == {}
    clock.now += 60 * TREND_MINUTES  # an hour later nothing of that is left
    assert all(p.placed == p.refused == 0 for p in activity.trend())
