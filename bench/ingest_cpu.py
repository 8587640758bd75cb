"""CPU time per host report applied to a loaded table (``HostTable.update``), the engine benchmark's ingestion
in isolation, measured in process CPU seconds so that it holds on a busy machine.

    .venv/bin/python bench/ingest_cpu.py --hosts 100000 --updates 20000 --rounds 5

Run it with ``PYTHONPATH`` pointing at another tree's ``src`` to compare two versions of the engine alternately.
Prints one JSON object: the median CPU µs per update, each round's figure, the CPU model and the load average.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time

import msgspec

from gantt.bench.cloud import build_aggregates, build_reports, load_table
from gantt.bench.scripts import cpu_model
from gantt.model import HostReport


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--updates", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    now = 1_000_000.0
    load_before = os.getloadavg()[0]
    reports = build_reports(args.hosts, args.seed)
    table = load_table(reports, build_aggregates(reports, args.seed), now)
    gc.collect()
    gc.freeze()
    per_update: list[float] = []
    for r in range(args.rounds):
        # the engine benchmark's updates: a host's own report with new usage figures
        rng = random.Random(args.seed + 3 + r)
        updates = []
        for _ in range(args.updates):
            base = reports[rng.randrange(len(reports))]
            stats = msgspec.structs.replace(base.stats, vcpus_used=rng.randrange(0, 8),
                                            memory_mb_used=rng.randrange(0, 32768, 512),
                                            num_io_ops=rng.randrange(0, 4))
            updates.append(HostReport(host=base.host, node=base.node, stats=stats))
        c0 = time.process_time()
        for u in updates:
            table.update(u, now=now)
        per_update.append((time.process_time() - c0) / args.updates * 1e6)
    print(json.dumps({
        "hosts": args.hosts, "updates_per_round": args.updates, "rounds": args.rounds,
        "cpu_us_per_update": round(statistics.median(per_update), 2),
        "cpu_us_per_update_rounds": [round(x, 2) for x in per_update],
        "reports_per_cpu_s": round(1e6 / statistics.median(per_update)),
        "load_average_1m_before": load_before, "load_average_1m": os.getloadavg()[0], "cpu": cpu_model(),
        "python": sys.version.split()[0]}))


if __name__ == "__main__":
    main()
