from __future__ import annotations

import pytest

from gantt import NoValidHost
from tests.conftest import make_scheduler, passing, request


def test_io_ops_filter_uses_the_global_limit() -> None:
    s = make_scheduler({"busy": {"num_io_ops": 8}, "calm": {"num_io_ops": 7}}, filters=["IoOpsFilter"])
    assert passing(s, request()) == {"calm"}
    with pytest.raises(NoValidHost) as err:
        s.select_destinations(request(num_instances=2))  # calm reaches 8 once the first lands on it
    assert "IoOpsFilter removed 2" in str(err.value)


def test_aggregate_io_ops_lowest_value_wins_and_falls_back() -> None:
    s = make_scheduler({"a": {"num_io_ops": 3}, "b": {"num_io_ops": 3}, "c": {"num_io_ops": 3}, "d": {"num_io_ops": 9}},
                       filters=["AggregateIoOpsFilter"], filter_scheduler={"max_io_ops_per_host": 10})
    s.update_aggregate({"id": 1, "hosts": ["a", "b"], "metadata": {"max_io_ops_per_host": "5"}})
    s.update_aggregate({"id": 2, "hosts": ["b"], "metadata": {"max_io_ops_per_host": "3"}})
    assert passing(s, request()) == {"a", "c", "d"}
    # a value that is not an integer voids the override: the global option applies
    s.update_aggregate({"id": 3, "hosts": ["d"], "metadata": {"max_io_ops_per_host": "lots"}})
    s.update_aggregate({"id": 4, "hosts": ["d"], "metadata": {"max_io_ops_per_host": "1"}})
    assert passing(s, request()) == {"a", "c", "d"}
