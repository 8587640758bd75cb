"""What following Nova's per-request options costs ``gantt.nova``'s manager at each ``select_destinations``.

    V=~/.cache/gantt/nova-functional-nova-34.0.0-py311/bin/python
    $V bench/nova_options.py [--calls 20000] [--hosts 10000]

Runs in Nova's environment, in process, on CPU time (``time.process_time``), so that other processes' load does not
count. Nova's configuration is parsed with its defaults, as ``gantt nova-scheduler`` parses nova.conf. Printed
(JSON), each as µs per call, rounds alternated A B B A:

- ``follow_unchanged``: ``RequestOptions.follow`` with nothing changed (every option Nova reads at each request read
  and compared: the cost each request pays now);
- ``switches_unchanged``: the same for the five request-filter switches alone (what the manager read per request
  before, ``follow_request_filters``);
- ``retune``: an option changed (``ram_weight_multiplier``, back and forth): ``follow`` plus ``Engine.retune`` on a
  scheduler of ``--hosts`` hosts (a new ranker; its masks are made again by the next decision, not counted).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "src")]

SWITCHES = ("limit_tenants_to_placement_aggregate", "placement_aggregate_required_for_tenants",
            "enable_isolated_aggregate_filtering", "query_placement_for_image_type_support", "image_metadata_prefilter")


def _per_call(step: Callable[[], object], calls: int) -> float:
    started = time.process_time()
    for _ in range(calls):
        step()
    return (time.process_time() - started) / calls * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--hosts", type=int, default=10000)
    args = parser.parse_args(argv)
    import nova.conf

    from gantt import Scheduler
    from gantt.nova import conf as gantt_conf

    conf = nova.conf.CONF
    gantt_conf.register(conf)
    conf([], project="nova", default_config_files=[])
    config = gantt_conf.gantt_config(conf)
    options = gantt_conf.RequestOptions(conf)
    sched = Scheduler(config)
    for i in range(args.hosts):
        sched.update_resource_stats(f"h{i}", {"vcpus": 32, "memory_mb": 65536 + i, "local_gb": 1000})
    sched.select_destinations({"flavor": {"vcpus": 1, "memory_mb": 512, "root_gb": 1}})

    def switches() -> None:  # the previous per-request work (gantt.nova.conf.follow_request_filters)
        nova, gantt = conf.scheduler, config.scheduler
        for name in SWITCHES:
            value = bool(getattr(nova, name))
            if getattr(gantt, name) != value:
                setattr(gantt, name, value)
        if conf.scheduler.query_placement_for_routed_network_aggregates:
            raise AssertionError

    flip = [2.0]

    def changed() -> None:
        flip[0] = 3.0 - flip[0]  # 2.0, 1.0, 2.0, ...
        conf.set_override("ram_weight_multiplier", flip[0], group="filter_scheduler")
        if options.follow(config):
            sched.engine.retune()

    rounds: dict[str, list[float]] = {"follow_unchanged": [], "switches_unchanged": [], "retune": []}
    for order in ("AB", "BA", "BA", "AB"):
        for which in order:
            if which == "A":
                rounds["follow_unchanged"].append(_per_call(lambda: options.follow(config), args.calls))
            else:
                rounds["switches_unchanged"].append(_per_call(switches, args.calls))
    for _ in range(4):
        rounds["retune"].append(_per_call(changed, max(1, args.calls // 100)))
    conf.clear_override("ram_weight_multiplier", group="filter_scheduler")
    out = {name: {"median_us": round(statistics.median(v), 2), "all_us": [round(x, 2) for x in v]}
           for name, v in rounds.items()}
    print(json.dumps({"calls": args.calls, "hosts": args.hosts, **out}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
