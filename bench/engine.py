"""Engine benchmark: ``python bench/engine.py --hosts 10000 --json`` (also ``gantt bench engine``).

Figures (design §4): per-decision p50/p99 (select_destinations incl. claim), dry-run filter+rank p50, memory per
host, report ingestion rate (structs and JSON), cold start, mask cache hit rate. Timings are medians of rounds.

``--numa-mix 0.3``: instead, the NUMA/PCI mix (issue 14): every hypervisor reports two NUMA cells (dedicated and
shared CPUs, 4 KiB / 2 MiB / some 1 GiB pages), 30 % PCI pools; that share of the requests pinned, multi-node,
huge-page, mixed-policy or PCI, each sized afresh; per-decision p50/p99 for the mix and each kind.

``--uniform``: instead, decisions in the HTTP benchmarks' cloud (identical hosts, one small flavor, Nova's default
filters and weighers with ``shuffle_best_same_weighed_hosts``, 5,000 allocations held): the CPU per decision that
bench/mixed.py's placements cost below HTTP and the store.

``--namespace volume``: instead, the volume namespace (Cinder's filters and weighers) over ``--hosts`` pools
(gantt.bench.volume).
"""

from __future__ import annotations

import argparse
import json
import sys

from gantt.bench.engine import engine_benchmark, uniform_benchmark
from gantt.bench.mix import mix_benchmark
from gantt.bench.profiling import Phases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/engine.py", description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10000, help="number of nodes (default 10000)")
    parser.add_argument("--requests", type=int, default=2000, help="requests per round (default 2000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per figure; medians are reported")
    parser.add_argument("--ingest", type=int, default=20000, help="reports per ingestion round")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--numa-mix", type=float, default=None, metavar="SHARE",
                        help="run the NUMA/PCI mix with this share of NUMA/pinned/PCI requests (e.g. 0.3)")
    parser.add_argument("--namespace", choices=("compute", "volume"), default="compute",
                        help="compute (default): Nova's hosts; volume: Cinder's pools (--hosts is the pool count)")
    parser.add_argument("--cold-only", action="store_true",
                        help="the cold start figure alone (compute namespace, without --numa-mix)")
    parser.add_argument("--uniform", action="store_true",
                        help="decisions in the HTTP benchmarks' cloud of identical hosts (bench/mixed.py's)")
    parser.add_argument("--json", action="store_true", help="print JSON only (default: JSON, indented)")
    parser.add_argument("--profile", action="store_true",
                        help="run each phase under cProfile and print its top functions (timings then include the "
                             "profiler's overhead); the default figures only")
    args = parser.parse_args(argv)
    if args.profile and (args.uniform or args.namespace != "compute" or args.numa_mix is not None):
        parser.error("--profile profiles the default engine figures (not --uniform, --namespace volume or "
                     "--numa-mix)")
    if args.hosts < 1 or args.requests < 1 or args.rounds < 1:
        parser.error("--hosts, --requests and --rounds must be >= 1")
    if args.numa_mix is not None and not 0.0 <= args.numa_mix <= 1.0:
        parser.error("--numa-mix is a share between 0 and 1")
    if args.cold_only and (args.namespace != "compute" or args.numa_mix is not None):
        parser.error("--cold-only is for the compute namespace without --numa-mix")
    if args.uniform and (args.namespace != "compute" or args.numa_mix is not None or args.cold_only):
        parser.error("--uniform is for the compute namespace, without --numa-mix or --cold-only")
    if args.uniform:
        result = uniform_benchmark(args.hosts, args.requests, args.seed, rounds=args.rounds)
    elif args.namespace == "volume":
        if args.numa_mix is not None:
            parser.error("--numa-mix is for the compute namespace")
        from gantt.bench.volume import volume_benchmark

        result = volume_benchmark(args.hosts, args.requests, args.seed, rounds=args.rounds)
    elif args.numa_mix is not None:
        result = mix_benchmark(args.hosts, args.requests, args.seed, share=args.numa_mix, rounds=args.rounds)
    else:
        result = engine_benchmark(args.hosts, args.requests, args.seed, rounds=args.rounds, ingest=args.ingest,
                                  cold_only=args.cold_only, phases=Phases() if args.profile else None)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
