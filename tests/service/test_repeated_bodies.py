"""``POST /v1/resource-stats`` with a body that is, byte for byte, one the worker took as a repeat before
(``Service.report_again``): taken again from its digest, without decoding it, and still a report in every way a
repeat is: the node's liveness advances, its claims are confirmed or settled on its time; and never taken for a
repeat once the node's record holds other figures, whoever wrote them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from gantt.config import Config
from gantt.model import Allocation
from gantt.replication.replica import Replica
from gantt.service import handlers
from gantt.service.app import create_app
from gantt.store.base import Batch
from tests.conftest import host_stats, sqlite_replica_pair

CONFIG = Config.from_dict({"DEFAULT": {"service_down_time": 60.0}, "gantt": {"claim_timeout": 600.0}})
T0 = 1_000_000.0


class Decodes:
    """Counts the bodies the report handler decodes (the real decoder runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = handlers.decoded

        def counting(raw: bytes, type_: Any) -> Any:
            self.count += 1
            return real(raw, type_)

        monkeypatch.setattr(handlers, "decoded", counting)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Replica, Replica, list[float], Any]]:
    """A service on replica ``a`` and another replica ``b`` of the same SQLite file (another worker), one clock."""
    with sqlite_replica_pair(tmp_path, CONFIG, T0) as (a, b, now, _):
        yield a, b, now, create_app(a)


def _body(host: str, **stats: Any) -> bytes:
    return msgspec.json.encode({"name": host, "stats": host_stats(uuid=f"uuid-{host}", **stats)})


def _post(app: Any, now: list[float], *bodies: bytes, step: float = 30.0) -> None:
    """Each body ``step`` seconds after the last (past the interval within which a repeat writes nothing)."""

    async def send() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gantt") as client:
            for body in bodies:
                now[0] += step
                response = await client.post("/v1/resource-stats", content=body,
                                             headers={"content-type": "application/json"})
                assert response.status_code == 200, response.text

    asyncio.run(send())


def _held(replica: Replica, host: str) -> tuple[float | None, int | None]:
    [held] = [h for h in replica.store.snapshot().hosts if h.host == host]
    return held.reported_at, held.stats.vcpus_used


def _used(replica: Replica, host: str) -> int:
    """The node's reported vCPU usage, as the replica shows it."""
    return int(replica.host(host)["inventories"]["VCPU"]["reported_used"])


