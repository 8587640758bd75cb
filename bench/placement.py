"""Gantt's Placement face beside Placement 16.0.0 itself, on the same machine, with the same providers.

    python bench/placement.py --providers 1000,10000 --json

For each server (real Placement: PyPI's openstack-placement 16.0.0 under gunicorn on SQLite, built once into
~/.cache by tests/placement/real_placement.py; Gantt: ``gantt serve`` on a SQLite file):
1. registers providers the way nova-compute does (``POST /resource_providers``, then ``PUT .../inventories``
   with VCPU, MEMORY_MB and DISK_GB, then ``PUT .../traits``) from ``--concurrency`` clients, 32 by default,
   each one keep-alive connection (Placement: ``--placement-concurrency``, 1 by default, as Placement on SQLite
   answers 500 to concurrent writers): providers/s, and provider writes/s (3 per provider);
2. at each size in ``--providers``, ``GET /allocation_candidates`` as Nova's scheduler asks it
   (``resources=VCPU:1,MEMORY_MB:2048,DISK_GB:20`` with ``limit=1000``, Nova's ``max_placement_results``, and
   without a limit): p50/p99 latency, candidates and answer size;
3. claims: ``--claims`` ``PUT /allocations/{consumer}`` spread over the first size's providers: claims/s;
4. on a fresh server, ``--nested`` compute nodes as trees (a root with 2 NUMA children holding VCPU and
   MEMORY_MB) beside one sharing DISK_GB pool: the same query with and without a limit.
Sizes grow: the second size adds providers to the first. Latencies are medians and 99th percentiles over the
queries; the machine's CPU model and load are printed with them, and the Gantt / Placement ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.placement.real_placement import RealPlacement

from gantt.bench.engine import cpu_model
from gantt.cli.server_process import ServerProcess

HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement 1.36", "accept": "application/json"}
QUERY = {"resources": "VCPU:1,MEMORY_MB:2048,DISK_GB:20"}
TRAITS = ["HW_CPU_X86_AVX2", "HW_CPU_X86_SSE42", "COMPUTE_STATUS_DISABLED"]


class Client:
    """One keep-alive HTTP/1.1 connection with Placement's headers, on the standard library's http.client.

    Not httpx: the clients share the 2 cores with the server they measure, and httpx spends ~540 us of CPU per
    request where http.client spends ~190 us (measured on this machine), so with httpx the benchmark would
    mostly measure itself. Both servers are driven by this same client."""

    def __init__(self, url: str, timeout: float = 120) -> None:
        parts = urlsplit(url)
        self.prefix = parts.path.rstrip("/")
        self.conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
        self.headers = {**HEADERS, "content-type": "application/json"}

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def raw(self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None) -> bytes:
        """The answer's body; raises unless the status is 2xx."""
        target = self.prefix + path + (f"?{urlencode(params)}" if params else "")
        self.conn.request(method, target, body=None if body is None else json.dumps(body), headers=self.headers)
        answer = self.conn.getresponse()
        data = answer.read()
        if not 200 <= answer.status < 300:
            raise RuntimeError(f"{method} {target}: {answer.status} {data[:300]!r}")
        return data

    def call(self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None) -> Any:
        data = self.raw(method, path, body, params)
        return json.loads(data) if data else None


def group_cpu(pgid: int) -> float:
    """CPU seconds (user + system) of every live process in session/group ``pgid``: the server and its workers."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[2]) == pgid:  # fields after the name: state, ppid, pgrp, ...
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def group_switches(pgid: int) -> int:
    """Context switches (voluntary + involuntary) of every live thread of every process in group ``pgid``: each
    is a thread that went to sleep or was preempted (a GIL hand-over, a wake-up of the writer or the loop)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[2]) != pgid:
                    continue
            for task in os.listdir(f"/proc/{entry}/task"):
                with open(f"/proc/{entry}/task/{task}/status") as f:
                    total += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except OSError:
            continue  # gone meanwhile
    return total


