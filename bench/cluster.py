"""Several schedulers on one 3-member etcd cluster, contended: ``python bench/cluster.py --instances 1,2,4 --json``.

What runs (design §4, "several schedulers on a 3-member etcd cluster"):
- A throwaway 3-member etcd cluster on this machine (loopback, data on disk under --data-dir), or ``--etcd URL``.
- ``--hosts`` nodes, of which only ``--free-hosts`` big ones have room: every instance competes for the same few.
- Each Gantt instance is a separate *process* (multiprocessing, spawn) holding a full Replica (snapshot + watch
  feed) and calling ``Replica.select_destinations`` from ``--threads`` client threads: the engine, claims and
  store path of a real instance, without the HTTP layer (bench/http_api.py measures that). With ``--workers N``
  an instance is N such processes, as ``gantt serve --workers N`` runs it (``Config.for_worker``: each worker
  its own replica and its share of the instance's subset slot); figures are then given per instance (its
  workers summed) and per process. ``--threads`` are the instance's callers, split among its workers as a
  served instance's connections are (``connections.Spread``): an instance of 2 workers is asked as much as one
  of 1 worker, not twice as much.
- Figures per instance count: placements/s, conflict retries (the engine's commit conflicts per request: the
  requests decided again), store-level claim conflicts, p50/p99 latency of select_destinations, and an audit of
  the store at the end (overcommit must be 0, every acknowledged claim in the store).
- CPU split over the load window: the etcd members (``/proc/<pid>/stat`` of the local cluster's processes), the
  Gantt instances (each process's own CPU time; its client threads run the decisions, so the load generator's
  own share is their loop only) and this driver process, with CPU milliseconds per placement, the CPU model and
  the load average before and after: on a shared machine, CPU per placement is the figure that travels. Per
  process too: each etcd member's and each instance's milliseconds per placement (``etcd_members_ms``,
  ``instance_ms``), and the cores the cluster and the instances kept busy.
- Several instances are deployed as several instances of one service would be: instance i of N has ``[gantt]
  subset_slot = i`` and ``subset_slots = N`` (``--no-spread``: all alike), so they prefer different hosts among
  Nova's best ``host_subset_size``.
- ``--profile``: every thread of each instance process under cProfile, timed by the thread's own CPU, read at the
  end of the load window: the top functions of all threads together and of each kind (``client``: decide, apply
  the claim, hand it to the committer; ``gantt-etcd-commit``: plan, encode, send the shared txn; the watch; the
  feed), summed over the instances' processes. cProfile slows Python calls several-fold: its proportions are the
  figure, not that run's rates.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / "src")]

from gantt.base.allocator import collect_less_often, keep_freed_memory  # noqa: E402
from gantt.bench.profiling import ThreadProfiles, merge_rows, stats_summary  # noqa: E402
from gantt.bench.scripts import cpu_model  # noqa: E402
from gantt.config import Config  # noqa: E402
from gantt.model import HostReport, HostStats, NoValidHost, StoreUnavailable  # noqa: E402
from gantt.replication.audit import audit  # noqa: E402
from gantt.replication.replica import Replica  # noqa: E402
from gantt.store.base import Batch  # noqa: E402
from gantt.store.etcd import EtcdStore  # noqa: E402

FLAVOR = {"name": "bench.small", "vcpus": 1, "memory_mb": 512, "root_gb": 5}


def make_config(seed: int, subset: int, slot: int = 0, slots: int = 1) -> Config:
    # Nova's default filters and every weigher; host_subset_size spreads concurrent schedulers over the best few,
    # and (unless --no-spread) each instance takes its pick among its own share of them ([gantt] subset_slot).
    return Config.from_dict({"filter_scheduler": {"host_subset_size": subset},
                             "gantt": {"seed": seed, "subset_slot": slot, "subset_slots": slots}})


def seed_hosts(url: str, hosts: int, free: int) -> None:
    """``hosts`` nodes: ``free`` big ones with room, the rest full (their report says everything is used)."""
    now = time.time()
    step = max(hosts // free, 1)
    with EtcdStore(url, budget=30, timeout=10) as store:
        batch: list[HostReport] = []
        for i in range(hosts):
            big = i % step == 0 and i // step < free
            vcpus, ram, disk = (128, 1_048_576, 20_000) if big else (32, 131_072, 2_000)
            stats = HostStats(vcpus=vcpus, vcpus_used=0 if big else vcpus, memory_mb=ram,
                              memory_mb_used=0 if big else ram, local_gb=disk, local_gb_used=0 if big else disk,
                              hypervisor_type="QEMU", hypervisor_version=8002000, cpu_allocation_ratio=1.0,
                              ram_allocation_ratio=1.0, disk_allocation_ratio=1.0,
                              supported_instances=[["x86_64", "kvm", "hvm"]])
            batch.append(HostReport(host=f"node{i:06d}", stats=stats, reported_at=now))
            if len(batch) == 250:
                store.commit(Batch(reports=batch))
                batch = []
        if batch:
            store.commit(Batch(reports=batch))


def instance(index: int, url: str, subset: int, slots: int, threads: int, duration: float, ready: Any, go: Any,
             results: Any, worker: int = 0, workers: int = 1, profile: bool = False) -> None:
    """One Gantt instance, or worker ``worker`` of an instance's ``workers`` processes (as ``gantt serve
    --workers N`` runs them: its own replica, its share of the instance's subset slot): a Replica in this process,
    ``threads`` clients calling select_destinations."""
    # The memory settings of a served instance (``gantt serve`` makes them in each worker before it loads).
    keep_freed_memory()
    collect_less_often()
    profiles = ThreadProfiles().start() if profile else None  # the threads the replica and the clients start
    store = EtcdStore(url)
    config = make_config(1000 + index * workers, subset, index % slots, slots).for_worker(worker, workers)
    replica = Replica(store, config).start()
    ready.release()
    go.wait()
    cpu0 = time.process_time()
    threads0 = thread_cpu()
    clients_cpu: list[float] = []
    latencies: list[float] = []
    outcomes = {"placed": 0, "no_valid_host": 0, "contention": 0, "unavailable": 0}
    lock = threading.Lock()
    stop_at = time.monotonic() + duration

    acknowledged: list[tuple[str, str]] = []

    def client() -> None:
        own0 = time.thread_time()
        mine: list[float] = []
        mine_acked: list[tuple[str, str]] = []
        local = dict.fromkeys(outcomes, 0)
        while time.monotonic() < stop_at:
            t0 = time.perf_counter()
            try:
                answer = replica.select_destinations({"flavor": FLAVOR, "project_id": "bench", "user_id": "bench"})
                claimed = answer[0][0]
                mine_acked.append((claimed.consumer_uuid or "", claimed.host))
                local["placed"] += 1
            except NoValidHost as exc:
                contention = exc.explanation is not None and exc.explanation.reason == "contention"
                local["contention" if contention else "no_valid_host"] += 1
            except StoreUnavailable:
                local["unavailable"] += 1
            mine.append(time.perf_counter() - t0)
        with lock:
            clients_cpu.append(time.thread_time() - own0)
            latencies.extend(mine)
            acknowledged.extend(mine_acked)
            for k, v in local.items():
                outcomes[k] += v

    started = time.monotonic()
    pool = [threading.Thread(target=client) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if not threads:  # an observer: follows the store (what one more instance costs before it places anything)
        time.sleep(max(stop_at - time.monotonic(), 0))
    elapsed = time.monotonic() - started
    cpu = time.process_time() - cpu0
    threads1 = thread_cpu()
    # The process's CPU by thread: the clients' own (they decide, and apply their own claims), then every other
    # thread by name over the same window (the committer, the watch, the feed, gRPC's threads in C).
    split: dict[str, float] = {"clients": sum(clients_cpu)}
    for tid, (name, used) in threads1.items():  # a thread started in the window (the committer) counts from 0
        split[name] = split.get(name, 0.0) + used - (threads0[tid][1] if tid in threads0 else 0.0)
    engine = replica.scheduler.engine.stats
    profile_rows = profiles.rows() if profiles is not None else None
    results.put({"profile_rows": profile_rows,
                 "index": index, "worker": worker, "elapsed": elapsed, "cpu_s": cpu, "acknowledged": acknowledged,
                 **outcomes, "latencies": latencies,
                 "commit_conflicts": engine.commit_conflicts, "local_claim_conflicts": engine.claim_conflicts,
                 "store": vars(store.stats), "resyncs": replica.resyncs, "threads_cpu_s": split})
    replica.stop()
    store.close()


def thread_cpu() -> dict[int, tuple[str, float]]:
    """This process's threads that are not the bench's clients: id -> (name, CPU seconds so far). Python's threads
    by their names (digits dropped), the others (gRPC's, in C) by the kernel's."""
    tick = os.sysconf("SC_CLK_TCK")
    named = {t.native_id: re.sub(r"^Thread-\d+ \((.*)\)$", r"\1", t.name) for t in threading.enumerate()}
    out: dict[int, tuple[str, float]] = {}
    for entry in os.listdir("/proc/self/task"):
        tid = int(entry)
        if named.get(tid) == "client":
            continue
        try:
            with open(f"/proc/self/task/{entry}/stat") as f:
                stat = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        fields = stat.rsplit(")", 1)[1].split()
        name = named.get(tid) or stat[stat.index("(") + 1:stat.rindex(")")]
        out[tid] = (re.sub(r"\d+$", "", name), (int(fields[11]) + int(fields[12])) / tick)
    return out


def proc_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes have used so far."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14 and 15 of stat)
    return total


def run(url: str, instances: int, args: argparse.Namespace, etcd_pids: list[int]) -> dict[str, Any]:
    t0 = time.monotonic()
    seed_hosts(url, args.hosts, args.free_hosts)
    seeded = time.monotonic() - t0
    ctx = mp.get_context("spawn")
    ready, go, results = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    slots = instances if args.spread and instances > 1 else 1
    # instance i's worker w (observers: one process each), with its share of the instance's ``--threads`` clients
    procs = [ctx.Process(target=instance, args=(i, url, args.subset, slots,
                                                share(args.threads, w, n) if i < instances else 0,
                                                args.duration, ready, go, results, w, n, args.profile),
                          daemon=True)
             for i in range(instances + args.observers)
             for n in [args.workers if i < instances else 1] for w in range(n)]
    for p in procs:
        p.start()
    t0 = time.monotonic()
    for _ in procs:
        if not ready.acquire(timeout=300):
            raise RuntimeError("an instance did not start")
    load_s = time.monotonic() - t0
    load_before = [round(x, 2) for x in os.getloadavg()]
    members0 = [proc_cpu([pid]) for pid in etcd_pids]
    driver0, wall0 = time.process_time(), time.monotonic()
    go.set()
    parts = [results.get(timeout=args.duration + 60) for _ in procs]
    members = [proc_cpu([pid]) - c0 for pid, c0 in zip(etcd_pids, members0, strict=True)]
    etcd_cpu, driver_cpu = sum(members), time.process_time() - driver0
    wall = time.monotonic() - wall0
    load_after = [round(x, 2) for x in os.getloadavg()]
    for p in procs:
        p.join(timeout=30)
    with EtcdStore(url, budget=30, timeout=10) as store:
        snap = store.snapshot()
    problems = audit(snap)
    held = {(a.consumer_uuid, a.host) for a in snap.allocations}
    missing = [c for part in parts for c, host in part["acknowledged"] if (c, host) not in held]
    instance_cpu = sum(p["cpu_s"] for p in parts if p["index"] < instances)
    observer_cpu = sum(p["cpu_s"] for p in parts if p["index"] >= instances)
    latencies = sorted(x for part in parts for x in part["latencies"])
    requests = len(latencies)
    placed = sum(p["placed"] for p in parts)
    elapsed = max(p["elapsed"] for p in parts)
    retries = sum(p["commit_conflicts"] for p in parts)
    store_conflicts = sum(p["store"]["claim_conflicts"] for p in parts)
    store_commits = sum(p["store"]["commits"] for p in parts)

    def per_placement(cpu: float) -> float | None:
        return round(cpu * 1000 / placed, 3) if placed else None

    def pct(q: float) -> float:
        return round(latencies[min(int(q * requests), requests - 1)] * 1000, 2) if requests else 0.0

    return {
        "instances": instances,
        "workers_per_instance": args.workers,
        "threads_per_instance": args.threads,
        "threads_per_process": [share(args.threads, w, args.workers) for w in range(args.workers)],
        "observers": args.observers,
        "hosts": args.hosts,
        "free_hosts": args.free_hosts,
        "duration_s": round(elapsed, 2),
        "requests": requests,
        "placements": placed,
        "placements_per_s": round(placed / elapsed, 1) if elapsed else 0.0,
        "placements_per_s_by_instance": [round(sum(p["placed"] for p in parts if p["index"] == i) / elapsed, 1)
                                         if elapsed else 0.0 for i in range(instances)],
        "conflict_retries": retries,
        "conflict_retry_rate": round(retries / max(requests, 1), 4),
        "store_claim_conflicts": store_conflicts,
        "store_conflict_rate": round(store_conflicts / max(store_conflicts + store_commits, 1), 4),
        "no_valid_host": sum(p["no_valid_host"] for p in parts),
        "gave_up_contention": sum(p["contention"] for p in parts),
        "unavailable": sum(p["unavailable"] for p in parts),
        "latency_ms": {"p50": pct(0.50), "p90": pct(0.90), "p99": pct(0.99), "max": pct(1.0)},
        "group_commits": sum(p["store"]["group_commits"] for p in parts),
        "group_refused": sum(p["store"]["group_refused"] for p in parts),
        "group_timing_ms": group_timing([p["store"] for p in parts]),
        "allocations_in_store": len(snap.allocations),
        "overcommit": len(problems),
        "acknowledged_missing": len(missing),
        "audit_problems": problems[:5],
        "cpu": {"window_s": round(wall, 2), "etcd_s": round(etcd_cpu, 2) if etcd_pids else None,
                "instances_s": round(instance_cpu, 2), "driver_s": round(driver_cpu, 2),
                "observers_s": round(observer_cpu, 2),
                "observer_ms_per_placement": per_placement(observer_cpu / args.observers) if args.observers else None,
                "etcd_ms_per_placement": per_placement(etcd_cpu) if etcd_pids else None,
                "instances_ms_per_placement": per_placement(instance_cpu),
                "total_ms_per_placement": per_placement(etcd_cpu + instance_cpu) if etcd_pids else None,
                # per process, ms per placement: each etcd member (the leader does most), each instance
                "etcd_members_ms": [per_placement(c) for c in members],
                "instance_ms": [per_placement(sum(p["cpu_s"] for p in parts if p["index"] == i))
                                for i in range(instances)],
                # with --workers: each process of each instance (instance-major)
                "process_ms": [per_placement(p["cpu_s"]) for p in sorted(parts, key=lambda p: (p["index"],
                                                                                             p["worker"]))
                               if p["index"] < instances],
                "cores_busy": round((etcd_cpu + instance_cpu) / wall, 2) if wall else None,
                # the instances' CPU by thread, ms per placement (summed over processes)
                "instance_threads_ms": {name: per_placement(sum(p["threads_cpu_s"].get(name, 0.0) for p in parts
                                                                if p["index"] < instances))
                                        for name in sorted({n for p in parts for n in p["threads_cpu_s"]})}},
        "load_before": load_before,
        "load_after": load_after,
        "seed_s": round(seeded, 2),
        "instance_load_s": round(load_s, 2),
        "watch_reconnects": sum(p["store"]["watch_reconnects"] for p in parts),
        "resyncs": sum(p["resyncs"] for p in parts),
        **({"profile": profile_summary([p["profile_rows"] for p in parts if p["index"] < instances]),
            "profiled": "cProfile slows Python calls several-fold: read the profile for its proportions, "
                        "not the rates of this run"} if args.profile else {}),
    }


def group_timing(stats: list[dict[str, Any]]) -> dict[str, float | None]:
    """Where a claim's commit waited, from the stores' counters (``EtcdStats``), in ms: per txn the committer
    sent, how long it held the txn back for claims on their way (``linger``) and its call to etcd (``call``: the
    round trip, and the interpreter lock taken back after it); per claim answered, its caller's wake-up until it
    ran again (``wake``). What the rest of a request's latency is: its decision, and its wait in the queue while
    the txn before it was in flight."""
    rounds = sum(s["group_rounds"] for s in stats)
    answered = sum(s["commits"] + s["claim_conflicts"] for s in stats)

    def per(name: str, n: int) -> float | None:
        return round(sum(s[name] for s in stats) * 1000 / n, 2) if n else None

    return {"linger": per("group_linger_s", rounds), "call": per("group_call_s", rounds),
            "wake": per("group_wake_s", answered)}


def share(threads: int, worker: int, workers: int) -> int:
    """Worker ``worker``'s part of an instance's ``threads`` clients, spread evenly over its ``workers``."""
    return threads // workers + (1 if worker < threads % workers else 0)


def profile_summary(parts: list[dict[str, Any]], top: int = 25) -> dict[str, Any]:
    """The instances' profiles (one per process, by thread name) as the top functions of all their threads
    together (``all``) and of each kind of thread: the clients (decide, apply their claim, wait), the committer,
    the watch, the feed."""
    names = sorted({name for part in parts for name in part})
    out = {"all": stats_summary(merge_rows(rows for part in parts for rows in part.values()), top)}
    for name in names:
        out[name] = stats_summary(merge_rows(part[name] for part in parts if name in part), top)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/cluster.py", description=__doc__.splitlines()[0])
    parser.add_argument("--instances", default="1,2,4", help="comma-separated instance counts (default 1,2,4)")
    parser.add_argument("--hosts", type=int, default=10000)
    parser.add_argument("--free-hosts", type=int, default=200, help="hosts with room (the contended few)")
    parser.add_argument("--threads", type=int, default=16,
                        help="client threads per instance, split among its workers (default 16)")
    parser.add_argument("--workers", type=int, default=1,
                        help="processes per instance, each a replica with its share of the instance's subset slot "
                             "(as `gantt serve --workers N`), each with its share of the instance's --threads")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of load per instance count")
    parser.add_argument("--subset", type=int, default=10, help="[filter_scheduler] host_subset_size")
    parser.add_argument("--etcd", help="use this cluster (etcd://h:p,…) instead of starting a local one")
    parser.add_argument("--data-dir", help="where the local cluster keeps its data (default: a temp dir)")
    parser.add_argument("--no-group", action="store_true",
                        help="commit each claim in its own txn (EtcdStore ?group=0); group commit is the default")
    parser.add_argument("--observers", type=int, default=0,
                        help="extra instances that only follow the store (their CPU: the cost of one more replica)")
    parser.add_argument("--group-workers", type=int,
                        help="shared txns in flight per instance (?group_workers=N, default 1)")
    parser.add_argument("--group-wait-ms", type=float,
                        help="how long a shared txn may wait for claims still on their way (?group_wait_ms=, "
                             "default 3; 0 sends at once)")
    parser.add_argument("--group-gap-ms", type=float,
                        help="stop waiting when no claim came for this long (?group_gap_ms=, default 1)")
    parser.add_argument("--no-spread", dest="spread", action="store_false",
                        help="every instance picks among the whole best host_subset_size; by default instance i "
                             "of N takes its own share of them ([gantt] subset_slot=i, subset_slots=N)")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile every thread of the instances' processes and print the top functions of "
                             "the load window, all threads and by kind (the profiler slows the run: proportions "
                             "only)")
    parser.add_argument("--json", action="store_true", help="print compact JSON")
    args = parser.parse_args(argv)
    counts = [int(x) for x in args.instances.split(",") if x.strip()]
    out: dict[str, Any] = {"benchmark": "cluster", "cpu": cpu_model(), "cpus": os.cpu_count(),
                           "group_commit": not args.no_group, "group_workers": args.group_workers,
                           "group_wait_ms": args.group_wait_ms, "group_gap_ms": args.group_gap_ms,
                           "spread": args.spread, "subset": args.subset, "runs": []}
    etcd_pids: list[int] = []
    cluster = None
    try:
        if args.etcd:
            base = args.etcd.rstrip("/")
        else:
            from tests.etcd.cluster import LocalCluster

            data = Path(args.data_dir or tempfile.mkdtemp(prefix="gantt-bench-etcd-"))
            cluster = LocalCluster(data)
            cluster.start_all()
            base = cluster.url("")
            etcd_pids = [m.proc.pid for m in cluster.members if m.proc is not None]
            out["etcd"] = {"members": 3, "data_dir": str(data)}
        for n in counts:
            query = "?group=0" if args.no_group else ""
            for name in ("group_workers", "group_wait_ms", "group_gap_ms"):
                if getattr(args, name) is not None:
                    query += ("&" if query else "?") + f"{name}={getattr(args, name)}"
            out["runs"].append(run(f"{base}/bench-{n}-{uuid.uuid4().hex[:8]}{query}", n, args, etcd_pids))
            print(json.dumps(out["runs"][-1]), file=sys.stderr)
    finally:
        if cluster is not None:
            cluster.close()
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
