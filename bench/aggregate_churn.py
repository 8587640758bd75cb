"""RSS of a real ``gantt serve`` while one very large aggregate is put and deleted over and over (issue 11, 5).

A leak shows as RSS growing with every cycle; a bounded feed and cache shows a plateau. Prints JSON: RSS after
each cycle, the growth over the first and the last third, and the machine it ran on.

    .venv/bin/python bench/aggregate_churn.py --hosts 350000 --cycles 30 --json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import httpx

from gantt.bench.engine import cpu_model
from gantt.cli.server_process import ServerProcess


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=350_000)
    ap.add_argument("--cycles", type=int, default=30)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    hosts = [f"c{i}" for i in range(args.hosts)]
    body = json.dumps({"id": "churn", "hosts": hosts, "metadata": {"availability_zone": "az-churn"}}).encode()
    config = {"gantt": {"max_body_bytes": max(4 * 1024 * 1024, len(body) + 1024)}}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp, \
            ServerProcess(f"sqlite:///{tmp}/gantt.sqlite", config=config, workdir=tmp) as server:
        assert server.proc is not None
        pid = server.proc.pid
        rss = [_rss_mb(pid)]
        started = time.perf_counter()
        with httpx.Client(base_url=server.url, timeout=120) as http:
            for _ in range(args.cycles):
                http.put("/v1/aggregates/churn", content=body,
                         headers={"content-type": "application/json"}).raise_for_status()
                http.delete("/v1/aggregates/churn").raise_for_status()
                rss.append(_rss_mb(pid))
        seconds = time.perf_counter() - started
    third = max(1, args.cycles // 3)
    result = {
        "hosts_per_aggregate": args.hosts, "cycles": args.cycles, "seconds": round(seconds, 1),
        "rss_mb_start": round(rss[0], 1), "rss_mb_end": round(rss[-1], 1), "rss_mb_max": round(max(rss), 1),
        "growth_mb_first_third": round(rss[third] - rss[0], 1),
        "growth_mb_last_third": round(rss[-1] - rss[-1 - third], 1),
        "rss_mb_per_cycle": [round(r, 1) for r in rss],
        "cpu": cpu_model(), "cores": os.cpu_count(), "load_average_before": round(load, 2),
    }
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