def register(url: str, start: int, count: int, concurrency: int) -> float:
    """Register providers ``start .. start+count`` as nova-compute would; providers/s."""

    def one(client: Client, i: int) -> None:
        rp = str(uuid.UUID(int=i + 1))
        generation = client.call("POST", "/resource_providers", {"name": f"cn{i:06d}", "uuid": rp})["generation"]
        inventories = {"VCPU": {"total": 64, "allocation_ratio": 4.0, "max_unit": 64},
                       "MEMORY_MB": {"total": 262144, "reserved": 512, "max_unit": 262144},
                       "DISK_GB": {"total": 2000, "max_unit": 2000}}
        generation = client.call("PUT", f"/resource_providers/{rp}/inventories",
                                 {"resource_provider_generation": generation,
                                  "inventories": inventories})["resource_provider_generation"]
        client.call("PUT", f"/resource_providers/{rp}/traits",
                    {"resource_provider_generation": generation, "traits": TRAITS[:2]})

    def worker(k: int) -> None:
        with Client(url) as client:
            for i in range(start + k, start + count, concurrency):
                one(client, i)

    began = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(worker, range(concurrency)))
    return count / (time.perf_counter() - began)


def register_nested(url: str, count: int, concurrency: int) -> float:
    """``count`` compute nodes as nested trees (a root with two NUMA children holding VCPU and MEMORY_MB) beside
    one sharing DISK_GB pool in an aggregate with every root; compute nodes/s."""
    aggregate = str(uuid.UUID(int=2**127))
    pool = str(uuid.UUID(int=2**127 + 1))

    def put(client: Client, rp: str, what: str, generation: int, body: dict[str, Any]) -> int:
        answer = client.call("PUT", f"/resource_providers/{rp}/{what}",
                             {"resource_provider_generation": generation, **body})
        return int(answer["resource_provider_generation"])

    def one(client: Client, i: int) -> None:
        root = str(uuid.UUID(int=(i + 1) << 8))
        client.call("POST", "/resource_providers", {"name": f"cn{i:06d}", "uuid": root})
        for cell in (1, 2):
            child = str(uuid.UUID(int=((i + 1) << 8) + cell))
            created = client.call("POST", "/resource_providers", {"name": f"cn{i:06d}-numa{cell}", "uuid": child,
                                                                   "parent_provider_uuid": root})
            put(client, child, "inventories", created["generation"],
                {"inventories": {"VCPU": {"total": 32, "allocation_ratio": 4.0},
                                 "MEMORY_MB": {"total": 131072, "reserved": 256}}})
        put(client, root, "aggregates", 0, {"aggregates": [aggregate]})

    with Client(url) as client:
        created = client.call("POST", "/resource_providers", {"name": "disk-pool", "uuid": pool})
        generation = put(client, pool, "inventories", created["generation"],
                         {"inventories": {"DISK_GB": {"total": 10**7}}})
        generation = put(client, pool, "traits", generation, {"traits": ["MISC_SHARES_VIA_AGGREGATE"]})
        put(client, pool, "aggregates", generation, {"aggregates": [aggregate]})

    def worker(k: int) -> None:
        with Client(url) as client:
            for i in range(k, count, concurrency):
                one(client, i)

    began = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool_:
        list(pool_.map(worker, range(concurrency)))
    return count / (time.perf_counter() - began)


def candidates(url: str, queries: int, limit: int | None) -> dict[str, Any]:
    times = []
    found = size = 0
    params = {"resources": QUERY["resources"], **({"limit": str(limit)} if limit else {})}
    with Client(url, timeout=600) as client:
        client.raw("GET", "/allocation_candidates", params=params)  # warm caches
        for _ in range(queries):
            began = time.perf_counter()
            data = client.raw("GET", "/allocation_candidates", params=params)
            times.append(time.perf_counter() - began)
            found, size = len(json.loads(data)["allocation_requests"]), len(data)
    times.sort()
    return {"p50_ms": round(statistics.median(times) * 1000, 2),
            "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))] * 1000, 2),
            "candidates": found, "answer_kb": round(size / 1024), "queries": queries}


