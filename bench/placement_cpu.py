"""Process CPU per placement (select_destinations and the release after it) below HTTP, in the caller's thread
and through a one-thread executor (the service's hop to a handler thread above [tuning] loop_decision_rows):

    .venv/bin/python bench/placement_cpu.py --hosts 100000 --placements 300

One replica on a temporary SQLite file, every host registered with bench/mixed.py's report. Prints one JSON
object: CPU ms per placement each way, two rounds each, alternated, with the CPU model and the load average.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import msgspec

from gantt.bench.engine import bench_script, cpu_model
from gantt.config import Config
from gantt.model import HostReport, RequestSpec
from gantt.replication.replica import Replica
from gantt.store.sqlite import SQLiteStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--placements", type=int, default=300)
    args = parser.parse_args()
    mixed = bench_script(__file__, "mixed")
    config = Config.from_dict({"filter_scheduler": {"shuffle_best_same_weighed_hosts": True},
                               "scheduler": {"max_attempts": 1}})
    load_before = os.getloadavg()[0]
    out: dict[str, list[float]] = {"caller": [], "executor": []}
    with tempfile.TemporaryDirectory(prefix="gantt-bench-placement-") as tmp:
        replica = Replica(SQLiteStore(f"sqlite:///{tmp}/gantt.sqlite"), config).start()
        try:
            for start in range(0, args.hosts, 1000):
                replica.report_many([HostReport.of(f"host-{i:06d}", mixed.report_stats(i, 0))
                                     for i in range(start, min(args.hosts, start + 1000))])
            replica.sync()
            gc.collect()
            gc.freeze()
            body = msgspec.json.encode({"flavor": mixed.FLAVOR, "project_id": "bench", "user_id": "bench"})

            def place() -> None:
                selections = replica.select_destinations(msgspec.json.decode(body, type=RequestSpec))
                replica.release(selections[0][0].consumer_uuid)

            pool = ThreadPoolExecutor(1)
            ways: dict[str, Callable[[], None]] = {"caller": place, "executor": lambda: pool.submit(place).result()}
            for _ in range(2):
                for name, way in ways.items():
                    for _ in range(50):
                        way()
                    cpu = time.process_time()
                    for _ in range(args.placements):
                        way()
                    out[name].append(round((time.process_time() - cpu) / args.placements * 1e3, 3))
            pool.shutdown()
        finally:
            replica.close()
    print(json.dumps({"hosts": args.hosts, "cpu_ms_per_placement": out, "load_average_1m_before": load_before,
                      "load_average_1m": os.getloadavg()[0], "cpu": cpu_model()}))


if __name__ == "__main__":
    main()
