"""A reload (``Replica.load``: a snapshot swapped in for the table) racing the feed and the claims in flight on the
same replica. Each race is made to happen at its one bad moment here; test_replicas_racing finds them by chance.
All three left a replica, caught up to the store's revision, holding other allocations than the store: a
released claim held again (room taken that is free) or a claim missing (room offered that is taken: the store's
compare-and-set then accepts a claim past capacity, since the node's revision is current), or made a replica
answer a twin request with a host the store does not hold."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gantt.config import Config
from gantt.replication.replica import Replica
from gantt.store.base import Change, Snapshot
from gantt.store.sqlite import SQLiteStore
from tests.conftest import host_stats, request

CONFIG = Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter"]},
                           "DEFAULT": {"service_down_time": 86400}})


@pytest.fixture
def stores(tmp_path: Path):  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    mine, other = SQLiteStore(url), SQLiteStore(url)  # two handles, as two processes would have
    yield mine, other
    mine.close()
    other.close()


def _held(replica: Replica) -> dict[str, str]:
    return {a.consumer_uuid: a.host for a in replica.allocations()}


def _store_held(store: SQLiteStore) -> dict[str, str]:
    return {a.consumer_uuid: a.host for a in store.snapshot().allocations}


def _round_with_a_reload(replica: Replica, store: SQLiteStore, snapshot: Snapshot | None = None,
                         meanwhile: Callable[[], object] = lambda: None) -> None:
    """One follower round (``catch_up``) with a reload landing between its read of the feed and its apply (and
    ``meanwhile`` before the reload); the reload takes ``snapshot`` if given (one taken earlier: a reload slower
    than the follower), else a fresh one."""
    read_feed, take = store.changes, store.snapshot

    def read_then_reload(since: int, timeout: float = 1.0, **kw: int) -> list[Change]:
        found = read_feed(since, timeout, **kw)
        meanwhile()
        store.snapshot = (lambda: snapshot) if snapshot is not None else take  # type: ignore[method-assign]
        try:
            replica.load()
        finally:
            del store.snapshot
        return found

    store.changes = read_then_reload  # type: ignore[method-assign]
    try:
        replica.catch_up()
    finally:
        del store.changes


def test_changes_read_before_a_reload_are_not_applied_again_after_it(stores: tuple[SQLiteStore, SQLiteStore]) -> None:
    """The feed read a booking; it was released and a reload took a snapshot after that; then the feed's read is
    applied, to the new table: the booking must not come back (the new table has no memory of having applied it)."""
    mine, other = stores
    writer = Replica(other, CONFIG).start(follow=False)
    writer.update_resource_stats("h1", host_stats(vcpus=4))
    replica = Replica(mine, CONFIG).start(follow=False)
    writer.select_destinations(request(vcpus=1, instance_uuids=["gone"]))
    _round_with_a_reload(replica, mine, meanwhile=lambda: writer.release("gone"))
    assert _held(replica) == _store_held(mine) == {}
    assert replica.revision == mine.head()


def test_a_reload_to_an_older_snapshot_leaves_no_gap_in_the_feed(stores: tuple[SQLiteStore, SQLiteStore]) -> None:
    """The follower read the feed from its cursor; the reload installed a snapshot older than that cursor (taken
    before the follower's last apply); the revisions between the snapshot and the read must still be applied, not
    skipped because the read started past them."""
    mine, other = stores
    writer = Replica(other, CONFIG).start(follow=False)
    writer.update_resource_stats("h1", host_stats(vcpus=4))
    replica = Replica(mine, CONFIG).start(follow=False)
    writer.select_destinations(request(vcpus=1, instance_uuids=["released"]))
    replica.sync()
    older = mine.snapshot()  # the reload's snapshot: "released" is held in it
    writer.release("released")
    replica.sync()  # the follower applies the release to the table the reload is about to replace
    writer.select_destinations(request(vcpus=1, instance_uuids=["booked"]))
    _round_with_a_reload(replica, mine, older)
    replica.sync()
    assert _held(replica) == _store_held(mine) == {"booked": "h1"}


def test_a_twin_answered_after_a_reload_names_the_stores_booking(stores: tuple[SQLiteStore, SQLiteStore]) -> None:
    """Our claim of a consumer loses to a twin's booking on another host; a reload replaces our table before the
    catch-up that would bring the booking into it: the answer must be the booking, not our own local claim still
    held on the replaced table."""
    mine, other = stores
    writer = Replica(other, CONFIG).start(follow=False)
    writer.update_resource_stats("h1", host_stats(memory_mb=8192))
    writer.update_resource_stats("h2", host_stats(memory_mb=4096))
    replica = Replica(mine, CONFIG).start(follow=False)  # sees h1 as the freer host, and is not told otherwise
    writer.update_resource_stats("h2", host_stats(memory_mb=16384))
    spec = request(vcpus=1, memory_mb=512, instance_uuids=["twin"])
    [[theirs, *_]] = writer.select_destinations(spec)
    assert theirs.host == "h2"
    catch_up_to = replica._catch_up_to

    def reload_first(revision: int, timeout: float = 5.0) -> None:
        replica.load()  # the booking lands in the new table, not in the one our claim was made on
        catch_up_to(revision, timeout)

    replica._catch_up_to = reload_first  # type: ignore[method-assign]
    [[ours, *_]] = replica.select_destinations(spec)
    assert _store_held(mine) == {"twin": "h2"}
    assert ours.host == "h2"
