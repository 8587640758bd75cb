"""CPU per placement through the service's ASGI app in one process, without sockets or uvicorn:

    .venv/bin/python bench/app_cpu.py --hosts 10000 --placements 3000 --rounds 3

One replica on a temporary SQLite file (every host registered with bench/http_api.py's report), the app of
``gantt serve`` over it (Guard, the hot routes, the handlers, decisions on the event loop up to
[tuning] loop_decision_rows, the claim handed to the store's writer thread, the feed follower), driven by
``--concurrency`` requests at once on one uvloop loop as a worker's connections would drive it. ``--release``
releases each placement after it (``DELETE /v1/allocations/{consumer}``). ``--rival RATE``: another worker, a
process of its own with its own replica of the same file, places and releases RATE times a second meanwhile, so
that the measured replica catches up with another process's commits (head reads, the feed's reads and applies)
as each of ``gantt serve --workers 2`` does; its CPU is not the measured process's.

Per round it prints the process's CPU per placement, the event loop thread's share, the writer thread's, the
claims per group commit and the context switches per placement (all threads), the cyclic collector's
collections per 1,000 operations by generation and its CPU per operation (``gc.callbacks``), and the process's
RSS and ``len(gc.garbage)`` after the round (a long run of rounds is a soak: both stay flat). ``--profile``: the
measured rounds under cProfile, every thread timed by its own CPU clock, as the top functions by own time and by
time under them, of all threads together and of each kind (the event loop, where the hot routes and decisions up
to loop_decision_rows run; the store's writer; the feed follower; the handler threads; the deciders): where a
placement's or a report's CPU goes. cProfile slows Python calls several-fold: read it for proportions, not for
the CPU figures of that run. Placements only: the hosts are kept up for the whole run (no report refreshes
them, so ``[DEFAULT] service_down_time`` is set past it). Lower run-to-run
noise than bench/http_api.py on a shared machine (no client process competing, no sockets), so an A/B of the code
below HTTP shows in fewer runs; the HTTP layer itself (uvicorn's parser and cycle, socket I/O) is not in it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import json
import multiprocessing
import os
import random
import statistics
import tempfile
import threading
import time
from typing import Any

import msgspec
import uvloop

from gantt.base.allocator import collect_less_often, freeze_long_lived
from gantt.bench.profiling import ThreadProfiles, merge_rows, stats_summary, subtract_rows
from gantt.bench.scripts import bench_script, cpu_model
from gantt.config import Config
from gantt.model import HostReport
from gantt.replication.replica import Replica
from gantt.service.app import create_app
from gantt.store.sqlite import SQLiteStore


def switches() -> int:
    """Context switches (voluntary and not) of every thread of this process so far."""
    total = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/status") as f:
                total += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except FileNotFoundError:  # a thread that ended meanwhile
            pass
    return total


class Collections:
    """The cyclic collector's work (``gc.callbacks``): collections by generation and their CPU, each timed by the
    clock of the thread it ran on (the one whose allocation crossed the threshold, whichever that was)."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.cpu = [0.0, 0.0, 0.0]
        self._started: dict[int, float] = {}
        gc.callbacks.append(self)

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        now = time.thread_time()
        if phase == "start":
            self._started[threading.get_ident()] = now
            return
        generation = info["generation"]
        self.count[generation] += 1
        self.cpu[generation] += now - self._started.pop(threading.get_ident(), now)

    def taken(self) -> tuple[list[int], float]:
        return list(self.count), sum(self.cpu)


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class Driver:
    """Requests to the app as ASGI calls: a scope, one body message, the answer collected."""

    def __init__(self, app: Any, body: bytes) -> None:
        self.app = app
        self.body = body
        self.headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode())]
        self.decoder = msgspec.json.Decoder()

    async def call(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
                 "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 50000), "scheme": "http", "method": method,
                 "root_path": "", "path": path, "raw_path": path.encode(), "query_string": b"",
                 "headers": self.headers if body else self.headers[:1]}
        sent = False
        status = 0
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:  # the answer never waits for a disconnect here
                await asyncio.Event().wait()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, send)
        return status, b"".join(chunks)

    async def place(self, count: int, concurrency: int, release: bool) -> None:
        left = count

        async def one() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                status, data = await self.call("POST", "/v1/select_destinations", self.body)
                if status != 200:
                    raise RuntimeError(f"select_destinations answered {status}: {data[:300]!r}")
                if release:
                    consumer = self.decoder.decode(data)["selections"][0][0]["consumer_uuid"]
                    status, data = await self.call("DELETE", f"/v1/allocations/{consumer}")
                    if status != 204:
                        raise RuntimeError(f"the release answered {status}: {data[:300]!r}")

        await asyncio.gather(*(one() for _ in range(concurrency)))

    async def report(self, bodies: list[bytes], concurrency: int, others: list[Driver] | None = None,
                     seed: int = 0) -> None:
        """Each body once, ``POST /v1/resource-stats``, ``concurrency`` at a time; with ``others`` (the other
        workers' apps), each to one of them all at random, as bench/mixed.py's shared connections spread them."""
        left = list(reversed(bodies))
        drivers = [self, *(others or [])]
        pick = random.Random(seed).choice

        async def one() -> None:
            while left:
                status, data = await pick(drivers).call("POST", "/v1/resource-stats", left.pop())
                if status != 200:
                    raise RuntimeError(f"resource-stats answered {status}: {data[:300]!r}")

        await asyncio.gather(*(one() for _ in range(concurrency)))


