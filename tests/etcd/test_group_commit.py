"""Claims of many threads batched into shared etcd txns (group commit, the default): on a real 3-member cluster.

Threads act as tiny schedulers on two store objects (two instances): each reads the nodes' usage revisions and
allocations, picks a node with room, and claims it expecting the revision it read; a refused claim (StoreConflict)
reads again and retries. Every consumer is asked for by two threads, on nodes of their own choosing, and the
nodes are too few for every consumer, so claims race for the same node and the same consumer. A shared txn that
let a conflicting claim through shows up as an overcommitted node (two claims expecting one revision) or as an
acknowledged claim the store does not hold (two claims of one consumer).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path

import msgspec
import pytest

from gantt.model import StoreUnavailable
from gantt.replication.audit import audit
from gantt.replication.replica import Replica
from gantt.store.base import Batch, ConsumerHeld, Expect, StoreConflict
from gantt.store.etcd import EtcdStore
from tests.etcd.cluster import LocalCluster, require_etcd
from tests.store.contract import alloc, report

pytestmark = pytest.mark.etcd

NODES = 4
VCPUS = 6  # one vCPU per claim: 24 fit, 40 consumers ask


def claim_until_settled(store: EtcdStore, consumer: str, rng: random.Random, k: int) -> tuple[str | None, int]:
    """Claim ``consumer`` somewhere with room; (node it landed on or None, conflicts absorbed). Thread ``k``'s
    allocation differs from the other thread's for the same consumer, so the store cannot take one for a
    retry of the other (an identical one is, by design: idempotency)."""
    conflicts = 0
    for _ in range(200):
        snap = store.snapshot()
        if any(a.consumer_uuid == consumer for a in snap.allocations):
            return None, conflicts  # the other thread asking for it won
        used = Counter(a.host for a in snap.allocations)
        revisions = {nr.host: nr.revision for nr in snap.node_revisions}
        room = [h for h in sorted(revisions) if used[h] < VCPUS]
        if not room:
            return None, conflicts
        host = rng.choice(room)
        mine = msgspec.structs.replace(alloc(consumer, host), created_at=1000.0 + k)
        try:
            store.commit(Batch(expect=[Expect(host, host, revisions[host])], allocations=[mine]))
            return host, conflicts
        except StoreConflict:
            conflicts += 1
        except ConsumerHeld:
            return None, conflicts
    raise AssertionError(f"{consumer}: still conflicting after 200 tries")


def run_threads(target: Callable[[int], None], n: int, timeout: float) -> None:
    """``target(0)`` .. ``target(n - 1)``, each in its own thread, all joined: none may be left hanging."""
    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    assert not any(t.is_alive() for t in threads), "a claim never came back (group commit stalled)"


def claim_behind_a_held_committer(store: EtcdStore, monkeypatch: pytest.MonkeyPatch,
                                  claims: list[Callable[[], None]]) -> None:
    """Run each of ``claims`` (a call that commits one claim) in its own thread so that the rest share one txn:
    the committer takes the first claim alone and is held there until every other claim has queued behind it."""
    real = store._group.commit_group
    held, release = threading.Event(), threading.Event()

    def first_waits(group: list) -> None:  # type: ignore[type-arg]
        if not held.is_set():
            held.set()
            release.wait(10)
        real(group)

    monkeypatch.setattr(store._group, "commit_group", first_waits)
    threads = [threading.Thread(target=c) for c in claims]
    threads[0].start()
    assert held.wait(10)
    for t in threads[1:]:
        t.start()
    deadline = time.monotonic() + 10
    while len(store._group.queue) < len(claims) - 1:
        assert time.monotonic() < deadline, "the claims did not all queue behind the held committer"
        time.sleep(0.01)
    release.set()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "a claim never came back"


def test_batched_claims_from_many_threads_never_let_a_conflicting_claim_through(store_url: str) -> None:
    stores = [EtcdStore(store_url), EtcdStore(store_url)]
    try:
        assert all(s.group_commit for s in stores)  # the default
        stores[0].commit(Batch(reports=[report(f"n{i}", vcpus=VCPUS, memory_mb=65536) for i in range(NODES)]))
        consumers = [f"c{i:02d}" for i in range(40)]
        acked: list[tuple[str, str]] = []
        retried: list[str] = []
        lock = threading.Lock()
        start = threading.Barrier(16)

        def worker(k: int) -> None:
            rng = random.Random(k)
            store = stores[k % 2]
            mine = consumers[k % 8::8]  # each consumer is asked for by two threads, one per store
            start.wait()
            for consumer in mine:
                host, conflicts = claim_until_settled(store, consumer, rng, k)
                with lock:
                    if host is not None:
                        acked.append((consumer, host))
                        if conflicts:
                            retried.append(consumer)

        run_threads(worker, 16, timeout=120)

        snap = stores[0].snapshot()
        assert audit(snap) == []  # 0 overcommitted nodes
        held = {a.consumer_uuid: a.host for a in snap.allocations}
        assert [c for c, h in acked if held.get(c) != h] == []  # 0 acknowledged claims missing or moved
        assert len({c for c, _ in acked}) == len(acked)  # no consumer acknowledged twice
        assert len(acked) == len(snap.allocations) == NODES * VCPUS  # the cloud filled up, nothing stray
        stats = [s.stats for s in stores]
        assert sum(st.group_commits for st in stats) > 0  # claims did share txns
        assert sum(st.claim_conflicts for st in stats) > 0 and retried  # losers were found and retried
    finally:
        for s in stores:
            s.close()


def test_a_refused_claim_fails_alone_and_the_others_of_its_txn_land(store_url: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """One shared txn of three claims, the middle one expecting a revision its node has left: it alone is
    refused (StoreConflict naming its node), the two others land at the txn's revision."""
    with EtcdStore(store_url + "?group_workers=1") as store:
        revisions = {f"n{i}": store.commit(Batch(reports=[report(f"n{i}")])).revision for i in range(4)}
        stale = revisions["n2"]
        revisions["n2"] = store.commit(Batch(reports=[report("n2", vcpus=16)])).revision
        outcomes: dict[str, object] = {}

        def claim(node: str, revision: int) -> None:
            try:
                outcomes[node] = store.commit(Batch(expect=[Expect(node, node, revision)],
                                                    allocations=[alloc(f"c-{node}", node)])).revision
            except StoreConflict as exc:
                outcomes[node] = exc.keys

        claims = [("n0", revisions["n0"]), ("n1", revisions["n1"]), ("n2", stale), ("n3", revisions["n3"])]
        claim_behind_a_held_committer(store, monkeypatch, [partial(claim, *c) for c in claims])
        assert outcomes["n2"] == [("n2", "n2")]
        assert isinstance(outcomes["n1"], int) and outcomes["n1"] == outcomes["n3"]
        assert store.stats.group_commits == 1 and store.stats.group_refused == 1 and store.stats.group_split == 1
        assert sorted(a.consumer_uuid for a in store.snapshot().allocations) == ["c-n0", "c-n1", "c-n3"]


