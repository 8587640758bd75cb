"""Placements while a cloud's hosts report: ``python bench/mixed.py --hosts 100000 --period 60 --rate 1000 --json``.

A real ``gantt serve --workers 2`` on a temporary SQLite file (or, with ``--etcd``, on a throwaway 3-member etcd
cluster on loopback). ``--hosts`` hosts are registered in batches, then three phases of ``--duration`` seconds
each, every one bounded in time and count:

1. **placements** alone, paced at ``--rate`` per second (open loop over ``--concurrency`` connections): once
   ``--hold`` allocations are held, each placement is followed by the release of the oldest one;
2. **reports** alone: every host sends its report once per ``--period`` seconds, spread evenly (host k at
   k * period / hosts), one per request (``POST /v1/resource-stats``). A report is what nova-compute sends from
   its compute_nodes row, the full set of fields; ``--changing`` of them carry figures that moved since the
   host's last report (load, I/O, a metric), the rest repeat it exactly, as most reports of a real cloud do;
3. **mixed**: both streams at once.

Printed as JSON: achieved report and placement rates, placement latency p50/p99 with and without the report
stream, report latency, server CPU per report and per placement (from /proc, the server's process tree; the etcd
members' apart), each phase's ``server_cpu_wait_s`` (the server's threads runnable but waiting for a CPU: high
beside a low rate, a busy machine; low beside little CPU used, a stall of the server's own), each phase's
``server_latency`` (per hot route, the share of requests the server itself took over 10/25/50/100 ms, from its
/metrics histograms: what of the client's latency was the server's), the CPU model and the load average before
and after, and an audit of the store at the end (0 nodes over capacity, 0 acknowledged
claims missing). The HTTP client, the wait for the workers' replicas, the /proc readings and the base of a host's
report are bench/http_api.py's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import sys
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec

from gantt.bench.profiling import Sampler
from gantt.bench.scripts import bench_script, cpu_model
from gantt.cli.server_process import ServerProcess
from gantt.replication.audit import audit
from gantt.store.urls import open_store

_HERE = Path(__file__).resolve().parent

bench_http = bench_script(__file__, "http_api")
Conn, percentile, cpu_seconds = bench_http.Conn, bench_http._percentile, bench_http.cpu_seconds
FLAVOR, HOST_VCPUS = bench_http.FLAVOR, bench_http.HOST_VCPUS


def report_stats(i: int, epoch: int) -> dict[str, Any]:
    """Host ``i``'s compute_nodes report; ``epoch`` moves the figures that change between reports."""
    stats = bench_http.host_stats(i)
    stats.update({
        "uuid": str(uuid.UUID(int=i + 1)), "hypervisor_hostname": f"host-{i:06d}.example.org",
        "disk_available_least": 1900, "running_vms": 0, "current_workload": epoch % 7, "num_io_ops": epoch % 3,
        "cpu_info": {"arch": "x86_64", "model": "Cascadelake-Server", "vendor": "Intel",
                     "topology": {"cells": 2, "sockets": 2, "cores": 8, "threads": 2},
                     "features": ["avx", "avx2", "avx512f", "sse4.2", "vmx", "aes", "pcid", "rdrand"]},
        "metrics": [{"name": "cpu.percent", "value": float(epoch % 100), "source": "libvirt.LibvirtDriver"}],
        "stats": {"failed_builds": "0", "num_proj_bench": "0", "num_vm_active": "0", "num_task_None": "0"},
    })
    return stats


def cpu_wait_seconds(root: int) -> float:
    """Seconds the threads of ``root`` and its descendants spent runnable but waiting for a CPU (Linux
    schedstat; 0 elsewhere). Beside the CPU they used it tells a server starved by a busy machine (waits high)
    from one that stalls on its own (a lock, a commit never answered: both low while requests wait)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    total = 0
    for pid in parents:
        p = pid
        while p > 1 and p != root:
            p = parents.get(p, 1)
        if p != root:
            continue
        for task in Path(f"/proc/{pid}/task").glob("[0-9]*"):
            try:
                total += int((task / "schedstat").read_text().split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return total / 1e9


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# --------------------------------------------------------------------------------------------- streams


async def register(port: int, hosts: int, batch: int, connections: int = 4) -> dict[str, Any]:
    """Every host's first report, ``batch`` to a request (``POST /v1/resource-stats/batch``)."""
    bodies = deque(msgspec.json.encode({"reports": [{"name": f"host-{i:06d}", "stats": report_stats(i, 0)}
                                                    for i in range(start, min(hosts, start + batch))]})
                   for start in range(0, hosts, batch))
    errors = 0

    async def run() -> None:
        nonlocal errors
        conn = Conn("127.0.0.1", port)
        while bodies:
            status, _ = await conn.request("POST", "/v1/resource-stats/batch", bodies.popleft())
            errors += status != 200
        conn.close()

    start = time.perf_counter()
    await asyncio.gather(*(run() for _ in range(connections)))
    elapsed = time.perf_counter() - start
    return {"reports": hosts, "batch": batch, "seconds": round(elapsed, 3), "per_s": round(hosts / elapsed),
            "errors": errors}