def rival(url: str, rate: float, options: dict[str, Any], ready: Any, halt: Any) -> None:
    """``--rival``: another worker's placements and releases on the same file, ``rate`` a second (each placement
    after the first 100 releases the oldest held), from a replica of its own that follows the feed."""
    from collections import deque

    http_api = bench_script(__file__, "http_api")
    replica = Replica(SQLiteStore(url), Config.from_dict(options)).start()
    spec = {"flavor": http_api.FLAVOR, "project_id": "rival", "user_id": "rival"}
    held: deque[str] = deque()
    ready.set()
    start, n = time.perf_counter(), 0
    try:
        while not halt.is_set():
            wait = start + n / rate - time.perf_counter()
            if wait > 0 and halt.wait(wait):
                break
            [[chosen, *_]] = replica.select_destinations(spec)
            held.append(chosen.consumer_uuid or "")
            if len(held) > 100:
                replica.release(held.popleft())
            n += 1
    finally:
        replica.close()


def first_bodies(hosts: int, changing: float, rounds: int, seed: int = 1) -> list[list[bytes]]:
    """``--reports --unprimed``: round r sends the r-th share of the hosts their first report since their
    registration (bench/mixed.py's, its figures at epoch 0), moved with probability ``changing``: bench/mixed.py's
    phases without ``--prime``, where no body can have been seen before."""
    mixed = bench_script(__file__, "mixed")
    rng = random.Random(seed)
    share = -(-hosts // rounds)
    return [[msgspec.json.encode({"name": f"host-{i:06d}",
                                  "stats": mixed.report_stats(i, 1 if rng.random() < changing else 0)})
             for i in range(r * share, min(hosts, (r + 1) * share))] for r in range(rounds)]


def report_bodies(hosts: int, changing: float, rounds: int, seed: int = 1) -> list[list[bytes]]:
    """``--reports``: for the priming round and each measured one, every host's report as bench/mixed.py sends
    it, its figures moved since its last one with probability ``changing`` (the rest repeat it exactly)."""
    mixed = bench_script(__file__, "mixed")
    rng, epoch = random.Random(seed), [0] * hosts
    out, last = [], [b""] * hosts
    for r in range(rounds + 1):
        for i in range(hosts):
            if r == 0 or rng.random() < changing:
                epoch[i] += 1
                last[i] = msgspec.json.encode({"name": f"host-{i:06d}", "stats": mixed.report_stats(i, epoch[i])})
        out.append(list(last))
    return out


class Profiles:
    """``--profile``: cProfile on the calling thread (the event loop) and on every thread started after this is
    built (the store's writer, the follower, the handler pool, the deciders), each timed by its thread's CPU
    clock; ``measure()`` around the measured rounds, whose rows alone (setup subtracted) ``summary`` sums."""

    def __init__(self) -> None:
        self.threads = ThreadProfiles().start()
        self.loop = cProfile.Profile(time.thread_time)
        self._rows: dict[str, Any] = {}

    @contextlib.contextmanager
    def measure(self) -> Any:
        before = self.threads.rows(stop=False)
        self.loop.enable()
        try:
            yield
        finally:
            self.loop.disable()
            after = self.threads.rows()
            self.loop.create_stats()
            self._rows = {name: subtract_rows(rows, before.get(name, {})) for name, rows in after.items()}
            self._rows["loop"] = self.loop.stats  # type: ignore[attr-defined]  # set by create_stats

    def summary(self, top: int = 25) -> dict[str, Any]:
        """Top functions of all threads together (``all``) and of each kind of thread, with the CPU seconds each
        kind spent under the profiler."""
        out = {"all": stats_summary(merge_rows(self._rows.values()), top)}
        for name, rows in sorted(self._rows.items()):
            summary = stats_summary(rows, top)
            if summary["seconds"] >= 0.001:  # threads that only waited say nothing
                out[name] = summary
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--placements", type=int, default=3000, help="per round")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--release", action="store_true", help="release each placement after it")
    parser.add_argument("--reports", type=float, default=None, metavar="CHANGING",
                        help="host reports instead of placements: every host's once per round (after one priming "
                             "round), CHANGING of them moved since the last, the rest repeating it")
    parser.add_argument("--rival", type=float, default=0.0, metavar="RATE",
                        help="another worker (a process of its own on the same file) places and releases RATE "
                             "times a second meanwhile")
    parser.add_argument("--unprimed", action="store_true",
                        help="with --reports: hosts registered with bench/mixed.py's report and no priming round; "
                             "each round sends a share of the hosts their first report since (bench/mixed.py "
                             "without --prime)")
    parser.add_argument("--workers", type=int, default=1,
                        help="replicas of the one SQLite file, each with its app (gantt serve --workers N: the "
                             "others follow each one's writes through the feed); each report to one at random")
    parser.add_argument("--profile", action="store_true",
                        help="the measured rounds under cProfile, per thread by its CPU: the top functions (slows "
                             "the run several-fold: read the proportions)")
    args = parser.parse_args(argv)
    http_api = bench_script(__file__, "http_api")
    options: dict[str, Any] = {"filter_scheduler": {"shuffle_best_same_weighed_hosts": True},
                               "scheduler": {"max_attempts": 1}}
    if args.reports is None:  # nothing reports: the hosts registered stay up however long the rounds take
        options["DEFAULT"] = {"service_down_time": 10 * 365 * 86400.0}
    config = Config.from_dict(options)
    profiles = Profiles() if args.profile else None  # before the store and replica start their threads
    load_before = os.getloadavg()[0]
    rounds: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="gantt-bench-app-") as tmp:
        stores = [SQLiteStore(f"sqlite:///{tmp}/gantt.sqlite") for _ in range(args.workers)]
        replicas = [Replica(one, config).start() for one in stores]
        replica = replicas[0]
        registered = bench_script(__file__, "mixed").report_stats if args.unprimed else http_api.host_stats
        try:
            for start in range(0, args.hosts, 1000):
                replica.report_many([HostReport.of(f"host-{i:06d}", registered(i, 0) if args.unprimed
                                                   else registered(i))
                                     for i in range(start, min(args.hosts, start + 1000))])
            for one in replicas:
                one.sync()
            if args.rival:
                spawn = multiprocessing.get_context("spawn")
                ready, halt = spawn.Event(), spawn.Event()
                other = spawn.Process(target=rival, args=(stores[0].url, args.rival, options, ready, halt), daemon=True)
                other.start()
                if not ready.wait(600):
                    raise RuntimeError("the rival worker did not start")
            body = msgspec.json.encode({"flavor": http_api.FLAVOR, "project_id": "bench", "user_id": "bench"})
            driver, *others = [Driver(create_app(one, config=config), body) for one in replicas]

            if args.reports is None:
                bodies = []
            elif args.unprimed:
                bodies = [[], *first_bodies(args.hosts, args.reports, args.rounds)]
            else:
                bodies = report_bodies(args.hosts, args.reports, args.rounds)

            async def run() -> None:
                await driver.place(300, args.concurrency, args.release)  # warm caches
                if bodies:
                    await driver.report(bodies[0], args.concurrency, others)
                    await asyncio.sleep(1.0)  # the repeats' liveness batch written
                collect_less_often()  # as a served worker: its collector settings, its frozen heap
                freeze_long_lived()
                collections = Collections()
                with profiles.measure() if profiles is not None else contextlib.nullcontext():
                    await rounds_of(collections)

            async def rounds_of(collections: Collections) -> None:
                for r in range(args.rounds):
                    counted, collected = collections.taken()
                    cpu, loop_cpu = time.process_time(), time.thread_time()
                    writer_cpu = sum(one.writer_cpu_seconds for one in stores)
                    groups, batches = sum(one.groups for one in stores), sum(one.batches for one in stores)
                    switched = switches()
                    if bodies:
                        await driver.report(bodies[r + 1], args.concurrency, others, seed=r + 1)
                        await asyncio.sleep(0.5)  # and their liveness batch (idle otherwise: ~1 ms of CPU)
                    else:
                        await driver.place(args.placements, args.concurrency, args.release)
                    operations = len(bodies[r + 1]) if bodies else args.placements
                    per = 1000 / operations
                    rounds.append({
                        "cpu_ms": round((time.process_time() - cpu) * per, 4),
                        "loop_ms": round((time.thread_time() - loop_cpu) * per, 4),
                        "writer_ms": round((sum(one.writer_cpu_seconds for one in stores) - writer_cpu) * per, 4),
                        "batches_per_group": round((sum(one.batches for one in stores) - batches)
                                                   / max(1, sum(one.groups for one in stores) - groups), 2),
                        "switches": round((switches() - switched) / operations, 2),
                        # per 1,000 operations: young, middle and full collections; the collector's CPU per op
                        **{f"gc{g}_per_1000": round((collections.count[g] - counted[g]) * per, 3) for g in range(3)},
                        "gc_ms": round((collections.taken()[1] - collected) * per, 4),
                        "rss_mb": round(rss_mb(), 1), "gc_garbage": len(gc.garbage)})

            uvloop.run(run())
        finally:
            if args.rival:
                halt.set()
                other.join(30)
            for one in replicas:
                one.close()
    print(json.dumps({
        "hosts": args.hosts, "placements_per_round": args.placements if args.reports is None else 0,
        "reports_changing": args.reports, "unprimed": args.unprimed, "workers": args.workers,
        "concurrency": args.concurrency,
        "release": args.release, "rival_per_s": args.rival, "rounds": rounds,
        "median": {key: statistics.median(r[key] for r in rounds) for key in rounds[0]},
        "load_average_1m_before": round(load_before, 2), "load_average_1m": round(os.getloadavg()[0], 2),
        "cpu": cpu_model(),
        **({"profile": profiles.summary(),
            "profiled": "cProfile slows Python calls several-fold: read the profile for its proportions, not the "
                        "CPU figures of this run"} if profiles is not None else {})}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
