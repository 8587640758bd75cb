"""RequestSpec.alternates: how many unclaimed alternates the core gathers, in place of [scheduler] max_attempts - 1
(Nova's seam asks for more when several cells exist, then keeps the chosen host's cell's: issue 33)."""

from __future__ import annotations

import pytest

from gantt.config import per_request
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


def test_max_attempts_changed_in_the_running_config_counts_from_the_next_request() -> None:
    """Nova's seam follows [scheduler] max_attempts from nova.conf into the running Config at each request
    (gantt.config.per_request, as Nova reads it per request): the next request gathers that many."""
    sched = make_scheduler(8, scheduler={"max_attempts": 3})
    [before] = sched.select_destinations(request(instance_uuids=["b"]))
    assert per_request.retune(sched.config, {"scheduler": {"max_attempts": 6}}) == ["scheduler.max_attempts"]
    sched.engine.retune()
    [after] = sched.select_destinations(request(instance_uuids=["a"]))
    assert (len(before), len(after)) == (3, 6)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_alternates_a_request_asks_beyond_max_attempts_are_shuffled_ties_too(seed: int) -> None:
    """With shuffle_best_same_weighed_hosts, Nova shuffles every host tied for the best weight and takes the
    alternates from that list. The walk draws the ties a batch at a time, sized by the alternates the request asks
    for (not by [scheduler] max_attempts): past a batch sized by max_attempts the ties came in row order."""
    hosts = {f"h{i:02d}": {} for i in range(40)}  # all alike: every host ties
    sched = make_scheduler(hosts, weighers=["RAMWeigher"], gantt={"seed": seed}, scheduler={"max_attempts": 3},
                           filter_scheduler={"shuffle_best_same_weighed_hosts": True, "host_subset_size": 1})
    [choices] = sched.select_destinations(request(instance_uuids=["x"], alternates=20))
    names = [s.host for s in choices]
    assert len(set(names)) == 21
    tail = names[9:]  # past the 8 a max_attempts-sized batch drew (subset + max_attempts + 4, the chosen one too)
    assert tail != sorted(tail)  # 12 in row order by chance: 1 in 12!
