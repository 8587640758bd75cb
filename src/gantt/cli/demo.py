"""``gantt demo``: a real service on a temporary store, a few hundred hosts, a concurrent burst of placements.

Everything goes through the HTTP API with the public client, exactly as a deployment would use it.
"""

from __future__ import annotations

import asyncio
import random
import signal
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gantt.client import AsyncSchedulerClient, SchedulerClient
from gantt.model import NoValidHost

console = Console()

ZONES = ("az1", "az2", "az3")
WANTED_FILTERS = ["ComputeFilter", "AvailabilityZoneFilter", "AggregateInstanceExtraSpecsFilter",
                  "AggregateMultiTenancyIsolation", "ComputeCapabilitiesFilter", "ImagePropertiesFilter",
                  "ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter"]
FLAVORS: list[tuple[dict[str, Any], float]] = [
    ({"name": "m1.small", "vcpus": 1, "memory_mb": 2048, "root_gb": 20}, 0.45),
    ({"name": "m1.medium", "vcpus": 2, "memory_mb": 4096, "root_gb": 40}, 0.30),
    ({"name": "m1.large", "vcpus": 4, "memory_mb": 8192, "root_gb": 80}, 0.17),
    ({"name": "g1.gpu", "vcpus": 8, "memory_mb": 32768, "root_gb": 100,
      "extra_specs": {"aggregate_instance_extra_specs:gpu": "true"}}, 0.08),
]
PROJECTS = ("acme", "globex", "initech", "umbrella")


def _filters() -> tuple[list[str], list[str]]:
    from gantt.compute.filters import FILTERS

    return [f for f in WANTED_FILTERS if f in FILTERS], [f for f in WANTED_FILTERS if f not in FILTERS]


def _store_url(workdir: str, kind: str) -> tuple[str, str | None]:
    if kind == "sqlite":
        try:
            import gantt.store.sqlite  # noqa: F401
        except ImportError:
            return "memory://", "the SQLite store is not available in this build: using memory:// instead"
        return f"sqlite:///{workdir}/gantt-demo.sqlite", None
    return "memory://", None


def _host_stats(i: int, rng: random.Random) -> dict[str, Any]:
    large = i % 4 == 0
    return {"vcpus": 64 if large else 32, "memory_mb": 262144 if large else 131072,
            "local_gb": 4000 if large else 2000, "vcpus_used": 0, "memory_mb_used": 0, "local_gb_used": 0,
            "cpu_allocation_ratio": 2.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
            "hypervisor_type": "QEMU", "hypervisor_version": 8002000, "host_ip": f"10.{i // 250}.{i % 250}.10",
            "supported_instances": [["x86_64", "kvm", "hvm"]], "num_io_ops": rng.randint(0, 3)}


