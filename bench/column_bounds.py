"""The candidates' extremes a decision asks of the table's shortlists
(``gantt.compute.extreme_caches.ColumnBounds``), alone:

    .venv/bin/python bench/column_bounds.py --rows 100000 --decisions 4000

Six usage columns as the default weighers read them (free RAM, vCPUs and disk, I/O load, failed builds, the
hypervisor version: the last three constant or nearly so, as in most clouds), each asked for its lowest and
highest value over the candidates (2 % of the rows excluded) per decision: 12 queries. Between two decisions a
claim lowers one random row and a release raises another, as a placement with its release does. Prints the thread
CPU per decision (the queries only) and a checksum of the answers (equal across builds that answer alike).
In process and single-threaded, so an A/B of this part of a decision shows in one sitting on a loaded machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

from gantt.bench.scripts import cpu_model
from gantt.compute.extreme_caches import ColumnBounds
from gantt.compute.journal import RowJournal


def run(n: int, decisions: int, seed: int = 1) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    columns = {
        "free_ram_mb": rng.integers(0, 65536, n).astype(np.float64),
        "free_vcpus": rng.integers(0, 64, n).astype(np.float64),
        "free_disk_mb": rng.integers(0, 10**6, n).astype(np.float64),
        "io_ops_load": np.zeros(n),
        "failed_builds": np.zeros(n),
        "hypervisor_version": np.full(n, 9_000_000.0),
    }
    mask = np.ones(n, dtype=np.bool_)
    mask[rng.integers(0, n, n // 50)] = False
    journal = RowJournal()
    bounds = ColumnBounds()
    moves = rng.integers(0, n, (decisions, 2)).tolist()
    spent = checksum = 0.0
    for claimed, released in moves:
        for name in ("free_ram_mb", "free_vcpus", "free_disk_mb"):
            columns[name][claimed] -= 1
            columns[name][released] += 1
        io = columns["io_ops_load"]
        io[claimed] += 1
        io[released] = max(0.0, io[released] - 1)
        journal.append(claimed)
        journal.append(released)
        start = time.thread_time()
        for name, column in columns.items():
            for highest in (False, True):
                found = bounds.get(name, column, mask, highest=highest, n=n, static_revision=1, journal=journal)
                checksum += found or 0.0
        spent += time.thread_time() - start
    return spent / decisions * 1e6, checksum


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--decisions", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    runs = [run(args.rows, args.decisions) for _ in range(args.repeat)]
    print(json.dumps({"rows": args.rows, "decisions": args.decisions,
                      "us_per_decision": [round(us, 1) for us, _ in runs],
                      "median_us": round(statistics.median(us for us, _ in runs), 1),
                      "checksum": runs[0][1], "load_average_1m_before": round(load, 2), "cpu": cpu_model()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