async def paced(rate: float, count: int, duration: float, concurrency: int, host: str, port: int,
                send: Callable[[Conn, int], Awaitable[None]]) -> tuple[int, float]:
    """Call ``send(conn, k)`` for k = 0, 1, … at ``rate`` per second (request k due at k / rate), from
    ``concurrency`` connections; stops at ``count`` requests or ``duration`` seconds. A request whose turn has
    come goes at once when a connection is free (open loop: the schedule does not wait for answers). Returns
    how many were sent and the seconds taken."""
    start = time.perf_counter()
    deadline = start + duration
    next_k = 0

    async def run() -> None:
        nonlocal next_k
        conn = Conn(host, port)
        while True:
            k = next_k
            if k >= count:
                break
            due = start + k / rate
            if due >= deadline or time.perf_counter() >= deadline:
                break  # on time: what a slow server left unsent is the shortfall in the achieved rate
            next_k += 1
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            await send(conn, k)
        conn.close()

    await asyncio.gather(*(run() for _ in range(concurrency)))
    return next_k, time.perf_counter() - start


class Placer:
    """Places (``select_destinations``) and, past ``hold`` allocations held, releases the oldest after each."""

    def __init__(self, hold: int) -> None:
        self.hold = hold
        self.held: deque[str] = deque()
        self.body = msgspec.json.encode({"flavor": FLAVOR, "project_id": "bench", "user_id": "bench"})
        self.reset()

    def reset(self) -> None:
        self.latencies: list[float] = []
        self.release_latencies: list[float] = []
        self.statuses: dict[str, int] = {}

    async def send(self, conn: Conn, k: int) -> None:
        t = time.perf_counter()
        status, data = await conn.request("POST", "/v1/select_destinations", self.body)
        self.latencies.append(time.perf_counter() - t)
        self.statuses[str(status)] = self.statuses.get(str(status), 0) + 1
        if status == 200:
            self.held.append(msgspec.json.decode(data)["selections"][0][0]["consumer_uuid"])
        if len(self.held) > self.hold:
            consumer = self.held.popleft()
            t = time.perf_counter()
            status, _ = await conn.request("DELETE", f"/v1/allocations/{consumer}")
            self.release_latencies.append(time.perf_counter() - t)
            key = f"release {status}"
            self.statuses[key] = self.statuses.get(key, 0) + 1

    def figures(self, sent: int, seconds: float) -> dict[str, Any]:
        placed = self.statuses.get("200", 0)
        return {"requests": sent, "placed": placed, "per_s": round(placed / seconds, 1),
                "p50_ms": round(percentile(self.latencies, 0.5) * 1000, 2),
                "p99_ms": round(percentile(self.latencies, 0.99) * 1000, 2),
                "releases": len(self.release_latencies),
                "release_p50_ms": round(percentile(self.release_latencies, 0.5) * 1000, 2)
                if self.release_latencies else None,
                "statuses": dict(sorted(self.statuses.items()))}


