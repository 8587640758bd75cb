from __future__ import annotations

import pytest

from gantt import NoValidHost
from tests.conftest import make_scheduler, passing, request


def zoned(filters: list[str], **sections: dict) -> object:  # type: ignore[type-arg]
    s = make_scheduler(5, filters=filters, **sections)
    s.update_aggregate({"id": 1, "hosts": ["h0", "h1"], "metadata": {"availability_zone": "az1"}})
    s.update_aggregate({"id": 2, "hosts": ["h2"], "availability_zone": "az2"})
    s.update_aggregate({"id": 3, "hosts": ["h3"], "metadata": {"other": "x"}})  # no zone: the default zone
    return s  # h4 in no aggregate: the default zone


@pytest.mark.parametrize("filters", [["AvailabilityZoneFilter"], []])
def test_zone_filtering_by_filter_or_by_the_always_on_request_filter(filters: list[str]) -> None:
    s = zoned(filters)
    assert passing(s, request(availability_zone="az1")) == {"h0", "h1"}
    assert passing(s, request(availability_zone="az2")) == {"h2"}
    assert passing(s, request(availability_zone="nova")) == {"h3", "h4"}
    assert passing(s, request(availability_zone="az1,az2")) == {"h0", "h1", "h2"}
    assert passing(s, request(availability_zone="nowhere")) == set()
    assert passing(s, request()) == {f"h{i}" for i in range(5)}


def test_default_zone_option_and_comma_separated_aggregate_zones() -> None:
    s = zoned([], DEFAULT={"default_availability_zone": "home"})
    assert passing(s, request(availability_zone="home")) == {"h3", "h4"}
    s.update_aggregate({"id": 2, "hosts": ["h2"], "metadata": {"availability_zone": "az2, az3"}})
    assert passing(s, request(availability_zone="az3")) == {"h2"}


def test_request_filter_can_be_turned_off() -> None:
    s = zoned([], scheduler={"query_placement_for_availability_zone": False})
    assert passing(s, request(availability_zone="az1")) == {f"h{i}" for i in range(5)}


def test_explanation_counts_the_zone_once() -> None:
    cases = ((["AvailabilityZoneFilter"], "AvailabilityZoneFilter", "AvailabilityZoneRequestFilter"),
             ([], "AvailabilityZoneRequestFilter", "AvailabilityZoneFilter"))
    for filters, name, other in cases:
        s = zoned(filters)
        with pytest.raises(NoValidHost) as err:
            s.select_destinations(request(availability_zone="az2", vcpus=16, num_instances=2))
        steps = {step.name: step.removed for step in err.value.explanation.steps}  # type: ignore[union-attr]
        assert steps[name] == 4
        assert steps.get(other, 0) == 0
        assert f"{name} removed 4" in str(err.value)


def test_one_zone_per_node_everywhere_it_is_shown() -> None:
    """Issue 12: the filter split aggregate zones on commas, the Selection took the raw value and describe() the
    first aggregate's: a node in "az2, az1" passed an az1 request and was answered as in "az2, az1"."""
    s = make_scheduler(2, filters=["AvailabilityZoneFilter"])
    s.update_aggregate({"id": 1, "hosts": ["h0"], "metadata": {"availability_zone": "az2, az1"}})
    [[chosen, *_]] = s.select_destinations(request(availability_zone="az1"))
    [candidate] = s.candidates(request(availability_zone="az2"))
    assert (chosen.host, chosen.availability_zone) == ("h0", "az1")
    assert (candidate.host, candidate.availability_zone) == ("h0", "az1")
    assert s.host("h0")["availability_zone"] == "az1" and s.host("h1")["availability_zone"] is None
    assert s.select_destinations(request(availability_zone="nova"))[0][0].availability_zone == "nova"