def test_a_repeated_body_keeps_the_node_alive_and_confirms_and_settles_its_claims(
        served: tuple[Replica, Replica, list[float], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Past claim_timeout, a node's report settles the claims on a node that lists no instances and expires those a
    listing node does not list: a report taken from its digest does both, on both workers, as the long way does."""
    a, b, now, app = served
    listing, quiet = _body("listing", vcpus_used=1, instances=["i0"]), _body("quiet", vcpus_used=1)
    _post(app, now, listing, quiet, listing, quiet)  # registered, then taken as repeats the long way
    a.flush_liveness()
    a.write(Batch(allocations=[
        Allocation(consumer_uuid="c0", host="listing", nodename="listing", resources={"VCPU": 1}, created_at=now[0]),
        Allocation(consumer_uuid="c1", host="quiet", nodename="quiet", resources={"VCPU": 2}, created_at=now[0])]))
    b.sync()
    assert {c.consumer_uuid: c.confirmed for c in b.allocations()} == {"c0": False, "c1": False}
    decodes = Decodes(monkeypatch)
    _post(app, now, listing, step=CONFIG.gantt.claim_timeout + 60.0)
    _post(app, now, quiet, step=1.0)
    assert decodes.count == 0  # both taken from their digests
    assert a.liveness_pending() == 2
    assert b.host("quiet")["last_report_seconds_ago"] > CONFIG.gantt.claim_timeout  # nothing written yet
    assert a.flush_liveness() == 2
    b.sync()
    assert _held(a, "listing") == (now[0] - 1.0, 1) and _held(a, "quiet") == (now[0], 1)
    for replica in (a, b):
        # each worker shows when it took the touch, on its own clock (issue 30)
        assert [replica.host(h)["last_report_seconds_ago"] for h in ("listing", "quiet")] == [0, 0]
        # settled on the quiet node's report time; c0, unlisted, expired (its release queued)
        assert {c.consumer_uuid: c.confirmed for c in replica.allocations()}["c1"] is True
        assert replica.counters()["expired_claims"] == 1
        assert replica.table.settled_claims == 1


def test_a_changed_body_is_written_and_the_old_one_is_then_written_too(
        served: tuple[Replica, Replica, list[float], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    a, _, now, app = served
    first, changed = _body("h1", vcpus_used=1), _body("h1", vcpus_used=3)
    _post(app, now, first, first)
    a.flush_liveness()
    decodes = Decodes(monkeypatch)
    _post(app, now, changed)
    assert decodes.count == 1 and a.liveness_pending() == 0
    assert _held(a, "h1") == (now[0], 3)
    _post(app, now, first)  # the body taken before, now a change back: written at once
    assert decodes.count == 2 and a.liveness_pending() == 0
    assert _held(a, "h1") == (now[0], 1)
    assert _used(a, "h1") == 1


def test_a_body_taken_before_is_written_once_another_worker_changed_the_record(
        served: tuple[Replica, Replica, list[float], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The digest names the body, not the record: a record written since through another worker (or an
    operator) has other figures, and the same body is then a change, written in full."""
    a, b, now, app = served
    first = _body("h1", vcpus_used=1)
    _post(app, now, first, first)
    a.flush_liveness()
    now[0] += 30.0
    b.update_resource_stats("h1", host_stats(uuid="uuid-h1", vcpus_used=5))
    a.sync()
    assert _used(a, "h1") == 5
    decodes = Decodes(monkeypatch)
    _post(app, now, first)
    assert decodes.count == 1 and a.liveness_pending() == 0
    assert _held(a, "h1") == (now[0], 1)
    b.sync()
    for replica in (a, b):
        assert _used(replica, "h1") == 1
    _post(app, now, first, first)  # repeats of the record it wrote: from its digest
    assert decodes.count == 1 and a.liveness_pending() == 1


def test_a_written_body_is_known_by_its_digest_until_its_record_is_replaced(
        served: tuple[Replica, Replica, list[float], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A body written (a new node, or moved figures) repeats the record it wrote: the host's next report, most
    often that body again, is taken from its digest, and counts for the node's liveness as any repeat. Once the
    record holds other figures (written through another worker), the same body is a change, written in full."""
    a, b, now, app = served
    decodes = Decodes(monkeypatch)
    first, moved = _body("h1", vcpus_used=1), _body("h1", vcpus_used=2)
    _post(app, now, first)  # a new node: written
    assert decodes.count == 1 and a.liveness_pending() == 0
    _post(app, now, first)
    assert decodes.count == 1 and a.liveness_pending() == 1  # from its digest, taken for liveness
    assert a.flush_liveness() == 1
    assert _held(a, "h1") == (now[0], 1)
    _post(app, now, moved)  # written, and then known
    assert decodes.count == 2 and _held(a, "h1") == (now[0], 2)
    _post(app, now, moved)
    assert decodes.count == 2 and a.liveness_pending() == 1
    a.flush_liveness()
    assert _held(a, "h1") == (now[0], 2)
    now[0] += 30.0
    b.update_resource_stats("h1", host_stats(uuid="uuid-h1", vcpus_used=5))
    a.sync()
    _post(app, now, moved)  # the record holds other figures now: decoded, and written
    assert decodes.count == 3 and a.liveness_pending() == 0
    b.sync()
    for replica in (a, b):
        assert _used(replica, "h1") == 2
    assert _held(a, "h1") == (now[0], 2)


@pytest.fixture
def two_served(tmp_path: Path) -> Iterator[tuple[Replica, Replica, list[float], Any, Any]]:
    """Two workers of one SQLite file, each a service over its replica, one clock."""
    with sqlite_replica_pair(tmp_path, CONFIG, T0) as (a, b, now, _):
        yield a, b, now, create_app(a), create_app(b)


def test_a_body_one_worker_took_is_known_to_the_other_from_the_feed(
        two_served: tuple[Replica, Replica, list[float], Any, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A repeat's touch and a written report's record carry their body's digest: the other worker takes the host's
    next report from it too (with shared connections, a host's reports reach either worker), as a report in
    every way, its time written and seen alike."""
    a, b, now, app_a, app_b = two_served
    first, moved = _body("h1", vcpus_used=1), _body("h1", vcpus_used=2)
    _post(app_a, now, first)  # written through a
    b.sync()
    decodes = Decodes(monkeypatch)
    _post(app_b, now, first)  # b knows the body from the written record's change
    assert decodes.count == 0 and b.liveness_pending() == 1
    assert b.flush_liveness() == 1
    assert _held(b, "h1") == (now[0], 1)
    _post(app_b, now, moved)  # written through b, and decoded there
    assert decodes.count == 1 and _held(b, "h1") == (now[0], 2)
    a.sync()
    _post(app_a, now, moved)
    assert decodes.count == 1 and a.liveness_pending() == 1
    a.flush_liveness()
    b.sync()
    _post(app_b, now, moved)  # and from a's touch
    assert decodes.count == 1 and b.liveness_pending() == 1
    b.flush_liveness()
    a.sync()
    for replica in (a, b):
        assert _used(replica, "h1") == 2 and replica.host("h1")["last_report_seconds_ago"] == 0


def test_a_repeat_taken_on_a_stale_view_teaches_no_worker_its_body(
        two_served: tuple[Replica, Replica, list[float], Any, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker a takes a body for a repeat of the record it holds while worker b has just written other figures:
    the touch a writes counts for liveness only, and must not tell b that the body repeats b's (newer) record, or
    b would take the old figures for a repeat and drop the change they are."""
    a, b, now, app_a, app_b = two_served
    first = _body("h1", vcpus_used=1)
    _post(app_a, now, first)
    b.sync()
    now[0] += 30.0
    _post(app_b, now, _body("h1", vcpus_used=4))  # b writes other figures; a has not read them
    _post(app_a, now, first)  # a: a repeat of the record it holds (stale)
    assert a.liveness_pending() == 1
    a.flush_liveness()
    b.sync()
    decodes = Decodes(monkeypatch)
    _post(app_b, now, first)  # at b, the old figures are a change: decoded and written
    assert decodes.count == 1 and b.liveness_pending() == 0
    a.sync()
    for replica in (a, b):
        assert _used(replica, "h1") == 1
    assert _held(b, "h1") == (now[0], 1)


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.mark.parametrize(("stats", "field"), [
    ({"vcpus_used": -1}, "$.stats.vcpus_used"),
    ({"cpu_info": _nested(33)}, "$.stats.cpu_info"),  # one level past the bound: walked, refused
    ({"cpu_info": "DEEP"}, "$.stats.cpu_info"),  # 600 levels
    ({"stats": {"s": "x" * 140_000}}, "$.stats.stats"),
    ({"inventories": {"VCPU": {"total": 4, "reserved": 8}}}, "$.stats.inventories.VCPU.reserved"),
])
def test_bad_input_beside_known_bodies_is_refused_naming_its_field_and_writes_nothing(
        two_served: tuple[Replica, Replica, list[float], Any, Any], stats: dict[str, Any], field: str) -> None:
    """However cheap the way of a known body, a body that is not one (any byte differs) is decoded and checked in
    full: a 400 naming the field, nothing written, nothing taken for liveness, on a node whose bodies both
    workers know."""
    a, b, now, app_a, app_b = two_served
    first = _body("h1", vcpus_used=1)
    _post(app_a, now, first, first)
    a.flush_liveness()
    b.sync()
    revision, held = a.store.snapshot().revision, _held(a, "h1")
    bad = msgspec.json.encode({"name": "h1", "stats": {**host_stats(uuid="uuid-h1", vcpus_used=1), **stats}})
    bad = bad.replace(b'"DEEP"', b'{"k":' * 600 + b"1" + b"}" * 600)

    async def send(app: Any) -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gantt") as client:
            return await client.post("/v1/resource-stats", content=bad, headers={"content-type": "application/json"})

    for app, replica in ((app_a, a), (app_b, b)):
        now[0] += 30.0
        refused = asyncio.run(send(app))
        assert refused.status_code == 400, refused.text
        assert refused.json()["field"] == field, refused.json()
        assert replica.liveness_pending() == 0
    assert a.store.snapshot().revision == revision and _held(a, "h1") == held
