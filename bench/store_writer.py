"""CPU the SQLite store spends per committed batch, in process: the writer thread's per claim, per release, per
flush of repeated host reports and per changed report, and a second store object's (another process's
follower) per revision it reads back.

    PYTHONPATH=src .venv/bin/python bench/store_writer.py --hosts 100000 --ops 2000 --rounds 3

By default each batch is committed alone (one batch per group, as the service commits most of them, each from an
event loop as ``Replica.perform`` does for claims and releases). ``--concurrency``/``--rate`` keep several
in flight; ``--rival`` adds a second writer on the file (another worker), so that the measured writer waits for
the write lock and finds its page cache stale, as each of two workers does. The store holds ``--hosts`` hosts
reporting as ``bench/mixed.py``'s do, built once into ``--cache`` and copied for each round; ``--warm`` claims and
releases are committed before measuring (a served store's caches are full). Run it with ``PYTHONPATH`` pointing at
another tree's ``src`` to compare two versions of the store alternately. Prints one JSON object: the median µs of
writer-thread CPU per batch of each kind, batches per group, and the follower's CPU per revision read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import uvloop

from gantt.base import allocator
from gantt.bench.scripts import bench_script, cpu_model
from gantt.model import Allocation, HostReport
from gantt.replication.replica import TOUCH_FRACTION
from gantt.store.base import Batch, Expect, RepeatOf
from gantt.store.sqlite import SQLiteStore

mixed = bench_script(__file__, "mixed")
TOUCH_INTERVAL = 60.0 * TOUCH_FRACTION  # service_down_time's default
RIVAL_HOSTS = 1000  # the rival writer's own hosts (the last ones): the measured claims never conflict with it
FLUSH = 212  # repeated reports per flush: ~1,700/s over two workers, written every LIVENESS_DELAY (0.25 s)


def report(i: int, epoch: int, at: float) -> HostReport:
    found = HostReport.of(f"host-{i:06d}", mixed.report_stats(i, epoch))
    found.reported_at = at
    return found


def build(path: str, hosts: int) -> None:
    store = SQLiteStore(f"sqlite:///{path}")
    try:
        for start in range(0, hosts, 2000):
            store.commit(Batch(reports=[report(i, 0, 1000.0) for i in range(start, min(hosts, start + 2000))]))
    finally:
        store.close()


class Run:
    def __init__(self, path: str, hosts: int, seed: int, rate: float = 0.0) -> None:
        self.rate = rate
        self.store = SQLiteStore(f"sqlite:///{path}")
        self.follower = SQLiteStore(f"sqlite:///{path}")
        self.hosts = hosts
        self.rng = random.Random(seed)
        snap = self.store.snapshot()
        self.revisions = {(r.host, r.node): r.revision for r in snap.node_revisions}
        self.held = {(h.host, h.nodename): (h.reported_at or 0.0) for h in snap.hosts}
        self.since = snap.revision
        self.clock = max(self.held.values()) + 1.0
        self.read_cpu = 0.0
        self.read_revisions = 0

    def key(self, i: int) -> tuple[str, str]:
        return (f"host-{i:06d}", f"host-{i:06d}")

    def follow(self) -> None:
        """The follower reads what was committed since it last read (as another process's feed does)."""
        cpu = time.thread_time()
        changes = self.follower.changes(self.since, timeout=0)
        self.read_cpu += time.thread_time() - cpu
        if changes:
            self.read_revisions += changes[-1].revision - self.since
            self.since = changes[-1].revision

    def claim_batch(self, i: int, consumer: str) -> Batch:
        host, node = key = self.key(i)
        allocation = Allocation(consumer_uuid=consumer, host=host, nodename=node,
                                resources={"VCPU": 2, "MEMORY_MB": 4096, "DISK_GB": 40}, project_id="p",
                                user_id="u", request_id="req-" + consumer, created_at=self.clock)
        return Batch(expect=[Expect(host, node, self.revisions.get(key, 0))], allocations=[allocation])

    async def claims(self, n: int, concurrency: int) -> list[str]:
        """``n`` claims, ``concurrency`` at a time, each on a node no other claim in flight names."""
        loop = asyncio.get_running_loop()
        consumers: list[str] = []
        busy: set[int] = set()

        async def one() -> None:
            i = self.rng.randrange(self.hosts - RIVAL_HOSTS)
            while i in busy:
                i = self.rng.randrange(self.hosts - RIVAL_HOSTS)
            busy.add(i)
            consumer = str(uuid.UUID(int=self.rng.getrandbits(128)))
            result = await self.store.commit_on_loop(self.claim_batch(i, consumer), loop)
            busy.discard(i)
            self.revisions[self.key(i)] = result.revision
            consumers.append(consumer)
            self.follow()

        await self.in_flight(n, concurrency, one)
        return consumers

    async def releases(self, consumers: list[str], concurrency: int) -> None:
        loop = asyncio.get_running_loop()
        left = list(consumers)

        async def one() -> None:
            result = await self.store.commit_on_loop(Batch(releases=[left.pop()]), loop)
            gone = result.changes[0].allocation
            assert gone is not None
            self.revisions[(gone.host, gone.nodename)] = result.revision
            self.follow()

        await self.in_flight(len(consumers), concurrency, one)

    async def in_flight(self, n: int, concurrency: int, one: Any) -> None:
        """``one()`` ``n`` times, at most ``concurrency`` at a time, started ``rate`` a second (0: at once)."""
        started = 0
        begin = time.perf_counter()

        async def lane() -> None:
            nonlocal started
            while started < n:
                if self.rate:
                    wait = begin + started / self.rate - time.perf_counter()
                    if wait > 0:
                        await asyncio.sleep(wait)
                        if started >= n:
                            break
                started += 1
                await one()

        await asyncio.gather(*(lane() for _ in range(concurrency)))

    def flushes(self, n: int) -> int:
        """``n`` flushes of FLUSH repeated reports each (``Replica.flush_liveness``), every node's report
        60 s after the one the store holds."""
        for _ in range(n):
            picked = self.rng.sample(range(self.hosts - RIVAL_HOSTS), FLUSH)
            reports, seen = [], []
            for i in picked:
                key = self.key(i)
                at = self.held[key] + 60.0
                reports.append(report(i, 0, at))
                seen.append(RepeatOf(key[0], key[1], self.revisions.get(key, 0), self.held[key]))
                self.held[key] = at
            result = self.store.commit(Batch(reports=reports, touch_interval=TOUCH_INTERVAL, existing_only=True,
                                             repeat_of=seen))
            assert sum(c.kind == "touch" for c in result.changes) == FLUSH, result.changes[:2]
            self.follow()
        return n

    def changed(self, n: int) -> None:
        """``n`` changed reports, each its own batch (``Replica.report``: not a repeat, written at once)."""
        for _ in range(n):
            i = self.rng.randrange(self.hosts - RIVAL_HOSTS)
            key = self.key(i)
            at = self.held[key] + 60.0
            result = self.store.commit(Batch(reports=[report(i, int(at), at)], touch_interval=TOUCH_INTERVAL))
            assert result.changes and result.changes[0].kind == "host"
            self.revisions[key] = result.revision
            self.held[key] = at
            self.follow()

    def close(self) -> None:
        self.store.close()
        self.follower.close()


class Rival(threading.Thread):
    """Another worker's writer on the same file (a store object of its own): a claim or a release of its own hosts
    ``rate`` times a second, so that the measured writer waits for the file's write lock and finds its page
    cache stale, as each of two workers does."""

    def __init__(self, path: str, run: Run, rate: float) -> None:
        super().__init__(daemon=True)
        self.store = SQLiteStore(f"sqlite:///{path}")
        self.run_ = run
        self.rate = rate
        self.revisions = {run.key(i): run.revisions.get(run.key(i), 0)
                          for i in range(run.hosts - RIVAL_HOSTS, run.hosts)}
        self.halt = threading.Event()

    def run(self) -> None:
        start = time.perf_counter()
        held: list[str] = []
        for n in range(10**9):
            wait = start + n / self.rate - time.perf_counter()
            if self.halt.wait(max(wait, 0)):
                break
            if n % 2 and held:
                result = self.store.commit(Batch(releases=[held.pop()]))
                gone = result.changes[0].allocation
                assert gone is not None
                self.revisions[(gone.host, gone.nodename)] = result.revision
                continue
            key = self.run_.key(self.run_.hosts - RIVAL_HOSTS + n // 2 % RIVAL_HOSTS)
            consumer = str(uuid.uuid4())
            batch = self.run_.claim_batch(int(key[0][5:]), consumer)
            batch.expect[0].revision = self.revisions[key]
            self.revisions[key] = self.store.commit(batch).revision
            held.append(consumer)

    def stop(self) -> None:
        self.halt.set()
        self.join()
        self.store.close()


def measure(run: Run, what: str, count: int, step: Any) -> dict[str, float]:
    cpu, batches, groups, read_cpu, read_revs = (run.store.writer_cpu_seconds, run.store.batches, run.store.groups,
                                                 run.read_cpu, run.read_revisions)
    step()
    done = run.store.batches - batches
    assert done == count, (what, done, count)
    return {"writer_us": (run.store.writer_cpu_seconds - cpu) / count * 1e6,
            "batches_per_group": count / (run.store.groups - groups),
            "follower_us_per_revision": (run.read_cpu - read_cpu) / max(1, run.read_revisions - read_revs) * 1e6}


def one_round(template: str, args: argparse.Namespace, seed: int) -> dict[str, dict[str, float]]:
    work = tempfile.mkdtemp(prefix="gantt-store-writer-")
    try:
        path = str(Path(work) / "store.sqlite")
        shutil.copy(template, path)
        run = Run(path, args.hosts, seed, args.rate)
        rival = Rival(path, run, args.rival) if args.rival else None
        # as a served worker runs (gantt.base.allocator): a young collection walking the bench's own 100,000-entry
        # maps would be charged to whichever thread allocated
        allocator.collect_less_often()
        allocator.freeze_long_lived()
        try:
            ops, concurrency = args.ops, args.concurrency
            if args.warm:  # a served store has committed for a while: its caches (the feed's: 8,192) are full
                uvloop.run(run.releases(uvloop.run(run.claims(args.warm, concurrency)), concurrency))
            if rival is not None:
                rival.start()
            figures: dict[str, dict[str, float]] = {}
            claimed: list[str] = []

            async def claims() -> None:
                claimed.extend(await run.claims(ops, concurrency))

            figures["claim"] = measure(run, "claim", ops, lambda: uvloop.run(claims()))
            figures["release"] = measure(run, "release", ops,
                                         lambda: uvloop.run(run.releases(claimed, concurrency)))
            flushes = max(1, ops // 20)
            figures["flush"] = measure(run, "flush", flushes, lambda: run.flushes(flushes))
            figures["changed_report"] = measure(run, "changed_report", ops // 4, lambda: run.changed(ops // 4))
        finally:
            if rival is not None:
                rival.stop()
            run.close()
        return figures
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--ops", type=int, default=2000, help="claims (and releases) per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=1, help="claims (releases) in flight at a time")
    parser.add_argument("--rate", type=float, default=0.0, help="claims (releases) started per second, 0: as "
                        "fast as --concurrency allows")
    parser.add_argument("--warm", type=int, default=5000, help="claims and releases committed before measuring")
    parser.add_argument("--rival", type=float, default=0.0,
                        help="commits/s of a second writer on the file (another worker), 0: none")
    parser.add_argument("--cache", default=None, help="the built store file to copy (built when missing)")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    cache = args.cache or str(Path(tempfile.gettempdir()) / f"gantt-store-writer-{args.hosts}.sqlite")
    if not Path(cache).exists():
        building = cache + ".building"
        build(building, args.hosts)
        os.replace(building, cache)
    rounds = [one_round(cache, args, args.seed + r) for r in range(args.rounds)]
    out: dict[str, Any] = {"hosts": args.hosts, "ops": args.ops, "rounds": args.rounds, "flush_reports": FLUSH,
                           "warm": args.warm, "concurrency": args.concurrency, "rate": args.rate,
                           "rival_commits_per_s": args.rival}
    for kind in rounds[0]:
        for figure in rounds[0][kind]:
            values = [r[kind][figure] for r in rounds]
            out[f"{kind}_{figure}"] = round(statistics.median(values), 1)
            out[f"{kind}_{figure}_rounds"] = [round(v, 1) for v in values]
    out.update({"load_average_1m_before": load_before, "load_average_1m": os.getloadavg()[0], "cpu": cpu_model(),
                "python": sys.version.split()[0]})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