def claims(url: str, providers: list[str], count: int, concurrency: int) -> float:
    """``PUT /allocations/{consumer}`` as Nova's scheduler claims (one consumer each, spread over the
    providers); claims/s."""

    def worker(k: int) -> None:
        with Client(url) as client:
            for i in range(k, count, concurrency):
                body = {"allocations": {providers[i % len(providers)]: {"resources": {
                            "VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}}},
                        "project_id": "bench", "user_id": "bench", "consumer_generation": None}
                client.raw("PUT", f"/allocations/{uuid.uuid4()}", body)

    began = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(worker, range(concurrency)))
    return count / (time.perf_counter() - began)


def measure(name: str, start: Callable[[], Any], args: argparse.Namespace, concurrency: int) -> dict[str, Any]:
    out: dict[str, Any] = {"server": name, "flat": {}}
    sizes = sorted(int(s) for s in args.providers.split(","))
    with start() as (url, pgid):
        have = 0
        rates = []
        cpu = 0.0
        switches = 0
        for size in sizes:
            before, switched = group_cpu(pgid), group_switches(pgid)
            rate = register(url, have, size - have, concurrency)
            cpu += group_cpu(pgid) - before
            switches += group_switches(pgid) - switched
            rates.append((size - have, rate))
            have = size
            queries = args.queries if size <= 2000 else max(5, args.queries // 5)
            out["flat"][str(size)] = {"limit_1000": candidates(url, queries, 1000),
                                      "no_limit": candidates(url, max(3, queries // 10), None)}
            print(f"{name}: {size} providers, registered at {rate:.0f}/s, {out['flat'][str(size)]}",
                  file=sys.stderr)
        total = sum(n for n, _ in rates)
        out["providers_per_s"] = round(total / sum(n / r for n, r in rates), 1)
        out["provider_writes_per_s"] = round(3 * out["providers_per_s"], 1)
        # The server's own CPU per write (every process of its group): unlike writes/s, it hardly moves with the
        # machine's load, so it compares runs on a busy machine.
        out["server_cpu_us_per_write"] = round(cpu / (3 * total) * 1e6, 1)
        # Threads of the server that exit during the run take their count with them: a lower bound.
        out["server_switches_per_write"] = round(switches / (3 * total), 1)
        flat = [str(uuid.UUID(int=i + 1)) for i in range(sizes[0])]
        out["claims_per_s"] = round(claims(url, flat, args.claims, concurrency), 1)
        print(f"{name}: claims at {out['claims_per_s']}/s", file=sys.stderr)
    if args.nested:
        with start() as (url, _):
            rate = register_nested(url, args.nested, concurrency)
            out["nested"] = {"computes": args.nested, "computes_per_s": round(rate, 1),
                             "limit_1000": candidates(url, max(5, args.queries // 5), 1000),
                             "no_limit": candidates(url, 3, None)}
            print(f"{name}: nested {out['nested']}", file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--providers", default="1000,10000", help="sizes, ascending (default 1000,10000)")
    parser.add_argument("--concurrency", type=int, default=32,
                        help="clients registering and claiming in Gantt (default 32: nova-compute services and "
                             "schedulers writing at once, which the store groups into shared commits)")
    parser.add_argument("--placement-concurrency", type=int, default=1,
                        help="clients registering in Placement (default 1: on SQLite, concurrent writers make "
                             "Placement answer 500 for a locked database)")
    parser.add_argument("--queries", type=int, default=50, help="candidate queries per size (default 50)")
    parser.add_argument("--claims", type=int, default=2000, help="PUT /allocations to time (default 2000)")
    parser.add_argument("--nested", type=int, default=1000,
                        help="compute nodes in the nested scenario (2 NUMA children each, one sharing disk pool; "
                             "default 1000, 0: skip)")
    parser.add_argument("--gantt-workers", type=int, default=1,
                        help="gantt serve --workers (default 1, gantt serve's own default: on 2 cores shared with "
                             "the clients a second worker costs more CPU per write, as it applies the first's)")
    parser.add_argument("--only", choices=["gantt", "placement"], help="measure one server only")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    results: dict[str, Any] = {"cpu": cpu_model(), "cores": os.cpu_count(), "load_before": os.getloadavg()[0],
                               "query": QUERY, "gantt_clients": args.concurrency, "gantt_workers": args.gantt_workers,
                               "placement_clients": args.placement_concurrency, "servers": []}

    @contextlib.contextmanager
    def placement() -> Iterator[tuple[str, int]]:
        with RealPlacement(gunicorn=True, workers=1, threads=8) as real:
            assert real.proc is not None
            yield real.url, real.proc.pid

    @contextlib.contextmanager
    def gantt() -> Iterator[tuple[str, int]]:
        with tempfile.TemporaryDirectory(prefix="gantt-bench-") as tmp, \
                ServerProcess(f"sqlite:///{tmp}/gantt.sqlite", workdir=tmp, workers=args.gantt_workers,
                              config={"DEFAULT": {"service_down_time": 86400}}) as server:
            assert server.proc is not None
            yield server.url + "/placement", server.proc.pid

    if args.only != "gantt":
        results["servers"].append(measure("placement-16.0.0", placement, args, args.placement_concurrency))
    if args.only != "placement":
        results["servers"].append(measure("gantt", gantt, args, args.concurrency))
    if len(results["servers"]) == 2:
        theirs, ours = results["servers"]
        results["ratio"] = {
            "providers_per_s": round(ours["providers_per_s"] / theirs["providers_per_s"], 1),
            "claims_per_s": round(ours["claims_per_s"] / theirs["claims_per_s"], 1),
            **{f"candidates_p50_{size}": round(theirs["flat"][size]["limit_1000"]["p50_ms"]
                                               / ours["flat"][size]["limit_1000"]["p50_ms"], 1)
               for size in ours["flat"]},
            **{f"no_limit_p50_{size}": round(theirs["flat"][size]["no_limit"]["p50_ms"]
                                             / ours["flat"][size]["no_limit"]["p50_ms"], 1)
               for size in ours["flat"]},
            **({"nested_no_limit_p50": round(theirs["nested"]["no_limit"]["p50_ms"]
                                             / ours["nested"]["no_limit"]["p50_ms"], 1),
                "nested_limit_1000_p50": round(theirs["nested"]["limit_1000"]["p50_ms"]
                                               / ours["nested"]["limit_1000"]["p50_ms"], 1)}
               if "nested" in ours and "nested" in theirs else {})}
    results["load_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"{results['cpu']}, {results['cores']} cores; load average {results['load_before']:.1f} before, "
              f"{results['load_after']:.1f} after; gantt serve --workers {args.gantt_workers}")
        for server in results["servers"]:
            clients = args.concurrency if server["server"] == "gantt" else args.placement_concurrency
            print(f"{server['server']}: {server['providers_per_s']} providers/s ({server['provider_writes_per_s']} "
                  f"writes/s, {server['server_cpu_us_per_write']} us of server CPU each), {server['claims_per_s']} "
                  f"claims/s, {clients} clients")
            for size, r in server["flat"].items():
                print(f"  {size} flat: limit=1000 p50 {r['limit_1000']['p50_ms']} ms p99 {r['limit_1000']['p99_ms']} "
                      f"ms; no limit p50 {r['no_limit']['p50_ms']} ms ({r['no_limit']['candidates']} candidates)")
            if "nested" in server:
                n = server["nested"]
                print(f"  {n['computes']} nested: limit=1000 p50 {n['limit_1000']['p50_ms']} ms; no limit p50 "
                      f"{n['no_limit']['p50_ms']} ms ({n['no_limit']['candidates']} candidates)")
        if "ratio" in results:
            print(f"Gantt / Placement: {results['ratio']}")


if __name__ == "__main__":
    main()
