"""CPU time a replica spends per placement and per release at ``bench/mixed.py``'s scale, in process: the claim on
the deciding worker's table and the apply of its commit's result, and the other worker's apply of the same changes
from the feed (claims, releases, and a flush of repeated reports as touches), on a table of ``--hosts`` nodes
reporting as mixed.py's do, with ``--held`` allocations held.

    .venv/bin/python bench/replica_apply.py --hosts 100000 --changes 5000 --rounds 5

The feed's changes are built as the SQLite feed delivers them (decoded from msgpack); one replica on a temporary
SQLite store applies them, as a second worker's follower does. Thread CPU, so that it holds on a busy machine
(not its caches: a server's decisions between changes leave them colder than here). Run it with ``PYTHONPATH``
pointing at another tree's ``src`` to compare two versions alternately. Prints one JSON object: per kind of
operation the median over rounds of the CPU µs per operation, the CPU model and the load average.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import msgspec

from gantt.bench.scripts import bench_script, cpu_model
from gantt.config import Config
from gantt.model import Allocation, HostReport
from gantt.replication.replica import Replica
from gantt.store.base import Batch, Change
from gantt.store.sqlite import SQLiteStore

mixed = bench_script(str(Path(__file__).with_name("mixed.py")), "mixed")
RESOURCES = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}  # mixed.py's flavor
TOUCHES_PER_FLUSH = 400  # about what one LIVENESS_DELAY holds of 100,000 hosts reporting every 60 s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=5_000, help="placements (and as many releases) per round")
    parser.add_argument("--held", type=int, default=5_000, help="allocations held throughout")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    rng = random.Random(args.seed)
    config = Config.from_dict({"filter_scheduler": {"shuffle_best_same_weighed_hosts": True},
                               "scheduler": {"max_attempts": 1}})
    encoder, decoder = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(Change)

    def fed(change: Change) -> list[Change]:
        return [decoder.decode(encoder.encode(change))]

    figures: dict[str, list[float]] = {}

    def timed(name: str, count: int, work: Any, *args: Any, **kwargs: Any) -> None:
        c0 = time.thread_time()
        work(*args, **kwargs)
        figures.setdefault(name, []).append((time.thread_time() - c0) / count * 1e6)

    with tempfile.TemporaryDirectory(prefix="gantt-bench-apply-") as tmp:
        store = SQLiteStore(f"sqlite:///{tmp}/gantt.sqlite")
        for start in range(0, args.hosts, 5000):
            store.commit(Batch(reports=[HostReport.of([f"host-{i:06d}", f"host-{i:06d}.example.org"],
                                                      mixed.report_stats(i, 0))
                                        for i in range(start, min(args.hosts, start + 5000))]))
        replica = Replica(store, config).start(follow=False)
        table = replica.table
        revision = replica.revision

        def allocation(row: int, **fields: Any) -> Allocation:
            return Allocation(consumer_uuid=str(uuid.UUID(int=rng.getrandbits(128))), host=table.host_names[row],
                              nodename=table.node_names[row], resources=dict(RESOURCES), project_id="bench",
                              user_id="bench", **fields)

        def apply_all(batches: list[list[Change]], own: str | None = None) -> None:
            for changes in batches:
                replica.apply(changes, own=own, since=None if own else replica.revision)

        def claim_all(allocations: list[Allocation]) -> None:
            for held in allocations:
                table.claim((held.host, held.nodename), held)

        for _ in range(args.held):
            revision += 1
            replica.apply(fed(Change(revision=revision, kind="allocation",
                                     allocation=allocation(rng.randrange(args.hosts), created_at=time.time()))))
        gc.collect()
        gc.freeze()
        for _ in range(args.rounds):
            rows = [rng.randrange(args.hosts) for _ in range(args.changes)]
            # the other worker's placements and releases, and its flushes of repeated reports, through the feed
            theirs = [allocation(row, created_at=time.time()) for row in rows]
            claims, releases, touches = [], [], []
            for held in theirs:
                revision += 1
                claims.append(fed(Change(revision=revision, kind="allocation", allocation=held)))
            for held in theirs:
                revision += 1
                releases.append(fed(Change(revision=revision, kind="allocation_deleted", allocation=held)))
            for _ in range(max(1, args.changes // TOUCHES_PER_FLUSH)):
                revision += 1
                now = time.time()
                touches.append([fed(Change(revision=revision, kind="touch", at=now,
                                           node=(table.host_names[row], table.node_names[row])))[0]
                                for row in rng.sample(range(args.hosts), TOUCHES_PER_FLUSH)])
            timed("feed_claim", len(claims), apply_all, claims)
            timed("feed_release", len(releases), apply_all, releases)
            timed("feed_touch", len(touches) * TOUCHES_PER_FLUSH, apply_all, touches)
            # this worker's own: the claim (the engine's compare-and-set on its table), its commit's result applied,
            # the same change back from the feed (skipped), and its release applied from the feed after its write
            mine = [allocation(row) for row in rows]
            timed("own_claim", len(mine), claim_all, mine)
            results = []
            for held in mine:
                revision += 1
                results.append([Change(revision=revision, kind="allocation", allocation=held)])
            back = [fed(changes[0]) for changes in results]
            timed("own_claim_result", len(results), apply_all, results, own="claim")
            timed("own_claim_from_feed", len(back), apply_all, back)
            gone = []
            for held in mine:
                revision += 1
                gone.append(fed(Change(revision=revision, kind="allocation_deleted", allocation=held)))
            timed("own_release", len(gone), apply_all, gone)
        held_after = len(table.allocations())
        replica.close()
    print(json.dumps({
        "hosts": args.hosts, "changes_per_round": args.changes, "held": held_after, "rounds": args.rounds,
        "cpu_us_per_op": {name: round(statistics.median(values), 2) for name, values in figures.items()},
        "cpu_us_per_op_rounds": {name: [round(v, 2) for v in values] for name, values in figures.items()},
        "load_average_1m_before": load_before, "load_average_1m": os.getloadavg()[0], "cpu": cpu_model(),
        "python": sys.version.split()[0],
    }))


if __name__ == "__main__":
    main()