class Reporter:
    """Host k's report at k * period / hosts: the full report, its figures moved with probability ``changing``."""

    def __init__(self, hosts: int, changing: float, seed: int) -> None:
        self.hosts = hosts
        self.changing = changing
        self.epoch = [0] * hosts
        # Host i's last body and the epoch it was encoded at: the load generator shares the server's cores, and
        # building a full report costs it ~20 us, most reports repeating the last one.
        self.bodies: dict[int, tuple[int, bytes]] = {}
        self.rng = random.Random(seed)
        self.offset = 0  # the next phase goes on with the hosts after the last one that reported
        self.sent = self.changed_in_all = 0
        self.reset()

    def reset(self) -> None:
        self.latencies: list[float] = []
        self.errors = 0
        self.changed = 0

    async def send(self, conn: Conn, k: int) -> None:
        i = (self.offset + k) % self.hosts
        if self.rng.random() < self.changing:
            self.epoch[i] += 1
            self.changed += 1
        epoch = self.epoch[i]
        cached = self.bodies.get(i)
        if cached is not None and cached[0] == epoch:
            body = cached[1]
        else:
            body = msgspec.json.encode({"name": f"host-{i:06d}", "stats": report_stats(i, epoch)})
            self.bodies[i] = (epoch, body)
        t = time.perf_counter()
        status, _ = await conn.request("POST", "/v1/resource-stats", body)
        self.latencies.append(time.perf_counter() - t)
        self.errors += status != 200

    def figures(self, sent: int, seconds: float) -> dict[str, Any]:
        self.offset += sent
        self.sent += sent
        self.changed_in_all += self.changed
        return {"reports": sent, "per_s": round(sent / seconds, 1), "changed": self.changed, "errors": self.errors,
                "p50_ms": round(percentile(self.latencies, 0.5) * 1000, 2),
                "p99_ms": round(percentile(self.latencies, 0.99) * 1000, 2)}


# ------------------------------------------------------------------------------------------- in process


