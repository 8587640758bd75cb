"""How long a capacity question takes (``gantt.compute.capacity``: POST /v1/capacity, ``gantt capacity``) on the engine
benchmark's cloud, in process: one flavor per zone and overall, the same with one aggregate's hosts taken away and
its displaced consumers counted, and a question of several flavors. Medians of ``--rounds`` rounds, thread CPU and
wall ms, with the CPU model and load.

    .venv/bin/python bench/capacity.py --hosts 100000 --held 20000 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

from gantt.bench.cloud import build_aggregates, build_reports, load_table, make_config
from gantt.bench.scripts import cpu_model
from gantt.compute.engine import Engine
from gantt.compute.scheduler import Scheduler

FLAVORS = [{"name": "m1.small", "vcpus": 1, "memory_mb": 2048, "root_gb": 20},
           {"name": "m1.large", "vcpus": 4, "memory_mb": 8192, "root_gb": 80},
           {"name": "m1.xlarge", "vcpus": 8, "memory_mb": 16384, "root_gb": 160}]


def _timed(fn: Any) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.thread_time()
    fn()
    return (time.thread_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--held", type=int, default=20_000, help="allocations placed before asking")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    now = time.time()
    reports = build_reports(args.hosts, seed=1)
    aggregates = build_aggregates(reports, seed=1)
    config, _, _ = make_config(1)
    table = load_table(reports, aggregates, now)
    sched = Scheduler(config, table=table)
    engine: Engine = sched.engine
    for _ in range(args.held):
        engine.select_destinations({"flavor": FLAVORS[0]})
    rack = next(a for a in table.aggregates() if a.hosts)
    questions = {
        "one flavor": {"requests": [{"flavor": FLAVORS[1]}]},
        "one flavor, an aggregate taken away": {"requests": [{"flavor": FLAVORS[1]}],
                                                "without": {"aggregates": [str(rack.id)]}},
        "three flavors": {"requests": [{"flavor": f} for f in FLAVORS]},
    }
    figures: dict[str, Any] = {}
    for name, question in questions.items():
        samples = [_timed(lambda q=question: sched.capacity(q)) for _ in range(args.rounds)]
        figures[name] = {"cpu_ms": round(statistics.median(s[0] for s in samples), 2),
                         "wall_ms": round(statistics.median(s[1] for s in samples), 2)}
    answer = sched.capacity(questions["one flavor, an aggregate taken away"])
    print(json.dumps({"benchmark": "capacity", "hosts": args.hosts, "held": args.held, "rounds": args.rounds,
                      "aggregate_taken_away": {"hosts": len(rack.hosts),
                                               "displaced": answer.displaced.consumers if answer.displaced else 0},
                      "figures": figures, "cpu": cpu_model(), "load": os.getloadavg()}, indent=1))


if __name__ == "__main__":
    main()
