"""A host report that changes anything a decision reads is never dropped, whichever way the service took it: after
its body was known to both workers (taken the long way, learned from the feed, taken again from its digest), a
report changing one field, through either worker, lands in the store and in both replicas exactly as the merge of
the record and the report (the long way's answer), type for type; a report that changes nothing but its time lands
as a refresh of the node's liveness, seen alike by both. The fields are those of tests/test_report_changes.py (each
a filter's or weigher's input), an inventory's, and a moved usage figure as bench/mixed.py's reports move them."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from gantt.config import Config
from gantt.model import HostReport, HostStats
from gantt.replication.replica import Replica
from gantt.service.app import create_app
from gantt.service.runtime import body_digest
from tests.conftest import sqlite_replica_pair
from tests.test_report_changes import CHANGES, FIRST, INVENTORY, INVENTORY_CHANGES

CONFIG = Config.from_dict({"DEFAULT": {"service_down_time": 60.0}})
T0 = 1_000_000.0

CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (name, FIRST, {**FIRST, **fields}) for name, fields, _ in CHANGES]
CASES += [(name, {**FIRST, "inventories": {"VCPU": INVENTORY, "CUSTOM_X": {"total": 4}}},
           {**FIRST, "inventories": {"VCPU": {**INVENTORY, **fields}, "CUSTOM_X": {"total": 4}}})
          for name, fields, _ in INVENTORY_CHANGES]
CASES += [("usage as the benchmark moves it", {**FIRST, "metrics": [{"name": "cpu.percent", "value": 3.0}]},
           {**FIRST, "current_workload": 2, "num_io_ops": 2, "metrics": [{"name": "cpu.percent", "value": 4.0}]}),
          ("a partial report", FIRST, {"vcpus_used": 7})]


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Replica, Replica, list[float], Any, Any]]:
    with sqlite_replica_pair(Path(tmp_path_factory.mktemp("never-dropped")), CONFIG, T0) as (a, b, now, _):
        yield a, b, now, create_app(a), create_app(b)


def _post(app: Any, body: bytes) -> None:
    async def send() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gantt") as client:
            response = await client.post("/v1/resource-stats", content=body,
                                         headers={"content-type": "application/json"})
            assert response.status_code == 200, response.text

    asyncio.run(send())


def _canonical(stats: HostStats) -> str:
    return json.dumps(msgspec.to_builtins(stats), sort_keys=True)


def _record(replica: Replica, host: str) -> HostReport:
    return replica.providers.by_key[(host, host)].record


@pytest.mark.parametrize("through", ["same worker", "other worker"])
@pytest.mark.parametrize(("name", "first", "second"), CASES, ids=[c[0] for c in CASES])
def test_a_changed_report_lands_in_the_store_and_both_replicas(
        workers: tuple[Replica, Replica, list[float], Any, Any], name: str, first: dict[str, Any],
        second: dict[str, Any], through: str) -> None:
    a, b, now, app_a, app_b = workers
    host = re.sub(r"[^a-z0-9]+", "-", f"n {name} {through}")
    body = msgspec.json.encode({"name": host, "stats": {**first, "uuid": f"uuid-{host}"}})
    changed = msgspec.json.encode({"name": host, "stats": {**second, "uuid": f"uuid-{host}"}})

    def settle() -> None:
        a.flush_liveness()
        b.flush_liveness()
        a.sync()
        b.sync()

    for app in (app_a, app_a, app_b, app_b):  # written, then taken: long way, digest, learned digest
        now[0] += 30.0
        _post(app, body)
        settle()
    assert a.bodies.get(body_digest(body)) is not None and b.bodies.get(body_digest(body)) is not None
    now[0] += 30.0
    _post(app_a if through == "same worker" else app_b, changed)
    settle()
    # What the node holds now, written out by hand (a report replaces what it names, inventories class by class)
    # and compared as sorted JSON text, which tells 46 from 46.0 and 1 from true but not one key order from
    # another: no code under test computes the answer.
    merged = {**first, **second, "uuid": f"uuid-{host}"}
    if "inventories" in first and "inventories" in second:
        merged["inventories"] = {**first["inventories"], **second["inventories"]}
    want = _canonical(msgspec.convert(merged, HostStats))
    [stored] = [h for h in a.store.snapshot().hosts if h.host == host]
    for got in (stored, _record(a, host), _record(b, host)):
        assert _canonical(got.stats) == want, name
    assert stored.reported_at == now[0]  # the node's liveness, as of this report
    for replica in (a, b):
        assert replica.host(host)["last_report_seconds_ago"] == 0
