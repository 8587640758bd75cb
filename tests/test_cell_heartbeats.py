"""The Nova seam's periodic pass heartbeats the nodes whose cell row did not change (gantt.nova.heartbeats): by a
per-node token (the record's stats its last heartbeat repeated, and the reader's report it was made from) while the
record holds them, the long way (merge and compare) otherwise; all of them written as one batch of touches.

What must hold, on two replicas of one SQLite file: a quiet pass takes every node by its token (no merge, no
comparison) and still counts for every node's liveness everywhere; a record another writer changed meanwhile is
written back from the reader's report, as the long way always did; a reader's report that changed while the
record still holds the old one is never taken for a heartbeat. The pass through Nova's cell databases:
tests/nova/test_manager.py (periodic_read, incremental_read); its cost: bench/nova_cellread.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gantt.config import Config
from gantt.model import HostReport
from gantt.nova.heartbeats import Heartbeats
from gantt.replication.replica import Replica
from tests.conftest import host_stats, sqlite_replica_pair

CONFIG = Config.from_dict({"DEFAULT": {"service_down_time": 60.0}})
T0 = 1_000_000.0
HOSTS = [f"c{i}" for i in range(5)]


def _report(host: str, **fields: Any) -> HostReport:
    """A report as the cell reader holds it (unstamped)."""
    return HostReport.of(host, host_stats(**{"uuid": f"uuid-{host}", "vcpus_used": 2, **fields}))


def _time(replica: Replica, host: str) -> float:
    return float(replica.table.col("updated_at")[replica.table.row(host, host)])


def _registered_and_beaten_once(replica: Replica, now: list[float]) -> tuple[list[HostReport], Heartbeats]:
    """Every host written through the replica, then one pass 20 s later: no token yet, so every node the long way."""
    held = [_report(h) for h in HOSTS]
    replica.report_many([HostReport(host=r.host, node=r.node, stats=r.stats) for r in held])
    beats = Heartbeats()
    now[0] += 20.0
    assert beats.beat(replica, held) == len(HOSTS)
    return held, beats


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Replica, Replica, list[float], str]]:
    with sqlite_replica_pair(tmp_path, CONFIG, T0) as replicas:
        yield replicas


def test_a_quiet_pass_takes_every_node_by_its_token_and_counts_everywhere(
        pair: tuple[Replica, Replica, list[float], str]) -> None:
    a, b, now, _ = pair
    held, beats = _registered_and_beaten_once(a, now)
    now[0] += 20.0
    revision = a.store.head()
    assert beats.beat(a, held) == 0
    assert a.store.head() == revision + 1  # one batch
    assert [c.kind for c in a.store.changes(revision)] == ["touch"] * len(HOSTS)
    b.sync()
    assert {_time(r, h) for r in (a, b) for h in HOSTS} == {T0 + 40.0}
    now[0] += 20.0
    assert beats.beat(a, held) == 0  # the touches kept the records' stats: the tokens still hold


def test_a_record_changed_by_another_writer_is_written_back_the_long_way(
        pair: tuple[Replica, Replica, list[float], str]) -> None:
    a, b, now, _ = pair
    held, beats = _registered_and_beaten_once(a, now)
    now[0] += 20.0
    b.report_many([_report("c1", vcpus_used=9)])  # through Gantt's own API, say
    a.sync()
    now[0] += 20.0
    assert beats.beat(a, held) == 1
    b.sync()
    assert b.providers.by_key[("c1", "c1")].record.stats.vcpus_used == 2  # as the cell's row says
    now[0] += 20.0
    assert beats.beat(a, held) == 1  # c1's record was written: its next heartbeat finds its token
    now[0] += 20.0
    assert beats.beat(a, held) == 0


def test_a_changed_report_is_never_taken_by_the_old_token(pair: tuple[Replica, Replica, list[float], str]) -> None:
    """The reader's report moved while the record still holds the old one (its write failed, say): the token names
    the old report, so the new one takes the long way, which writes it."""
    a, b, now, _ = pair
    held, beats = _registered_and_beaten_once(a, now)
    held[2] = _report("c2", vcpus_used=5)
    now[0] += 20.0
    assert beats.beat(a, held) == 1
    b.sync()
    assert b.providers.by_key[("c2", "c2")].record.stats.vcpus_used == 5
