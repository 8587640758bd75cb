"""Placements and host reports through the HTTP API of a real ``gantt serve`` on a temporary SQLite file.

    python bench/http_api.py --hosts 10000 --concurrency 32 --workers 2 --json

``--etcd local`` serves on a throwaway 3-member etcd cluster on this machine instead (``--etcd etcd://h:p,…``: that
cluster), a fresh prefix per run: one instance as ``gantt serve --store etcd://…`` runs it, HTTP included, beside
bench/cluster.py's replicas driven in process; the members' CPU per placement is printed too.

Phases (each bounded in count and time; the run stops by itself):
1. register ``--hosts`` hosts through ``POST /v1/resource-stats/batch`` (batches of ``--batch``): batched reports/s;
2. ``--single-reports`` reports one by one (``POST /v1/resource-stats``) from ``--concurrency`` connections;
3. placements: ``--concurrency`` keep-alive connections each post ``select_destinations`` in a loop for
   ``--duration`` seconds (or ``--placements`` in all). When the allocations held would pass ``--keep`` of the
   cloud's capacity, the oldest are released (``DELETE /v1/allocations/{consumer}``) to keep room;
4. the store file is audited (no node over capacity) and every worker's conflict counters are read.

Beside each rate it prints the server's CPU per single report and per placement (its process tree's, from /proc):
on a shared machine the rates follow the load, the CPU per operation much less. The CPU model and the load
average before and after are printed too.

Every claim is durable (SQLite WAL, synchronous=FULL) before its 200 answer. The load generator is raw asyncio
HTTP/1.1 over loopback (keep-alive, pre-built request bytes, uvloop when installed) so that as little of the two
cores as possible goes to the client; ``--clients`` runs it in several processes.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path and its name would shadow the stdlib's ``http``.
if sys.path and sys.path[0] and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import re
import statistics
import tempfile
import time
import uuid
from collections import deque
from typing import Any

import msgspec

from gantt.bench.cloud import FLAVOR, HOST_DISK_GB, HOST_RAM_MB, HOST_VCPUS, host_stats
from gantt.bench.profiling import Sampler
from gantt.bench.scripts import cpu_model
from gantt.cli.server_process import ServerProcess
from gantt.replication.audit import audit
from gantt.store.etcd import EtcdStore
from gantt.store.sqlite import SQLiteStore

__all__ = ["FLAVOR", "HOST_DISK_GB", "HOST_RAM_MB", "HOST_VCPUS", "host_stats"]  # the HTTP benches' cloud


# ------------------------------------------------------------------------------------------ HTTP/1.1 client


class Conn:
    """One keep-alive HTTP/1.1 connection; requests are sent one at a time."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        if self.writer is None:
            await self.open()
        assert self.reader is not None and self.writer is not None
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        self.writer.write(head + body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        status = int(raw[9:12])
        match = _LENGTH.search(raw)
        length = int(match.group(1)) if match else 0
        data = await self.reader.readexactly(length) if length else b""
        if _CLOSE.search(raw):
            self.close()
        return status, data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


_LENGTH = re.compile(rb"(?i)\r\ncontent-length:\s*(\d+)")
_CLOSE = re.compile(rb"(?i)\r\nconnection:\s*close")
_SELECTIONS = msgspec.json.Decoder()


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ---------------------------------------------------------------------------------------------- phases


async def register(host: str, port: int, hosts: int, batch: int, concurrency: int) -> dict[str, Any]:
    now = time.time()
    bodies = [msgspec.json.encode({"reports": [{"name": f"host-{i:06d}", "stats": host_stats(i, now)}
                                               for i in range(start, min(hosts, start + batch))]})
              for start in range(0, hosts, batch)]
    queue: deque[bytes] = deque(bodies)
    errors = 0

    async def run() -> None:
        nonlocal errors
        conn = Conn(host, port)
        while queue:
            status, _ = await conn.request("POST", "/v1/resource-stats/batch", queue.popleft())
            errors += status != 200
        conn.close()

    start = time.perf_counter()
    await asyncio.gather(*(run() for _ in range(min(concurrency, 4, len(bodies)))))
    elapsed = time.perf_counter() - start
    return {"reports": hosts, "batch": batch, "seconds": round(elapsed, 3), "per_s": round(hosts / elapsed),
            "errors": errors}


async def single_reports(host: str, port: int, hosts: int, count: int, concurrency: int,
                         duration: float) -> dict[str, Any]:
    done = errors = 0
    latencies: list[float] = []
    deadline = time.perf_counter() + duration

    async def run(k: int) -> None:
        nonlocal done, errors
        conn = Conn(host, port)
        i = k
        while done < count and time.perf_counter() < deadline:
            body = msgspec.json.encode({"name": f"host-{i % hosts:06d}",
                                        "stats": {"vcpus_used": 0, "num_io_ops": i % 5, "current_workload": 0}})
            t = time.perf_counter()
            status, _ = await conn.request("POST", "/v1/resource-stats", body)
            latencies.append(time.perf_counter() - t)
            done += 1
            errors += status != 200
            i += concurrency
        conn.close()

    start = time.perf_counter()
    await asyncio.gather(*(run(k) for k in range(concurrency)))
    elapsed = time.perf_counter() - start
    return {"reports": done, "seconds": round(elapsed, 3), "per_s": round(done / elapsed), "errors": errors,
            "p50_ms": round(_percentile(latencies, 0.5) * 1000, 2),
            "p99_ms": round(_percentile(latencies, 0.99) * 1000, 2)}


async def placements(host: str, port: int, concurrency: int, duration: float, count: int, keep: int,
                     seed: int) -> dict[str, Any]:
    body = msgspec.json.encode({"flavor": FLAVOR, "project_id": "bench", "user_id": "bench"})
    held: deque[str] = deque()
    latencies: list[float] = []
    release_latencies: list[float] = []
    statuses: dict[int, int] = {}  # of the placements
    release_statuses: dict[int, int] = {}
    started = 0
    deadline = time.perf_counter() + duration

    async def run() -> None:
        nonlocal started
        conn = Conn(host, port)
        while started < count and time.perf_counter() < deadline:
            if len(held) > keep:
                consumer = held.popleft()
                t = time.perf_counter()
                status, _ = await conn.request("DELETE", f"/v1/allocations/{consumer}")
                release_latencies.append(time.perf_counter() - t)
                release_statuses[status] = release_statuses.get(status, 0) + 1
                continue
            started += 1
            t = time.perf_counter()
            status, data = await conn.request("POST", "/v1/select_destinations", body)
            latencies.append(time.perf_counter() - t)
            statuses[status] = statuses.get(status, 0) + 1
            if status == 200:
                held.append(_SELECTIONS.decode(data)["selections"][0][0]["consumer_uuid"])
        conn.close()

    start = time.perf_counter()
    await asyncio.gather(*(run() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    ok = statuses.get(200, 0)
    return {"requests": len(latencies), "placed": ok, "seconds": round(elapsed, 3), "per_s": round(ok / elapsed),
            "p50_ms": round(_percentile(latencies, 0.5) * 1000, 2),
            "p99_ms": round(_percentile(latencies, 0.99) * 1000, 2),
            "releases": len(release_latencies),
            "release_p50_ms": round(_percentile(release_latencies, 0.5) * 1000, 2) if release_latencies else None,
            "statuses": {str(k): v for k, v in sorted(statuses.items())},
            "release_statuses": {str(k): v for k, v in sorted(release_statuses.items())}, "held": list(held)}


def _client_proc(args: tuple[Any, ...], out: Any) -> None:
    _use_uvloop()
    out.put(asyncio.run(placements(*args)))


def _use_uvloop() -> None:
    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:  # pragma: no cover - uvloop is a dependency, but the stdlib loop works too
        pass


def drive(host: str, port: int, clients: int, concurrency: int, duration: float, count: int, keep: int,
          ) -> dict[str, Any]:
    """Placements from ``clients`` load-generator processes (1: in this process)."""
    if clients <= 1:
        return asyncio.run(placements(host, port, concurrency, duration, count, keep, 0))
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    per = max(1, concurrency // clients)
    procs = [ctx.Process(target=_client_proc, args=((host, port, per, duration, count // clients,
                                                     keep // clients, k), out)) for k in range(clients)]
    for p in procs:
        p.start()
    parts = [out.get(timeout=duration + 120) for _ in procs]
    for p in procs:
        p.join()
    merged: dict[str, Any] = {"requests": sum(p["requests"] for p in parts),
                              "placed": sum(p["placed"] for p in parts),
                              "seconds": max(p["seconds"] for p in parts),
                              "releases": sum(p["releases"] for p in parts)}
    merged["per_s"] = round(merged["placed"] / merged["seconds"])
    # per-process percentiles cannot be merged exactly; the worst process's figure is the honest one
    merged["p50_ms"] = max(p["p50_ms"] for p in parts)
    merged["p99_ms"] = max(p["p99_ms"] for p in parts)
    for name in ("statuses", "release_statuses"):
        counts: dict[str, int] = {}
        for p in parts:
            for k, v in p[name].items():
                counts[k] = counts.get(k, 0) + v
        merged[name] = counts
    merged["held"] = [c for p in parts for c in p["held"]]
    return merged


def cpu_seconds(root: int) -> float:
    """User + system CPU of ``root`` and its descendants (Linux /proc; 0 elsewhere)."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        times[pid] = (int(fields[11]) + int(fields[12])) / tick
    total = 0.0
    for pid, t in times.items():
        p = pid
        while p > 1:
            if p == root:
                total += t
                break
            p = parents.get(p, 1)
    return total


def thread_cpu(root: int) -> dict[int, dict[int, float]]:
    """CPU seconds of each thread of each child process of ``root`` (the workers of ``gantt serve --workers N``):
    a worker's thread whose id is the process's is its event loop; the rest are its feed follower, SQLite writer
    and handler threads."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    out: dict[int, dict[int, float]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) != root:
            continue
        threads: dict[int, float] = {}
        for task in (entry / "task").glob("[0-9]*"):
            try:
                tf = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            threads[int(task.name)] = (int(tf[11]) + int(tf[12])) / tick
        out[int(entry.name)] = threads
    return out


def split_cpu(before: dict[int, dict[int, float]], after: dict[int, dict[int, float]]) -> list[dict[str, Any]]:
    """Per worker: CPU seconds in a phase, of its event loop (main thread) and of its three busiest other threads."""
    workers = []
    for pid, threads in sorted(after.items()):
        old = before.get(pid, {})
        spent = {tid: t - old.get(tid, 0.0) for tid, t in threads.items()}
        total = sum(spent.values())
        if total < 0.05:
            continue  # the resource tracker, a supervisor's helper
        others = sorted((t for tid, t in spent.items() if tid != pid), reverse=True)
        workers.append({"pid": pid, "cpu_s": round(total, 2), "loop_s": round(spent.get(pid, 0.0), 2),
                        "busiest_threads_s": [round(t, 2) for t in others[:3]],
                        "rest_s": round(sum(others[3:]), 2)})
    return workers


_METRIC = re.compile(r'^(gantt_[a-z_]+)\{([^}]*)\}\s+([0-9.eE+-]+)$')


def scrape_workers(url: str, workers: int, tries: int = 200) -> dict[str, dict[str, float]]:
    """Each worker's counters, by its ``worker`` label: any worker answers /metrics for all of them, once each
    has shared its figures (within seconds of its start), so ask until every worker is in one answer."""
    import httpx

    seen: dict[str, dict[str, float]] = {}
    for _ in range(tries):
        try:
            text = httpx.get(f"{url}/metrics", timeout=5.0, headers={"Connection": "close"}).text
        except httpx.HTTPError:
            continue
        seen = {}
        for line in text.splitlines():
            m = _METRIC.match(line)
            if not m:
                continue
            labels = m.group(2)
            worker = re.search(r'worker="([^"]+)"', labels)
            level = re.search(r'level="([^"]+)"', labels)
            key = m.group(1) + (f".{level.group(1)}" if level else "")
            if "_bucket" in key or "reason=" in labels or not worker:  # no worker: the cloud's figures, once
                continue
            figures = seen.setdefault(worker.group(1), {})
            figures[key] = figures.get(key, 0.0) + float(m.group(3))
        if len(seen) >= workers:
            break
        time.sleep(0.1)
    return seen


# ------------------------------------------------------------------------------------------------ main


def run_once(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gantt-bench-http-") as tmp:
        db = Path(tmp) / "gantt.sqlite"
        config: dict[str, Any] = {"scheduler": {"max_attempts": args.max_attempts}}
        fs: dict[str, Any] = {}
        if args.subset:
            fs["host_subset_size"] = args.subset
        if args.shuffle:
            fs["shuffle_best_same_weighed_hosts"] = True
        if fs:
            config["filter_scheduler"] = fs
        if args.threads:
            config["tuning"] = {"threads": args.threads}
        url = f"{args.etcd_base}/bench-http-{uuid.uuid4().hex[:8]}" if args.etcd else f"sqlite:///{db}"
        server = ServerProcess(url, workers=args.workers, config=config, workdir=tmp)
        try:
            server.start(timeout=120)
            _use_uvloop()
            host, port = "127.0.0.1", server.port
            reg = asyncio.run(register(host, port, args.hosts, args.batch, args.concurrency))
            wait_replicas(server.url, args.workers, args.hosts)
            assert server.proc is not None
            report_cpu = cpu_seconds(server.proc.pid)
            profiles: dict[str, Any] = {}
            with Sampler(server.proc.pid) if args.profile else contextlib.nullcontext() as sampler:
                single = asyncio.run(single_reports(host, port, args.hosts, args.single_reports, args.concurrency,
                                                    args.duration))
            if sampler is not None:
                profiles["single_reports"] = sampler.summary
            # Server CPU per report: less sensitive to a busy machine than the rate, which the load caps.
            single["server_cpu_ms"] = round((cpu_seconds(server.proc.pid) - report_cpu) * 1000
                                            / max(1, single["reports"]), 3)
            before = scrape_workers(server.url, args.workers)
            capacity = args.hosts * HOST_VCPUS
            keep = int(capacity * args.keep)
            asyncio.run(placements(host, port, args.concurrency, 5.0, args.warmup, keep, 1))  # warm caches
            # the server is a child of this process: the client's share is the rest of this process tree
            server_cpu, all_cpu = cpu_seconds(server.proc.pid), cpu_seconds(os.getpid())
            etcd_cpu = sum(cpu_seconds(pid) for pid in args.etcd_pids)
            threads_before = thread_cpu(server.proc.pid)
            with Sampler(server.proc.pid) if args.profile else contextlib.nullcontext() as sampler:
                placed = drive(host, port, args.clients, args.concurrency, args.duration, args.placements, keep)
            if sampler is not None:
                profiles["placements"] = sampler.summary
            server_cpu = cpu_seconds(server.proc.pid) - server_cpu
            etcd_cpu = sum(cpu_seconds(pid) for pid in args.etcd_pids) - etcd_cpu
            by_worker = split_cpu(threads_before, thread_cpu(server.proc.pid))
            # a local etcd cluster's members are children of this process too: theirs is etcd's, not the client's
            client_cpu = cpu_seconds(os.getpid()) - all_cpu - server_cpu - etcd_cpu
            after = scrape_workers(server.url, args.workers)
            held = placed.pop("held")
        finally:
            server.stop()
        with EtcdStore(url, budget=30, timeout=10) if args.etcd else SQLiteStore(url) as store:
            snap = store.snapshot()
        problems = audit(snap)
        stored = {a.consumer_uuid for a in snap.allocations}
        lost = [c for c in held if c not in stored]

        def delta(key: str) -> float:
            return sum(after.get(pid, {}).get(key, 0.0) - before.get(pid, {}).get(key, 0.0) for pid in after)

        result = {
            "placements_per_s": placed["per_s"],
            "latency_ms": {"p50": placed["p50_ms"], "p99": placed["p99_ms"]},
            "placements": placed,
            "conflicts": {"store": delta("gantt_claim_conflicts_total.store"),
                          "local": delta("gantt_claim_conflicts_total.local"),
                          "decisions": delta("gantt_decisions_total"),
                          "retry_rate": round(delta("gantt_claim_conflicts_total.store")
                                              / max(1.0, delta("gantt_decisions_total")), 4),
                          "workers_seen": len(after)},
            # how the placements and the CPU split between the workers (an uneven split of the connections shows
            # here), and within a worker between its event loop and its other threads
            "decisions_by_worker": {w: after[w].get("gantt_decisions_total", 0.0)
                                    - before.get(w, {}).get("gantt_decisions_total", 0.0) for w in sorted(after)},
            "cpu_by_worker": by_worker,
            # the releases run in the same window: their CPU is in the placements' figure
            "cpu_ms_per_placement": {"server": round(server_cpu * 1000 / max(1, placed["placed"]), 3),
                                     "client": round(client_cpu * 1000 / max(1, placed["placed"]), 3),
                                     **({"etcd": round(etcd_cpu * 1000 / max(1, placed["placed"]), 3)}
                                        if args.etcd_pids else {})},
            "server_cpu_ms_per_report": single["server_cpu_ms"],
            "reports_per_s": {"batched": reg["per_s"], "single": single["per_s"]},
            "reports": {"batched": reg, "single": single},
            "audit": {"overcommitted": len(problems), "acknowledged_missing": len(lost),
                      "allocations": len(snap.allocations), "revision": snap.revision,
                      "file_mb": round(sum(p.stat().st_size for p in Path(tmp).glob("gantt.sqlite*")) / 2**20, 1)},
        }
        if profiles:
            result["profile"] = profiles  # the server's top functions per phase (py-spy: gantt.bench.profiling)
        return result


def wait_replicas(url: str, workers: int, hosts: int, timeout: float = 60.0) -> None:
    """Until every worker's replica has every host (the feed is asynchronous across processes)."""
    import httpx

    deadline = time.monotonic() + timeout
    ready: set[int] = set()
    while time.monotonic() < deadline and len(ready) < workers:
        try:
            health = httpx.get(f"{url}/health", timeout=5.0, headers={"Connection": "close"}).json()
        except httpx.HTTPError:
            continue
        if health.get("hosts", 0) >= hosts:
            ready.add(health.get("pid", 0))
        else:
            time.sleep(0.05)


@contextlib.contextmanager
def _etcd(args: argparse.Namespace) -> Any:
    """``args.etcd_base`` (the cluster's URL without a prefix) and ``args.etcd_pids`` (its members' processes, when
    started here) for the runs; a local cluster is stopped after them."""
    args.etcd_base, args.etcd_pids = "", []
    if not args.etcd:
        yield
        return
    if args.etcd != "local":
        args.etcd_base = args.etcd.rstrip("/")
        yield
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.etcd.cluster, as bench/cluster.py uses
    from tests.etcd.cluster import LocalCluster

    with tempfile.TemporaryDirectory(prefix="gantt-bench-http-etcd-") as data:
        cluster = LocalCluster(Path(data))
        try:
            cluster.start_all()
            args.etcd_base = cluster.url("")
            args.etcd_pids = [m.proc.pid for m in cluster.members if m.proc is not None]
            yield
        finally:
            cluster.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=32, help="open connections placing at once")
    parser.add_argument("--workers", type=int, default=2, help="gantt serve --workers")
    parser.add_argument("--clients", type=int, default=1, help="load-generator processes")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of placements (and of single reports)")
    parser.add_argument("--placements", type=int, default=1_000_000, help="at most this many placement requests")
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--single-reports", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=500, help="reports per batched request")
    parser.add_argument("--keep", type=float, default=0.5, help="release once this share of vCPUs is held")
    parser.add_argument("--subset", type=int, default=0, help="[filter_scheduler] host_subset_size (0: default)")
    parser.add_argument("--shuffle", action="store_true",
                        help="[filter_scheduler] shuffle_best_same_weighed_hosts: several schedulers then spread "
                             "over equally good hosts instead of all taking the same first one")
    parser.add_argument("--threads", type=int, default=0,
                        help="[tuning] threads: decision threads per worker (0: the service's default)")
    parser.add_argument("--max-attempts", type=int, default=1, help="[scheduler] max_attempts (alternates)")
    parser.add_argument("--runs", type=int, default=1, help="repeat on a fresh server; figures are medians")
    parser.add_argument("--etcd", help="serve on etcd: 'local' (a throwaway 3-member cluster on loopback) or a "
                                       "cluster's etcd://h:p,… URL; default: a temporary SQLite file")
    parser.add_argument("--json", action="store_true", help="print only the JSON figures")
    parser.add_argument("--profile", action="store_true",
                        help="sample the server through each phase (py-spy) and print its top functions per phase; "
                             "the sampler takes CPU of its own, so read the figures of such a run for proportions")
    args = parser.parse_args(argv)

    load_before = [round(x, 2) for x in os.getloadavg()]
    runs = []
    with _etcd(args):
        for i in range(args.runs):
            result = run_once(args)
            runs.append(result)
            if not args.json:
                print(f"run {i + 1}: {result['placements_per_s']} placements/s, p50 {result['latency_ms']['p50']} "
                      f"ms, p99 {result['latency_ms']['p99']} ms, reports/s {result['reports_per_s']}, load "
                      f"{os.getloadavg()[0]:.2f}", file=sys.stderr)
    summary: dict[str, Any] = {
        "benchmark": "http",
        "command": "python bench/http_api.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "hosts": args.hosts, "workers": args.workers, "concurrency": args.concurrency, "clients": args.clients,
        "store": f"etcd ({args.etcd})" if args.etcd else "sqlite (WAL, synchronous=FULL, group commit)",
        "cpus": os.cpu_count(), "cpu_model": cpu_model(),
        "load_before": load_before, "load_after": [round(x, 2) for x in os.getloadavg()], "runs": len(runs),
        "placements_per_s": statistics.median(r["placements_per_s"] for r in runs),
        "latency_ms": {"p50": statistics.median(r["latency_ms"]["p50"] for r in runs),
                       "p99": statistics.median(r["latency_ms"]["p99"] for r in runs)},
        "conflict_retry_rate": statistics.median(r["conflicts"]["retry_rate"] for r in runs),
        "reports_per_s": {"batched": statistics.median(r["reports_per_s"]["batched"] for r in runs),
                          "single": statistics.median(r["reports_per_s"]["single"] for r in runs)},
        "cpu_ms_per_placement": {k: statistics.median(r["cpu_ms_per_placement"][k] for r in runs)
                                 for k in runs[0]["cpu_ms_per_placement"]},
        "server_cpu_ms_per_report": statistics.median(r["server_cpu_ms_per_report"] for r in runs),
        "overcommitted": max(r["audit"]["overcommitted"] for r in runs),
        "acknowledged_missing": max(r["audit"]["acknowledged_missing"] for r in runs),
        "per_run": runs,
    }
    print(json.dumps(summary, indent=None if args.json else 2))
    return 0 if summary["overcommitted"] == 0 and summary["acknowledged_missing"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
