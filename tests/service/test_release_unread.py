"""A release (``DELETE /v1/allocations/{consumer}``) reads nothing of the replica before it writes: the store checks
the release against what it holds, whichever worker placed the allocation. So it is served without the catch-up
every other read-bearing request takes first (``Service.fresh``: a read of the store's head, ~45 us of CPU per
request under two workers' writes), and still answers as before: 204 with a revision that holds the release and
every commit before it, 404 for a consumer the store does not hold.

In process: two replicas on one SQLite file (two workers' worth), the app over the second, which does not follow
the feed, so only a request's own catch-up could bring it the first one's placement.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from gantt.config import Config
from gantt.model import HostReport
from gantt.replication.replica import Replica
from gantt.service.app import create_app
from gantt.service.schemas import REVISION_HEADER
from tests.conftest import host_stats

FLAVOR = {"name": "m1.tiny", "vcpus": 1, "memory_mb": 16, "root_gb": 1}
CONFIG = Config.from_dict({"DEFAULT": {"service_down_time": 86400}, "gantt": {"seed": 3}})


def _ask(app: Any, method: str, path: str, **kwargs: Any) -> httpx.Response:
    async def run() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gantt") as http:
            return await http.request(method, path, **kwargs)

    return anyio.run(run)


@pytest.fixture()
def two(tmp_path: Path) -> Any:
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    placing = Replica.open(url, CONFIG)
    serving = Replica.open(url, CONFIG, follow=False)  # behind until a request of its own catches it up
    try:
        placing.report_many([HostReport.of(f"h{i}", host_stats(vcpus=8)) for i in range(3)])
        yield placing, serving
    finally:
        serving.close()
        placing.close()


def _counting_heads(replica: Replica, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The catch-ups before a request: reads of the store's head, or of every change committed by now (one read
    where the store has it: ``Store.shared_changes``)."""
    reads: list[int] = []
    shared_head, shared_changes = replica.store.shared_head, replica.store.shared_changes

    def counted() -> int | None:
        head = shared_head()
        reads.append(head or 0)
        return head

    def counted_changes(since: int) -> Any:
        changes = shared_changes(since)
        reads.append(since)
        return changes

    monkeypatch.setattr(replica.store, "shared_head", counted)
    monkeypatch.setattr(replica.store, "shared_changes", counted_changes)
    return reads


def test_a_release_of_another_workers_placement_reads_no_head_first(two: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    placing, serving = two
    consumer = str(uuid.uuid4())
    [[chosen, *_]] = placing.select_destinations({"flavor": FLAVOR, "instance_uuids": [consumer]})
    assert serving.table.allocation(consumer) is None  # not followed: the placement is not here yet
    placed_at = placing.revision
    reads = _counting_heads(serving, monkeypatch)
    app = create_app(serving)

    answer = _ask(app, "DELETE", f"/v1/allocations/{consumer}")

    assert answer.status_code == 204, answer.text
    assert reads == []  # no catch-up before the write (before: one head read per release)
    revision = int(answer.headers[REVISION_HEADER])
    assert revision > placed_at
    # the answer's revision holds the release and the placement before it: the replica reached both
    assert serving.revision >= revision
    assert serving.table.allocation(consumer) is None
    assert consumer not in {a.consumer_uuid for a in serving.store.snapshot().allocations}
    placing.sync()
    assert placing.table.allocation(consumer) is None
    # and the node's room is back in the replica that served the release
    row = serving.table.row_of((chosen.host, chosen.nodename))
    assert row is not None and serving.table.fits(row, {"VCPU": 8}) is None

    # the same release again: the store holds no such allocation, whichever worker is asked
    again = _ask(app, "DELETE", f"/v1/allocations/{consumer}")
    assert again.status_code == 404, again.text
    assert again.json()["field"] == "consumer_uuid"
    assert reads == []


def test_a_read_of_an_allocation_still_catches_up_first(two: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the release is spared the catch-up: showing the allocation (GET, the same path) reads the replica, so
    the placement another worker acknowledged must be there first."""
    placing, serving = two
    consumer = str(uuid.uuid4())
    placing.select_destinations({"flavor": FLAVOR, "instance_uuids": [consumer]})
    reads = _counting_heads(serving, monkeypatch)

    shown = _ask(create_app(serving), "GET", f"/v1/allocations/{consumer}")

    assert shown.status_code == 200, shown.text
    assert shown.json()["consumer_uuid"] == consumer
    assert len(reads) == 1
