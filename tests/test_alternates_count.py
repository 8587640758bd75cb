"""RequestSpec.alternates: how many unclaimed alternates the core gathers, in place of [scheduler] max_attempts - 1
(Nova's seam asks for more when several cells exist, then keeps the chosen host's cell's: issue 33)."""

from __future__ import annotations

import pytest

from gantt.model import InvalidRequest
from tests.conftest import make_scheduler, request


def test_default_is_max_attempts_minus_one_and_a_request_may_ask_for_more_or_none() -> None:
    sched = make_scheduler(8, scheduler={"max_attempts": 3})
    [default] = sched.select_destinations(request(instance_uuids=["d"]))
    assert len(default) == 3
    [more] = sched.select_destinations(request(instance_uuids=["m"], alternates=5))
    assert len(more) == 6
    assert len({s.host for s in more}) == 6  # the claimed host, then five others
    [none] = sched.select_destinations(request(instance_uuids=["n"], alternates=0))
    assert len(none) == 1


def test_a_request_of_several_shares_that_many_alternates() -> None:
    sched = make_scheduler(8, scheduler={"max_attempts": 2})
    answer = sched.select_destinations(request(num_instances=2, instance_uuids=["a", "b"], alternates=4))
    assert [len(choices) for choices in answer] == [5, 5]
    taken = {choices[0].host for choices in answer}
    assert all(not taken & {s.host for s in choices[1:]} for choices in answer)


def test_a_negative_count_is_refused_by_name() -> None:
    sched = make_scheduler(2)
    with pytest.raises(InvalidRequest) as err:
        sched.select_destinations(request(alternates=-1))
    assert "alternates" in str(err.value)
