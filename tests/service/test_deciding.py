"""``Metrics.deciding``: each decision counted once by how it ended, timed in the histogram beside its counter, and
its error going on to the caller."""

from __future__ import annotations

import asyncio

import pytest

from gantt.model import InvalidRequest, NoValidHost, StoreUnavailable
from gantt.service.metrics import Metrics


@pytest.mark.parametrize("error, outcome", [
    (None, "placed"), (NoValidHost("nothing fits"), "no_valid_host"), (InvalidRequest("bad"), "refused"),
    (StoreUnavailable("down"), "error"), (RuntimeError("bug"), "error"), (asyncio.CancelledError(), "error")])
def test_each_ending_is_counted_once_and_the_error_goes_on(error: BaseException | None, outcome: str) -> None:
    metrics = Metrics(0)
    if error is None:
        with metrics.deciding():
            pass
    else:
        with pytest.raises(type(error)), metrics.deciding():
            raise error
    assert dict(metrics.decisions) == {outcome: 1}
    assert metrics.decision_latency.count == 1 and metrics.decision_latency.sum >= 0


def test_the_time_is_the_blocks() -> None:
    metrics = Metrics(0)
    with metrics.deciding():
        import time

        time.sleep(0.02)
    assert 0.02 <= metrics.decision_latency.sum < 5