def in_process(args: argparse.Namespace) -> dict[str, Any]:
    """What a report costs below HTTP: two replicas on one SQLite file (two workers), every host reporting once
    from ``--concurrency`` threads: its figures unchanged, each written as a touch (``Replica.report``); unchanged
    again, taken in memory and written together as the service does (``Replica.heartbeat``, a flush every
    LIVENESS_DELAY); then changed (a record write each). Process CPU per report (both replicas, the writer, the
    feed), and how many reports share one transaction."""
    import threading

    from gantt.config import Config
    from gantt.model import HostReport
    from gantt.replication.replica import LIVENESS_DELAY, TOUCH_FRACTION, Replica
    from gantt.store.sqlite import SQLiteStore

    def send(replica: Replica, reports: list[tuple[str, dict[str, Any]]], lock: threading.Lock,
             taking: bool) -> None:
        while True:
            with lock:
                if not reports:
                    return
                name, stats = reports.pop()
            if not taking:
                replica.update_resource_stats(name, stats)
                continue
            report = HostReport.of(name, stats)  # as the service does: a repeat is taken, anything else written
            batch = replica.report_batch(report)
            if not replica.heartbeat(report):
                replica.write(batch)

    def flush_every(replica: Replica, stop: threading.Event) -> None:
        while not stop.wait(LIVENESS_DELAY):  # the service's timer
            replica.flush_liveness()

    config = Config.from_dict({"DEFAULT": {"service_down_time": 6.0}})
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="gantt-bench-mixed-") as tmp:
        url = f"sqlite:///{tmp}/gantt.sqlite"
        writes, other = SQLiteStore(url), SQLiteStore(url)
        a, b = Replica(writes, config).start(), Replica(other, config).start()
        try:
            for start in range(0, args.hosts, args.batch):
                a.report_many([HostReport.of(f"host-{i:06d}", report_stats(i, 0))
                               for i in range(start, min(args.hosts, start + args.batch))])
            b.sync()
            # identical: each written as a touch (Replica.report, the library's call); taken: the service's path
            # (Replica.heartbeat, written together every LIVENESS_DELAY); changed: each written as a record
            for name, epoch, taking in (("identical", 0, False), ("identical_taken", 0, True), ("changed", 1, True)):
                time.sleep(6.0 * TOUCH_FRACTION + 0.1)  # past the interval within which a touch writes nothing
                reports = [(f"host-{i:06d}", report_stats(i, epoch)) for i in range(args.hosts)]
                groups, batches, touches = writes.groups, writes.batches, a.touches
                lock = threading.Lock()
                stop = threading.Event()
                flusher = threading.Thread(target=flush_every, args=(a, stop))
                cpu, wall = time.process_time(), time.perf_counter()
                flusher.start()
                threads = [threading.Thread(target=send, args=(a, reports, lock, taking))
                           for _ in range(args.concurrency)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                stop.set()
                flusher.join()
                a.flush_liveness()
                b.sync()  # the other worker has applied every one
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                out[name] = {"reports_per_s": round(args.hosts / wall), "cpu_us_per_report":
                             round(cpu / args.hosts * 1e6, 1), "touches": a.touches - touches,
                             "reports_per_transaction": round(args.hosts / max(1, writes.groups - groups), 2),
                             "batches_per_transaction": round((writes.batches - batches)
                                                              / max(1, writes.groups - groups), 2)}
        finally:
            a.close()
            b.close()
    return out


# ------------------------------------------------------------------------------------------------ main


_HOT_ROUTES = ("/v1/select_destinations", "/v1/allocations/{consumer}", "/v1/resource-stats")
_BUCKET = re.compile(r'^gantt_http_request_seconds_bucket\{(.*)\} (\S+)$', re.M)
SHARE_WAIT = 6.0  # seconds after which every worker's figures are in any worker's /metrics (shared every few s)


def server_latency(port: int) -> dict[str, dict[str, float]]:
    """The server's own latency histograms of the hot routes, summed over the workers: route -> bucket -> count."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10.0, headers={"Connection": "close"}).text
    out: dict[str, dict[str, float]] = {}
    for labels, value in _BUCKET.findall(text):
        route = re.search(r'route="([^"]+)"', labels)
        bound = re.search(r'le="([^"]+)"', labels)
        if route and bound and route.group(1) in _HOT_ROUTES:
            buckets = out.setdefault(route.group(1), {})
            buckets[bound.group(1)] = buckets.get(bound.group(1), 0.0) + float(value)
    return out


def latency_over(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Per hot route, the requests of a phase and the share the server took longer than 10, 25, 50, 100 ms over
    (from arrival to the end of its answer): beside the client's latency, what the server's own waits were."""
    out: dict[str, Any] = {}
    for route, buckets in after.items():
        delta = {bound: n - before.get(route, {}).get(bound, 0.0) for bound, n in buckets.items()}
        total = delta.get("+Inf", 0.0)
        if total > 0:  # the buckets' bounds are seconds, as str() spells them ("0.025")
            over = {f"over_{ms}ms": round(1 - delta.get(str(ms / 1000), total) / total, 4) for ms in (10, 25, 50, 100)}
            out[route] = {"requests": int(total), **over}
    return out


def phase(name: str, args: argparse.Namespace, port: int, placer: Placer | None, reporter: Reporter | None,
          pids: dict[str, int]) -> dict[str, Any]:
    for stream in (placer, reporter):
        if stream is not None:
            stream.reset()
    latency_before = server_latency(port)
    report_rate = args.hosts / args.period
    before = {k: cpu_seconds(pid) for k, pid in pids.items()}
    waited = cpu_wait_seconds(pids["server"])
    client = time.process_time()  # the load generator: one process drives both streams, and may be what limits
    started = time.perf_counter()

    async def both() -> list[tuple[int, float]]:
        streams = []
        if placer is not None:
            streams.append(paced(args.rate, args.max_requests, args.duration, args.concurrency, "127.0.0.1", port,
                                 placer.send))
        if reporter is not None:
            streams.append(paced(report_rate, args.max_requests, args.duration, args.report_connections,
                                 "127.0.0.1", port, reporter.send))
        return list(await asyncio.gather(*streams))

    with Sampler(pids["server"]) if args.profile else contextlib.nullcontext() as sampler:
        results = asyncio.run(both())
    cpu = {k: round(cpu_seconds(pid) - before[k], 3) for k, pid in pids.items()}
    cpu["client"] = round(time.process_time() - client, 3)
    out: dict[str, Any] = {"phase": name, "seconds": round(time.perf_counter() - started, 3), "cpu_s": cpu,
                           "server_cpu_wait_s": round(cpu_wait_seconds(pids["server"]) - waited, 3),
                           "load": load()}
    if placer is not None:
        out["placements"] = placer.figures(*results[0])
    if reporter is not None:
        out["reports"] = reporter.figures(*results[-1])
    if sampler is not None:  # the server's processes, sampled through the phase (py-spy: gantt.bench.profiling)
        out["profile"] = sampler.summary
    time.sleep(SHARE_WAIT)
    out["server_latency"] = latency_over(latency_before, server_latency(port))
    print(json.dumps(out), file=sys.stderr)
    return out


def prime(args: argparse.Namespace, port: int, reporter: Reporter) -> dict[str, Any]:
    """``--prime``: every host reports once, one per request, at the phases' report rate, before they start: the
    servers have then seen each host's last report, as in a cloud that has run for a period (registration alone
    leaves every host's first report of a phase its first one). Counted with the phases' reports and touches."""
    sent, seconds = asyncio.run(paced(args.hosts / args.period, args.hosts, 2.0 * args.period + 60.0,
                                      args.report_connections, "127.0.0.1", port, reporter.send))
    out = reporter.figures(sent, seconds)
    reporter.reset()
    return out


def run(args: argparse.Namespace, tmp: Path, store_url: str, pids: dict[str, int]) -> dict[str, Any]:
    config = {"filter_scheduler": {"shuffle_best_same_weighed_hosts": True}, "scheduler": {"max_attempts": 1}}
    server = ServerProcess(store_url, workers=args.workers, config=config, workdir=tmp)
    held: list[str] = []
    try:
        server.start(timeout=180)
        bench_http._use_uvloop()
        assert server.proc is not None
        pids = {"server": server.proc.pid, **pids}
        reg = asyncio.run(register(server.port, args.hosts, args.batch))
        bench_http.wait_replicas(server.url, args.workers, args.hosts, timeout=300)
        placer = Placer(args.hold)
        reporter = Reporter(args.hosts, args.changing, args.seed)
        asyncio.run(paced(args.rate, 300, 3.0, args.concurrency, "127.0.0.1", server.port, placer.send))  # warm-up
        primed = prime(args, server.port, reporter) if args.prime else None
        # What the server spends doing nothing (the feed followers' polls, the workers sharing their metrics): at a
        # low rate it is a large part of the CPU per request, so the figures are also given without it.
        idle_from = cpu_seconds(server.proc.pid)
        time.sleep(5.0)
        idle = (cpu_seconds(server.proc.pid) - idle_from) / 5.0
        phases = [phase("placements", args, server.port, placer, None, pids),
                  phase("reports", args, server.port, None, reporter, pids),
                  phase("mixed", args, server.port, placer, reporter, pids)]
        held = list(placer.held)
        time.sleep(6.0)  # each worker shares its counters every few seconds: let the last ones arrive
        counted = bench_http.scrape_workers(server.url, args.workers)
        touches = round(sum(w.get("gantt_report_touches_total", 0.0) for w in counted.values()))
    finally:
        server.stop()
    with open_store(store_url, create=False) as store:
        snap = store.snapshot()
    problems = audit(snap)
    stored = {a.consumer_uuid for a in snap.allocations}
    alone, reports, mixed = phases
    per_report = reports["cpu_s"]["server"] / max(1, reports["reports"]["reports"])
    per_placement = alone["cpu_s"]["server"] / max(1, alone["placements"]["placed"])
    net_report = (reports["cpu_s"]["server"] - idle * reports["seconds"]) / max(1, reports["reports"]["reports"])
    net_placement = (alone["cpu_s"]["server"] - idle * alone["seconds"]) / max(1, alone["placements"]["placed"])
    mixed_reports = mixed["reports"]["reports"]
    result: dict[str, Any] = {
        "reports_per_s": {"alone": reports["reports"]["per_s"], "mixed": mixed["reports"]["per_s"],
                          "target": round(args.hosts / args.period, 1)},
        "placements_per_s": {"alone": alone["placements"]["per_s"], "mixed": mixed["placements"]["per_s"],
                             "target": args.rate},
        "placement_latency_ms": {"alone": {"p50": alone["placements"]["p50_ms"], "p99": alone["placements"]["p99_ms"]},
                                 "mixed": {"p50": mixed["placements"]["p50_ms"], "p99": mixed["placements"]["p99_ms"]}},
        "report_latency_ms": {"alone": {"p50": reports["reports"]["p50_ms"], "p99": reports["reports"]["p99_ms"]},
                              "mixed": {"p50": mixed["reports"]["p50_ms"], "p99": mixed["reports"]["p99_ms"]}},
        "server_cpu_ms": {
            "per_report": round(per_report * 1000, 3),
            # a placement's figure includes the release that follows it once --hold allocations are held
            "per_placement": round(per_placement * 1000, 3),
            "per_placement_mixed": round((mixed["cpu_s"]["server"] - per_report * mixed_reports) * 1000
                                         / max(1, mixed["placements"]["placed"]), 3),
            "idle_per_s": round(idle * 1000, 1),
            "per_report_net_of_idle": round(net_report * 1000, 3),
            "per_placement_net_of_idle": round(net_placement * 1000, 3),
        },
        # reports that repeated the host's last one, and those the server wrote as touches (or, within a sixth of
        # service_down_time of the last written one, not at all)
        "touches": {"reports": reporter.sent, "changed": reporter.changed_in_all,
                    "identical": reporter.sent - reporter.changed_in_all, "touches": touches},
        "registration": reg,
        "primed": primed,
        "phases": phases,
        "audit": {"overcommitted": len(problems), "acknowledged_missing": sum(1 for c in held if c not in stored),
                  "allocations": len(snap.allocations), "revision": snap.revision},
    }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/mixed.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--period", type=float, default=60.0, help="seconds between two reports of one host")
    parser.add_argument("--changing", type=float, default=0.1,
                        help="share of reports whose figures moved since the host's last one")
    parser.add_argument("--rate", type=float, default=1000.0, help="target placements per second")
    parser.add_argument("--hold", type=int, default=5000,
                        help="allocations held before each placement is followed by a release")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per phase")
    parser.add_argument("--max-requests", type=int, default=1_000_000, help="at most this many per stream and phase")
    parser.add_argument("--concurrency", type=int, default=32, help="connections placing")
    parser.add_argument("--report-connections", type=int, default=16, help="connections reporting")
    parser.add_argument("--workers", type=int, default=2, help="gantt serve --workers")
    parser.add_argument("--batch", type=int, default=500, help="reports per registration request")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--etcd", action="store_true", help="a throwaway 3-member etcd cluster instead of SQLite")
    parser.add_argument("--in-process", action="store_true",
                        help="measure a report's cost below HTTP instead (two replicas, one SQLite file; see "
                             "in_process): --hosts reports from --concurrency threads, identical then changed")
    parser.add_argument("--json", action="store_true", help="compact JSON")
    parser.add_argument("--prime", action="store_true",
                        help="every host reports once, one per request, before the phases (a period's worth)")
    parser.add_argument("--profile", action="store_true",
                        help="sample the server through each phase (py-spy) and print its top functions per phase; "
                             "the sampler takes CPU of its own, so read the figures of such a run for proportions")
    args = parser.parse_args(argv)
    if args.hosts < 1 or args.period <= 0 or args.rate <= 0 or args.duration <= 0 or not 0 <= args.changing <= 1:
        parser.error("--hosts, --period, --rate and --duration must be positive, --changing within 0..1")
    summary: dict[str, Any] = {
        "benchmark": "mixed",
        "command": "python bench/mixed.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "cpu_model": cpu_model(), "cpus": os.cpu_count(), "load_before": load(),
        "store": "etcd, 3 members" if args.etcd else "sqlite (WAL, synchronous=FULL, group commit)",
        "hosts": args.hosts,
    }
    if args.in_process:
        unused = [f"--{d.replace('_', '-')}" for d in ("etcd", "period", "changing", "rate", "hold", "duration",
                                                         "max_requests", "report_connections", "workers", "seed")
                  if getattr(args, d) != parser.get_default(d)]
        if unused:
            parser.error(f"--in-process takes --hosts, --concurrency and --batch only, not {', '.join(unused)}")
        summary.update(concurrency=args.concurrency, in_process=in_process(args))
        summary["load_after"] = load()
        print(json.dumps(summary, indent=None if args.json else 2))
        return 0
    summary.update(period_s=args.period, changing=args.changing, workers=args.workers, rate=args.rate)
    with tempfile.TemporaryDirectory(prefix="gantt-bench-mixed-") as tmp:
        cluster = None
        try:
            pids: dict[str, int] = {}
            if args.etcd:
                sys.path.insert(0, str(_HERE.parent))
                from tests.etcd.cluster import LocalCluster

                cluster = LocalCluster(Path(tmp))
                cluster.start_all()
                store_url = cluster.url(f"/bench-{uuid.uuid4().hex[:8]}")
                pids = {f"etcd{i}": m.proc.pid for i, m in enumerate(cluster.members) if m.proc is not None}
            else:
                store_url = f"sqlite:///{tmp}/gantt.sqlite"
            summary.update(run(args, Path(tmp), store_url, pids))
        finally:
            if cluster is not None:
                cluster.close()
    summary["load_after"] = load()
    print(json.dumps(summary, indent=None if args.json else 2))
    audited = summary["audit"]
    return 0 if audited["overcommitted"] == 0 and audited["acknowledged_missing"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