def _topology(n: int) -> tuple[list[str], dict[str, list[str]], list[dict[str, Any]]]:
    names = [f"compute-{i:04d}" for i in range(n)]
    by_zone: dict[str, list[str]] = {zone: names[i::len(ZONES)] for i, zone in enumerate(ZONES)}
    gpu_hosts = by_zone["az2"][: max(2, n // 20)]
    acme_hosts = by_zone["az3"][: max(2, n // 10)]
    aggregates = [{"id": zone, "name": zone, "hosts": hosts, "metadata": {"availability_zone": zone}}
                  for zone, hosts in by_zone.items()]
    aggregates.append({"id": "gpu", "name": "gpu-nodes", "hosts": gpu_hosts, "metadata": {"gpu": "true"}})
    aggregates.append({"id": "acme-dedicated", "name": "acme-dedicated", "hosts": acme_hosts,
                       "metadata": {"filter_tenant_id": "acme"}})
    return names, by_zone, aggregates


def _request(rng: random.Random) -> dict[str, Any]:
    flavor = rng.choices([f for f, _ in FLAVORS], weights=[w for _, w in FLAVORS])[0]
    spec: dict[str, Any] = {"flavor": flavor, "project_id": rng.choice(PROJECTS), "user_id": "demo"}
    if flavor["name"] == "g1.gpu":
        spec["availability_zone"] = "az2"
    elif rng.random() < 0.7:
        spec["availability_zone"] = rng.choice(ZONES)
    return spec


async def _burst(url: str, specs: list[dict[str, Any]], concurrency: int, progress: Progress
                 ) -> tuple[list[tuple[dict[str, Any], Any]], list[float], float]:
    task = progress.add_task("placing", total=len(specs))
    results: list[tuple[dict[str, Any], Any]] = []
    latencies: list[float] = []
    semaphore = asyncio.Semaphore(concurrency)
    async with AsyncSchedulerClient(url, max_connections=concurrency) as client:
        async def one(spec: dict[str, Any]) -> None:
            async with semaphore:
                start = time.perf_counter()
                try:
                    outcome: Any = (await client.select_destinations(spec))[0][0]
                except NoValidHost as exc:
                    outcome = exc
                latencies.append(time.perf_counter() - start)
                results.append((spec, outcome))
                progress.advance(task)

        start = time.perf_counter()
        await asyncio.gather(*(one(spec) for spec in specs))
        elapsed = time.perf_counter() - start
    return results, latencies, elapsed


# Why the burst's rate is not the README's HTTP benchmark figure (printed beside it).
RATE_NOTE = ("not the README's benchmark figure (bench/http_api.py: over 3,000/s): this burst goes through the "
             "Python client (httpx, JSON objects) in this one process, on the same cores as a single server "
             "worker, and its burst includes the warm-up; the benchmark sends pre-built raw HTTP requests "
             "to 2 workers for a fixed time")


def run_demo(*, hosts: int = 300, requests: int = 1000, concurrency: int = 32, store: str = "sqlite",
             seed: int = 42, stay: bool = False) -> int:
    """``stay``: once done, keep the service (and its live view) up until Ctrl-C."""
    from gantt.cli.server_process import ServerProcess
    from gantt.cli.terminal import explanation_table

    began = time.perf_counter()
    rng = random.Random(seed)
    enabled, missing = _filters()
    with tempfile.TemporaryDirectory(prefix="gantt-demo-") as workdir:
        url, note = _store_url(workdir, store)
        if note:
            console.print(f"[yellow]note[/]: {note}")
        if missing:
            console.print(f"[yellow]note[/]: filters not in this build, left out: {', '.join(missing)}")
        config = {"filter_scheduler": {"enabled_filters": enabled, "host_subset_size": 2,
                                       "shuffle_best_same_weighed_hosts": True}}
        with console.status(f"starting [bold]gantt serve[/] on {url}"):
            server = ServerProcess(url, config=config, workdir=workdir).start()
        try:
            console.print(f"[green]●[/] gantt serve (pid {server.proc.pid if server.proc else '?'}) on "
                          f"{server.url}, store {url}, filters: {', '.join(enabled)}")
            console.print(f"[green]●[/] live view: {server.url}/ui/"
                          + ("" if stay else " (gantt demo --stay keeps it up once the demo is done)"))
            names, by_zone, aggregates = _topology(hosts)
            client = SchedulerClient(server.url)
            with _progress() as progress:
                task = progress.add_task("registering hosts", total=len(names))
                for start in range(0, len(names), 50):
                    chunk = names[start:start + 50]
                    client.update_resource_stats_many([(name, _host_stats(start + i, rng))
                                                       for i, name in enumerate(chunk)])
                    progress.advance(task, len(chunk))
                task = progress.add_task("aggregates", total=len(aggregates))
                for aggregate in aggregates:
                    client.update_aggregate(aggregate)
                    progress.advance(task)
            console.print(f"[green]●[/] {len(names)} hosts in {len(ZONES)} zones; aggregates: "
                          + ", ".join(f"{a['name']} ({len(a['hosts'])} hosts, "
                                      f"{', '.join(f'{k}={v}' for k, v in a['metadata'].items())})"
                                      for a in aggregates))

            specs = [_request(rng) for _ in range(requests)]
            with _progress() as progress:
                results, latencies, elapsed = asyncio.run(_burst(server.url, specs, concurrency, progress))
            _show_results(client, results, latencies, elapsed, by_zone, concurrency)

            probe = {"flavor": {"name": "g1.gpu", "vcpus": 8, "memory_mb": 32768, "root_gb": 100,
                                "extra_specs": {"aggregate_instance_extra_specs:gpu": "true"}},
                     "project_id": "globex", "availability_zone": "az2"}
            ranked = client.candidates(probe, limit=5)
            _show_candidates(ranked)

            impossible = {"flavor": {"name": "g1.gpu", "vcpus": 8, "memory_mb": 32768, "root_gb": 100,
                                     "extra_specs": {"aggregate_instance_extra_specs:gpu": "true"}},
                          "project_id": "globex", "availability_zone": "az1"}
            if "AggregateInstanceExtraSpecsFilter" not in enabled:
                impossible["flavor"] = {"name": "huge", "vcpus": 4096, "memory_mb": 2048, "root_gb": 10}
            try:
                client.select_destinations(impossible)
                console.print("[red]expected a NoValidHost[/]")
            except NoValidHost as exc:
                console.print(Panel.fit(
                    f"select_destinations({_describe(impossible)}) → HTTP 409 NoValidHost\n[dim]{exc.message}[/]",
                    title="why nothing fits", border_style="red"))
                if exc.explanation is not None:
                    console.print(explanation_table(exc.explanation, "filter by filter"))
            client.close()
            if stay:
                _stay(server)
        finally:
            status = server.stop()
            server.close()
        console.print(f"[green]●[/] server stopped (exit status {status}); demo took "
                      f"{time.perf_counter() - began:.1f} s")
    return 0


def _stay(server: Any) -> None:
    """Wait for Ctrl-C while the service runs (it is in a session of its own: the terminal's Ctrl-C reaches only
    this process, which then stops it)."""
    console.print(f"[green]●[/] the service stays up: open {server.url}/ui/ (the live view); Ctrl-C to stop it")
    # Python leaves SIGINT ignored when it started ignored (a job started in the background by a script, CI's
    # runner): the Ctrl-C this promises must reach it whatever the parent did
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        while server.proc is not None and server.proc.poll() is None:
            time.sleep(0.5)
        console.print("[red]the service stopped by itself[/]")
    except KeyboardInterrupt:
        console.print()


def _progress() -> Progress:
    return Progress(TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console)


def _describe(spec: dict[str, Any]) -> str:
    flavor = spec.get("flavor", {})
    return f"{flavor.get('name')} ({flavor.get('vcpus')} vCPU) in {spec.get('availability_zone', 'any zone')}"


def _show_results(client: SchedulerClient, results: list[tuple[dict[str, Any], Any]], latencies: list[float],
                  elapsed: float, by_zone: dict[str, list[str]], concurrency: int) -> None:
    placed: Counter[str] = Counter()
    flavors: dict[str, Counter[str]] = defaultdict(Counter)
    failed: Counter[str] = Counter()
    for spec, outcome in results:
        zone = spec.get("availability_zone", "any")
        if isinstance(outcome, NoValidHost):
            reason = outcome.explanation.reason if outcome.explanation else "?"
            failed[f"{zone}: {reason}"] += 1
            continue
        placed[outcome.availability_zone or "?"] += 1
        flavors[outcome.availability_zone or "?"][spec["flavor"]["name"]] += 1
    hosts = client.hosts()
    usage: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for h in hosts:
        cpu, ram = h.inventories.get("VCPU"), h.inventories.get("MEMORY_MB")
        row = usage[h.availability_zone or "?"]
        if cpu:
            row[0] += cpu.capacity - cpu.free
            row[1] += cpu.capacity
        if ram:
            row[2] += ram.capacity - ram.free
            row[3] += ram.capacity
    ok = sum(placed.values())
    ordered = sorted(latencies)
    p50 = statistics.median(ordered) * 1000 if ordered else 0.0
    p99 = ordered[int(len(ordered) * 0.99) - 1] * 1000 if ordered else 0.0
    console.print(f"[green]●[/] {ok} of {len(results)} requests placed in {elapsed:.2f} s: "
                  f"{len(results) / elapsed:,.0f}/s through the HTTP client, {concurrency} concurrent; "
                  f"latency p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    console.print(f"[dim]  that rate is {RATE_NOTE}[/]")
    table = Table(title="where they landed", title_justify="left")
    for column in ("zone", "hosts", "instances", "small/medium/large/gpu", "vCPU used", "RAM used"):
        table.add_column(column, justify="left" if column == "zone" else "right")
    for zone in sorted(by_zone):
        cpu_used, cpu_cap, ram_used, ram_cap = usage[zone]
        table.add_row(zone, str(len(by_zone[zone])), str(placed[zone]),
                      "/".join(str(flavors[zone][f["name"]]) for f, _ in FLAVORS),
                      f"{cpu_used:,.0f} of {cpu_cap:,.0f} ({cpu_used / cpu_cap:.0%})" if cpu_cap else "-",
                      f"{ram_used / ram_cap:.0%} of {ram_cap / 1024:,.0f} GiB" if ram_cap else "-")
    if failed:
        table.caption = "NoValidHost: " + ", ".join(f"{k} ×{v}" for k, v in sorted(failed.items()))
        table.caption_justify = "left"
    console.print(table)


def _show_candidates(ranked: Any) -> None:
    weighers = sorted({name for c in ranked.candidates for name in c.weights if c.weights[name]})
    table = Table(title="dry run (gantt select --dry-run): best 5 nodes for a g1.gpu in az2, with per-weigher "
                        "weights", title_justify="left")
    for column in ("#", "host", "zone", "weight", *weighers):
        table.add_column(column, justify="left" if column in ("host", "zone") else "right")
    for i, c in enumerate(ranked.candidates, 1):
        table.add_row(str(i), c.host, c.availability_zone or "", f"{c.weight:.3f}",
                      *(f"{c.weights.get(w, 0.0):.3f}" for w in weighers))
    console.print(table)