def test_the_committer_counts_where_its_claims_waited(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two txns (one claim held in the committer for a second, then three shared): two rounds, each call to etcd
    timed on its own (the committer's hold is no part of it), and every caller's wake-up after its answer."""
    with EtcdStore(store_url + "?group_workers=1") as store:
        revisions = {f"n{i}": store.commit(Batch(reports=[report(f"n{i}")])).revision for i in range(4)}
        real = store._group.commit_group

        def held_a_second(group: list) -> None:  # type: ignore[type-arg]
            if len(group) == 1:
                time.sleep(1.0)
            real(group)

        monkeypatch.setattr(store._group, "commit_group", held_a_second)
        claim_behind_a_held_committer(store, monkeypatch, [
            partial(store.commit, Batch(expect=[Expect(n, n, r)], allocations=[alloc(f"c-{n}", n)]))
            for n, r in revisions.items()])
        stats = store.stats
        assert stats.group_rounds == 2 and stats.group_commits == 1 and stats.commits == 4 + 4
        assert 0 < stats.group_call_s < 1.0  # the two calls, not the second the first claim was held
        assert stats.group_wake_s > 0 and stats.group_linger_s >= 0


def test_a_shared_txn_is_read_back_without_an_error_escaping_its_committer(store_url: str,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A shared txn answers one response per claim and one more, for ``last-write``: the claims are read back
    from the first ones alone, and the committer ends its group cleanly (an error escaping it would be charged to
    every claim of the group not yet answered)."""
    with EtcdStore(store_url + "?group_workers=1") as store:
        revisions = {f"n{i}": store.commit(Batch(reports=[report(f"n{i}")])).revision for i in range(3)}
        escaped: list[BaseException] = []
        real = store._group.commit_group

        def watched(group: list) -> None:  # type: ignore[type-arg]
            try:
                real(group)
            except BaseException as exc:
                escaped.append(exc)
                raise

        monkeypatch.setattr(store._group, "commit_group", watched)

        def claim(node: str) -> None:
            store.commit(Batch(expect=[Expect(node, node, revisions[node])], allocations=[alloc(f"c-{node}", node)]))

        claim_behind_a_held_committer(store, monkeypatch, [partial(claim, node) for node in revisions])
        assert store.stats.group_commits == 1
        assert escaped == []
        assert sorted(a.consumer_uuid for a in store.snapshot().allocations) == ["c-n0", "c-n1", "c-n2"]


def test_claims_with_overlapping_keys_never_share_a_txn(store_url: str) -> None:
    """Two claims expecting one node at one revision: in one txn, etcd would check both against the state
    before it, and both would land. They go one after the other: exactly one lands, the other conflicts."""
    with EtcdStore(store_url) as store:
        revision = store.commit(Batch(reports=[report("n0", vcpus=1)])).revision
        go = threading.Barrier(8)
        outcomes: list[str] = []
        lock = threading.Lock()

        def claim(i: int) -> None:
            go.wait()
            try:
                store.commit(Batch(expect=[Expect("n0", "n0", revision)], allocations=[alloc(f"c{i}", "n0")]))
                outcome = "landed"
            except StoreConflict:
                outcome = "conflict"
            with lock:
                outcomes.append(outcome)

        run_threads(claim, 8, timeout=60)
        assert sorted(outcomes) == ["conflict"] * 7 + ["landed"]
        assert audit(store.snapshot()) == []


def test_group_option_is_checked(store_url: str) -> None:
    with EtcdStore(store_url + "?group=0") as off:
        assert not off.group_commit
    with pytest.raises(ValueError, match="group must be"):
        EtcdStore(store_url + "?group=maybe")
    with pytest.raises(ValueError, match="group_workers"):
        EtcdStore(store_url + "?group_workers=0")


def test_a_claim_never_waits_forever_for_a_wedged_committer(store_url: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The committer thread wedged on purpose: its claim fails as a lost answer would (503), and a claim still
    queued behind it is dropped unsent, never written later."""
    with EtcdStore(store_url + "?group_workers=1") as store:
        revision = store.commit(Batch(reports=[report("n0"), report("n1")])).revision
        wedge = threading.Event()
        monkeypatch.setattr(store._group, "commit_group", lambda group: wedge.wait(30))
        monkeypatch.setattr(store._group, "patience", lambda: 0.5)
        errors: list[BaseException] = []

        def claim(consumer: str, node: str) -> None:
            try:
                store.commit(Batch(expect=[Expect(node, node, revision)], allocations=[alloc(consumer, node)]))
            except StoreUnavailable as exc:
                errors.append(exc)

        first = threading.Thread(target=claim, args=("c0", "n0"), daemon=True)
        first.start()
        time.sleep(0.1)  # the worker has taken c0 and is wedged
        second = threading.Thread(target=claim, args=("c1", "n1"), daemon=True)
        second.start()
        first.join(timeout=10)
        second.join(timeout=10)
        assert len(errors) == 2 and store.stats.group_timeouts == 2
        assert not store._group.queue  # c1 was taken off the queue: it will never be sent
        monkeypatch.undo()
        wedge.set()
        time.sleep(0.2)
        assert [a.consumer_uuid for a in store.snapshot().allocations] == []


def test_a_cluster_refusing_the_shared_txn_still_takes_each_claim(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """--max-txn-ops 8: claims of 4 keys pass alone, a shared txn of several does not; every claim lands."""
    require_etcd()
    small = LocalCluster(tmp_path, size=1, extra_args=["--max-txn-ops", "8"])
    with small, EtcdStore(small.url("/tiny"), budget=10) as store:
        revisions = [store.commit(Batch(reports=[report(f"n{i}")])).revision for i in range(12)]
        go = threading.Barrier(12)
        errors: list[BaseException] = []

        def claim(i: int) -> None:
            go.wait()
            try:
                store.commit(Batch(expect=[Expect(f"n{i}", f"n{i}", revisions[i])],
                                   allocations=[alloc(f"c{i}", f"n{i}")]))
            except Exception as exc:  # collected, shown by the assert
                errors.append(exc)

        run_threads(claim, 12, timeout=60)
        assert errors == []
        assert len(store.snapshot().allocations) == 12
        assert "committing them one by one" in caplog.text  # a shared txn was refused, its claims landed


def test_a_shared_txn_whose_claims_all_lose_still_lets_replicas_reach_the_barrier(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every claim of one shared txn expects a revision its node has left: they all fail, yet the txn writes
    ``last-write``, the revision barrier() returns. A replica following the feed must reach it at once (it used to
    wait for the next real write: in CI, twelve threads that had filled the cloud waited 300 s in sync())."""
    with EtcdStore(store_url + "?group_workers=1") as store, EtcdStore(store_url) as other:
        stale = {f"n{i}": store.commit(Batch(reports=[report(f"n{i}")])).revision for i in range(3)}
        for node in stale:
            store.commit(Batch(reports=[report(node, vcpus=16)]))
        replica = Replica(other).start(follow=False)  # it moves only when it syncs
        refused: list[str] = []

        def claim(node: str) -> None:
            try:
                store.commit(Batch(expect=[Expect(node, node, stale[node])], allocations=[alloc(f"c-{node}", node)]))
            except StoreConflict:
                refused.append(node)

        claim_behind_a_held_committer(store, monkeypatch, [partial(claim, n) for n in stale])
        assert sorted(refused) == ["n0", "n1", "n2"] and store.stats.group_commits == 1
        barrier = other.barrier()
        assert barrier > replica.revision  # the shared txn's revision, which holds nothing but last-write
        started = time.monotonic()
        assert replica.sync() >= barrier  # raised StoreUnavailable after 5 s before the fix
        assert time.monotonic() - started < 3


def _record_groups(store: EtcdStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []
    real = store._group.commit_group

    def recorded(group: list) -> None:  # type: ignore[type-arg]
        sizes.append(len(group))
        real(group)

    monkeypatch.setattr(store._group, "commit_group", recorded)
    return sizes


def test_a_txn_waits_for_claims_still_on_their_way(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three callers were inside at once in the last cycle; now they come back 50 ms apart (each within the gap):
    the committer holds the txn until all three are queued, and they share it."""
    with EtcdStore(store_url + "?group_wait_ms=1000&group_gap_ms=500") as store:
        revisions = {f"n{i}": store.commit(Batch(reports=[report(f"n{i}")])).revision for i in range(3)}
        sizes = _record_groups(store, monkeypatch)
        store._group.peak = 3  # as if three callers had been waiting together on the last txn

        def claim(i: int) -> None:
            time.sleep(0.05 * i)
            node = f"n{i}"
            store.commit(Batch(expect=[Expect(node, node, revisions[node])], allocations=[alloc(f"c{i}", node)]))

        run_threads(claim, 3, timeout=30)
        assert sizes == [3]
        assert len(store.snapshot().allocations) == 3


def test_a_lone_caller_never_waits_for_company(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One caller claiming one after another: nobody else is inside, so each txn goes at once, whatever
    group_wait_ms allows (here 1 s per txn: five claims would take over 5 s if it waited)."""
    with EtcdStore(store_url + "?group_wait_ms=1000&group_gap_ms=1000") as store:
        revisions = {f"n{i}": store.commit(Batch(reports=[report(f"n{i}")])).revision for i in range(5)}
        sizes = _record_groups(store, monkeypatch)
        started = time.monotonic()
        for i in range(5):
            node = f"n{i}"
            store.commit(Batch(expect=[Expect(node, node, revisions[node])], allocations=[alloc(f"c{i}", node)]))
        assert time.monotonic() - started < 2.5
        assert sizes == [1] * 5


def test_group_wait_options_are_checked(store_url: str) -> None:
    with EtcdStore(store_url + "?group_wait_ms=0") as store:
        assert store._group.wait == 0
    for bad in ("group_wait_ms=-1", "group_gap_ms=soon", "group_wait_ms=5000"):
        with pytest.raises(ValueError, match="milliseconds"):
            EtcdStore(f"{store_url}?{bad}")
