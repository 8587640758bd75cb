"""Nova's own scheduler beside Gantt's, through Nova's RPC client and a real RabbitMQ, in one run (issue 33 item 6).

    V=~/.cache/gantt/nova-functional-nova-34.0.0-py311/bin/python
    $V bench/nova_rpc.py [--nodes 1000,10000] [--requests 10,3] [--seed 1] [--progress]

Runs in Nova's environment (nova 34, openstack-placement 16; Gantt from this checkout's ``src``). This process is
the conductor: it asks with Nova's ``nova.scheduler.rpcapi.SchedulerAPI`` exactly as the conductor does for a boot
(``return_objects`` and ``return_alternates``), and times each ``select_destinations`` call as the caller sees it
(wall clock, through the broker). Around it, started and stopped by this script:

- a throwaway RabbitMQ on loopback (tests/nova/rabbit.py: Debian's ``rabbitmq-server``, its own ports and files);
- Nova's databases, per size and scheduler (each its own world, so that what one's simulated computes write the
  other never reads): API, main and cell databases (SQLite, made by Nova's migrations), the cell's ``services`` and
  ``compute_nodes`` rows written in bulk by SQL (a row made by ``nova.objects`` once, then cloned), not by
  nova-compute, with their host mappings;
- per size, Placement 16 served on loopback (its WSGI app under a threaded server, as tests/placement runs it) on
  a fresh SQLite database, with one provider per compute node (VCPU, MEMORY_MB and DISK_GB inventories) written
  in bulk by SQL;
- per size, two scheduler processes, each started by its real command: Nova's ``nova-scheduler`` (its
  ``SchedulerManager``, HostManager, default filters and weighers, claiming in that Placement) and
  ``gantt nova-scheduler`` (``gantt.nova.manager.SchedulerManager`` on a SQLite store). Each listens on its own
  server queue (``scheduler.<host>``); the client addresses each with ``prepare(server=…)``.

Before measuring, every compute's (empty) instance list is cast to both schedulers twice, as nova-compute's
``sync_instance_info`` fanout does: from then on Nova's HostManager trusts the lists instead of querying each
host's instances per request. After each boot, a simulated nova-compute per scheduler updates the chosen node's row
(usage, free figures, ``updated_at``) and casts ``update_instance_info``: Nova 34 keeps no consumed host state
between requests, and without it would choose the same host every time.

The same request sequence (seeded flavors, one instance each) goes to both, interleaved request by request so that
both see the same background load. Nodes have distinct memory (so RAMWeigher orders them), equal CPU and disk, and
every seventh nova-compute service is disabled (ComputeFilter must drop it): the chosen host of every request, and
its alternates, are compared between the two (claims consume capacity in both, so a divergence would show in the
later choices).

Nova is configured with ``[scheduler] max_placement_results`` = the node count: at Nova's default (1000) Placement
would hand Nova only the first 1000 providers and Nova could not choose the hosts Gantt chooses from all of them
(``--nova-max-placement-results`` sets it otherwise). Printed: JSON with, per size and scheduler, p50/p99/mean of
the measured requests (the first request of each is reported apart, as ``first_ms``), the speedups, the agreement,
and the machine (CPU model, load averages before and after, date).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid as uuidlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
sys.path[:0] = [str(SRC), str(ROOT)]  # this checkout's Gantt, and tests/nova/rabbit.py's broker

from nova import monkey_patch  # noqa: E402 - Nova's threading backend, before the rest of Nova is imported

monkey_patch.patch(backend="threading")

from tests.nova import rabbit  # noqa: E402

from gantt.bench.scripts import cpu_model  # noqa: E402
from gantt.service import lifeline  # noqa: E402

PLACEMENT_SERVE = ROOT / "tests" / "placement" / "placement_serve.py"
FLAVORS = [(1, 512, 10), (2, 2048, 20), (4, 4096, 40)]  # vcpus, memory_mb, root_gb
NODE_VCPUS, NODE_DISK_GB, CPU_RATIO = 64, 2000, 4.0
BASE_MEMORY_MB, MEMORY_STEP_MB = 65536, 7  # distinct memory per node: RAMWeigher orders them, no ties
DISABLED_EVERY = 7
KINDS = ("nova", "gantt")
COMPUTE_VERSION = 72  # the nova-compute service version the fake computes report (see _template_rows)
NAMESPACE = uuidlib.UUID("6d0f8a7e-3c1b-4d0e-9a53-2b9f0c7e4a11")


def node_name(i: int) -> str:
    return f"cmp{i:05d}"


def node_uuid(i: int) -> str:
    return str(uuidlib.uuid5(NAMESPACE, node_name(i)))


def disabled(i: int) -> bool:
    return i % DISABLED_EVERY == 3


def node_memory(i: int) -> int:
    return BASE_MEMORY_MB + MEMORY_STEP_MB * i


# ------------------------------------------------------------------------------------------------ Nova's world


class Nova:
    """This process's Nova configuration (the conductor's) and the migrated templates: an API database, a main
    database, and a cell database holding one service and compute node made by ``nova.objects``."""

    def __init__(self, work: Path, transport_url: str) -> None:
        import nova.conf
        from nova import config, context, objects
        from nova.db import migration

        self.work = work
        self.transport_url = transport_url
        self.base_conf = work / "nova.conf"
        self.base_conf.write_text(
            "[DEFAULT]\n"
            f"transport_url = {transport_url}\n"
            f"state_path = {work}\n"
            "host = conductor\n"
            # the compute services' rows are written once and never heartbeat again
            "service_down_time = 86400\n"
            # Nova's scheduler at 10,000 nodes on a loaded machine answers after minutes, and its call monitor
            # (heartbeats while it works) lets the call time out at rpc_response_timeout there
            "rpc_response_timeout = 1800\n"
            "long_rpc_timeout = 1800\n"
            "[database]\n"
            f"connection = sqlite:///{work}/main.db\n"
            "[api_database]\n"
            f"connection = sqlite:///{work}/api.db\n"
            "[oslo_concurrency]\n"
            f"lock_path = {work}/locks\n")
        config.parse_args(["conductor", "--config-file", str(self.base_conf)], default_config_files=[])
        objects.register_all()
        migration.db_sync(database="api")
        migration.db_sync(database="main")
        self.api_template = work / "api-template.db"
        shutil.copy(work / "api.db", self.api_template)
        self.main_template = work / "main-template.db"
        shutil.copy(work / "main.db", self.main_template)
        self.cell_template = work / "cell-template.db"
        shutil.copy(work / "main.db", self.cell_template)
        ctxt = context.get_admin_context()
        mapping = objects.CellMapping(ctxt, uuid=str(uuidlib.uuid4()), name="template", transport_url=transport_url,
                                      database_connection=f"sqlite:///{self.cell_template}")
        mapping.create()
        with context.target_cell(ctxt, mapping) as cctxt:
            _template_rows(cctxt)
        mapping.destroy()
        self.conf = nova.conf.CONF

    def cells(self, tag: str, nodes: int, kinds: tuple[str, ...]) -> dict[str, World]:
        """One world per scheduler: its own API, main and cell databases, the cell holding ``nodes`` compute nodes
        and services (the same rows in each), so that what one scheduler's simulated computes write, the other
        never reads."""
        cell = self.work / f"cell-{tag}.db"
        shutil.copy(self.cell_template, cell)
        _clone_rows(cell, nodes)
        worlds = {}
        for kind in kinds:
            world = World(self.work, f"{kind}-{tag}", self.transport_url)
            shutil.copy(cell, world.cell_db)
            shutil.copy(self.api_template, world.api_db)
            shutil.copy(self.main_template, world.main_db)
            world.map_cell(nodes)
            worlds[kind] = world
        return worlds


class World:
    """One scheduler's Nova databases, and the nova-compute it does not have: after each boot it decides, the
    chosen node's row is updated as nova-compute's resource tracker updates it (usage, free figures, instance
    count, ``updated_at``) and the scheduler is told the host's instance (``update_instance_info``, as
    nova-compute casts it, here to that scheduler alone instead of the fanout)."""

    def __init__(self, work: Path, name: str, transport_url: str) -> None:
        self.name, self.transport_url = name, transport_url
        self.cell_db, self.api_db, self.main_db = (work / f"{name}-{db}.db" for db in ("cell", "api", "main"))
        self.instances: dict[str, int] = {}

    def map_cell(self, nodes: int) -> None:
        """The cell's mapping, and its hosts' (as ``nova-manage cell_v2 discover_hosts`` writes them): Nova's
        scheduler finds a host's instances through them."""
        now = _now()
        with contextlib.closing(sqlite3.connect(self.api_db)) as conn, conn:
            cursor = conn.execute("INSERT INTO cell_mappings (created_at, uuid, name, transport_url, "
                                  "database_connection, disabled) VALUES (?, ?, ?, ?, ?, 0)",
                                  (now, str(uuidlib.uuid5(NAMESPACE, self.name)), self.name, self.transport_url,
                                   f"sqlite:///{self.cell_db}"))
            conn.executemany("INSERT INTO host_mappings (created_at, cell_id, host) VALUES (?, ?, ?)",
                             [(now, cursor.lastrowid, node_name(i)) for i in range(nodes)])

    def conf(self) -> str:
        return (f"[database]\nconnection = sqlite:///{self.main_db}\n"
                f"[api_database]\nconnection = sqlite:///{self.api_db}\n")

    def boot(self, host: str, flavor: tuple[int, int, int], instance: str, scheduler: Scheduler) -> None:
        vcpus, memory_mb, disk_gb = flavor
        count = self.instances[host] = self.instances.get(host, 0) + 1
        with contextlib.closing(sqlite3.connect(self.cell_db)) as conn, conn:
            conn.execute("UPDATE compute_nodes SET vcpus_used = vcpus_used + ?, memory_mb_used = memory_mb_used + ?, "
                         "free_ram_mb = free_ram_mb - ?, local_gb_used = local_gb_used + ?, "
                         "free_disk_gb = free_disk_gb - ?, disk_available_least = disk_available_least - ?, "
                         "running_vms = ?, stats = ?, updated_at = ? WHERE host = ? AND deleted = 0",
                         (vcpus, memory_mb, memory_mb, disk_gb, disk_gb, disk_gb, count,
                          json.dumps({"num_instances": str(count)}), _now(), host))
        scheduler.instance_info(host, instance)


def _template_rows(cctxt: Any) -> None:
    """One service and one compute node made by nova.objects, so that every column is as Nova writes it; the bulk
    copies are clones of these two rows."""
    from nova import objects
    from nova.db.main import api as db

    service = objects.Service(cctxt, host=node_name(0), binary="nova-compute", topic="compute", report_count=1)
    service.create()
    # Computes of the version before OWNER_NOVA (73): with it, both schedulers require that trait on every node, and
    # Gantt's nodes get traits only from nova-compute through Gantt's Placement face, which this bench does not run
    # (its nodes are the cells' rows); Nova's Placement providers carry the trait anyway.
    db.service_update(cctxt, service.id, {"version": COMPUTE_VERSION})
    memory = node_memory(0)
    node = objects.ComputeNode(
        cctxt, host=node_name(0), hypervisor_hostname=node_name(0), uuid=node_uuid(0), vcpus=NODE_VCPUS,
        memory_mb=memory, local_gb=NODE_DISK_GB, vcpus_used=0, memory_mb_used=0, local_gb_used=0,
        free_ram_mb=memory, free_disk_gb=NODE_DISK_GB, disk_available_least=NODE_DISK_GB, current_workload=0,
        running_vms=0, hypervisor_type="QEMU", hypervisor_version=8002000, cpu_info="{}",
        cpu_allocation_ratio=CPU_RATIO, ram_allocation_ratio=1.0, disk_allocation_ratio=1.0,
        supported_hv_specs=[objects.HVSpec(arch="x86_64", hv_type="kvm", vm_mode="hvm")], stats={},
        host_ip="10.0.0.1", metrics="[]", service_id=service.id, pci_device_pools=objects.PciDevicePoolList(objects=[]))
    node.create()


def _ids(conn: sqlite3.Connection, table: str, names: tuple[str, ...]) -> dict[str, int]:
    """Placement's ids of its standard ``names`` in ``table`` (traits, resource classes), all of them or an error."""
    ids = dict(conn.execute(f"SELECT name, id FROM {table} WHERE name IN ({', '.join('?' * len(names))})",
                            names).fetchall())
    if len(ids) != len(names):
        raise RuntimeError(f"placement's standard {table} are not all in its database: {ids}")
    return ids

def _now() -> str:
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")


def _rows(conn: sqlite3.Connection, table: str) -> tuple[list[str], tuple[Any, ...]]:
    cursor = conn.execute(f"SELECT * FROM {table}")
    columns = [d[0] for d in cursor.description]
    [row] = cursor.fetchall()
    return columns, row


def _clone_rows(db: Path, nodes: int) -> None:
    """``nodes`` services and compute nodes, cloned from the template rows by SQL in one transaction: node i has
    its own name, uuid and memory; every DISABLED_EVERY-th service (from the 3rd) is disabled."""
    now = _now()
    start = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) - datetime.timedelta(seconds=60)
    created = start.strftime("%Y-%m-%d %H:%M:%S.%f")
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        s_cols, s_row = _rows(conn, "services")
        c_cols, c_row = _rows(conn, "compute_nodes")
        conn.execute("DELETE FROM compute_nodes")
        conn.execute("DELETE FROM services")
        services, computes = [], []
        for i in range(nodes):
            s = dict(zip(s_cols, s_row, strict=True))
            s.update(id=i + 1, host=node_name(i), uuid=str(uuidlib.uuid5(NAMESPACE, f"svc-{i}")), created_at=now,
                     updated_at=now, last_seen_up=now,
                     disabled=int(disabled(i)), disabled_reason="bench" if disabled(i) else None)
            services.append(tuple(s[c] for c in s_cols))
            c = dict(zip(c_cols, c_row, strict=True))
            memory = node_memory(i)
            # updated over the last minute, as nova-compute's periodic updates leave a cloud's rows
            updated = (start + datetime.timedelta(seconds=60 * i / nodes)).strftime("%Y-%m-%d %H:%M:%S.%f")
            c.update(id=i + 1, service_id=i + 1, host=node_name(i), hypervisor_hostname=node_name(i),
                     uuid=node_uuid(i), memory_mb=memory, free_ram_mb=memory, created_at=created, updated_at=updated)
            computes.append(tuple(c[k] for k in c_cols))
        conn.executemany(f"INSERT INTO services ({','.join(s_cols)}) VALUES ({','.join('?' * len(s_cols))})",
                         services)
        conn.executemany(f"INSERT INTO compute_nodes ({','.join(c_cols)}) "
                         f"VALUES ({','.join('?' * len(c_cols))})", computes)


# ------------------------------------------------------------------------------------------------ Placement


class Placement:
    """Placement 16 of this venv on a loopback port (tests/placement/placement_serve.py: its WSGI app under a
    threaded server), noauth2, its own SQLite file (made by Placement at start)."""

    def __init__(self, work: Path) -> None:
        self.dir = work
        work.mkdir(parents=True, exist_ok=True)
        self.db = work / "placement.sqlite"
        (work / "placement.conf").write_text(
            "[api]\nauth_strategy = noauth2\n"
            f"[placement_database]\nconnection = sqlite:///{self.db}\nsync_on_startup = True\n")
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        with open(work / "server.log", "ab") as log:
            self.proc = subprocess.Popen(
                lifeline.command([sys.executable, str(PLACEMENT_SERVE), str(work), str(self.sock.fileno())]),
                stdout=log, stderr=subprocess.STDOUT, pass_fds=(self.sock.fileno(),), start_new_session=True,
                env=env)
        self._wait()

    def _wait(self, timeout: float = 120.0) -> None:
        import urllib.request

        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"placement exited {self.proc.returncode}: {_tail(self.dir / 'server.log')}")
            with contextlib.suppress(OSError), urllib.request.urlopen(self.url + "/", timeout=5) as answer:
                if answer.status == 200:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"placement not up after {timeout:g} s: {_tail(self.dir / 'server.log')}")
            time.sleep(0.2)

    def _get(self, path: str) -> Any:
        import urllib.request

        request = urllib.request.Request(self.url + path, headers={
            "x-auth-token": "admin", "openstack-api-version": "placement 1.36", "accept": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.load(answer)

    def providers(self, nodes: int) -> None:
        """One root provider per compute node (its uuid, named by its nodename) with the inventories and traits
        nova-compute would report (OWNER_NOVA, which Nova 34's scheduler requires, and COMPUTE_STATUS_DISABLED on
        a disabled service's node), written by SQL in one transaction."""
        self._get("/traits?name=in:OWNER_NOVA")  # Placement writes the standard traits into its table at first use
        now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S")
        with contextlib.closing(sqlite3.connect(self.db)) as conn, conn:
            traits = _ids(conn, "traits", ("OWNER_NOVA", "COMPUTE_STATUS_DISABLED"))
            conn.executemany("INSERT INTO resource_provider_traits (resource_provider_id, trait_id, created_at, "
                             "updated_at) VALUES (?, ?, ?, ?)",
                             [(i + 1, traits[name], now, now) for i in range(nodes)
                              for name in ("OWNER_NOVA", "COMPUTE_STATUS_DISABLED")
                              if name == "OWNER_NOVA" or disabled(i)])
            classes = _ids(conn, "resource_classes", ("VCPU", "MEMORY_MB", "DISK_GB"))
            conn.executemany("INSERT INTO resource_providers (id, uuid, name, generation, root_provider_id, "
                             "parent_provider_id, created_at, updated_at) VALUES (?, ?, ?, 1, ?, NULL, ?, ?)",
                             [(i + 1, node_uuid(i), node_name(i), i + 1, now, now) for i in range(nodes)])
            inventories = []
            for i in range(nodes):
                memory = node_memory(i)
                for name, total, ratio in (("VCPU", NODE_VCPUS, CPU_RATIO), ("MEMORY_MB", memory, 1.0),
                                           ("DISK_GB", NODE_DISK_GB, 1.0)):
                    inventories.append((i + 1, classes[name], total, total, ratio, now, now))
            conn.executemany("INSERT INTO inventories (resource_provider_id, resource_class_id, total, reserved, "
                             "min_unit, max_unit, step_size, allocation_ratio, created_at, updated_at) "
                             "VALUES (?, ?, ?, 0, 1, ?, 1, ?, ?, ?)", inventories)

    def close(self) -> None:
        _stop(self.proc)
        self.sock.close()


# ------------------------------------------------------------------------------------------------ schedulers


class Scheduler:
    """One scheduler service process, started by its real command with the shared nova.conf and its own."""

    def __init__(self, kind: str, host: str, argv: list[str], work: Path, broker: rabbit.Broker) -> None:
        self.kind, self.host, self.broker = kind, host, broker
        self._api: Any = None
        self.log = work / f"{host}.log"
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        self.proc = subprocess.Popen(lifeline.command(argv), env=env, stdout=subprocess.DEVNULL,
                                     stderr=open(work / f"{host}.err", "ab"), start_new_session=True)  # noqa: SIM115

    def wait_ready(self, timeout: float) -> float:
        """Until the service consumes its server queue (its manager built, Gantt's first read of the cells done):
        the seconds that took."""
        started = time.monotonic()
        deadline = started + timeout
        while self.broker.consumers(f"scheduler.{self.host}") == 0:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} scheduler exited {self.proc.returncode}: {_tail(self.log)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.kind} scheduler not consuming after {timeout:g} s: {_tail(self.log)}")
            time.sleep(1.0)
        return time.monotonic() - started

    def client(self) -> Any:
        from nova.scheduler import rpcapi

        api = rpcapi.SchedulerAPI()
        api.client = api.client.prepare(server=self.host)
        return api

    def instance_info(self, host: str, instance: str) -> None:
        """nova-compute's ``update_instance_info`` cast after a build, to this scheduler's server queue."""
        from nova import context, objects

        if self._api is None:
            self._api = self.client()
        self._api.client.prepare(version="4.2").cast(
            context.get_admin_context(), "update_instance_info", host_name=host,
            instance_info=objects.Instance(uuid=instance, host=host, node=host))

    def stop(self) -> None:
        _stop(self.proc, sig=signal.SIGTERM)


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


# ------------------------------------------------------------------------------------------------ requests


def request_spec(flavor: tuple[int, int, int], instance_uuid: str) -> Any:
    """A boot's RequestSpec as the conductor sends it for one instance of ``flavor``."""
    from nova import objects

    vcpus, memory_mb, root_gb = flavor
    out = objects.RequestSpec(
        flavor=objects.Flavor(name=f"bench{vcpus}", flavorid=f"bench{vcpus}", id=vcpus, vcpus=vcpus,
                              memory_mb=memory_mb, root_gb=root_gb, ephemeral_gb=0, swap=0, extra_specs={}),
        num_instances=1, project_id="bench-project", user_id="bench-user", instance_uuid=instance_uuid,
        image=objects.ImageMeta.from_dict({"properties": {}}), is_bfv=False, ignore_hosts=None, force_hosts=None,
        force_nodes=None, scheduler_hints={}, instance_group=None, availability_zone=None,
        requested_destination=None, pci_requests=objects.InstancePCIRequests(requests=[]), numa_topology=None,
        requested_resources=[])
    return out


def sequence(requests: int, seed: int) -> list[tuple[tuple[int, int, int], str]]:
    rng = random.Random(seed)
    return [(rng.choice(FLAVORS), str(uuidlib.UUID(int=rng.getrandbits(128), version=4)))
            for _ in range(requests)]


def ask(api: Any, flavor: tuple[int, int, int], instance: str) -> tuple[float, Any]:
    """One select_destinations as the conductor makes it for a boot: (seconds, [hosts] or an error string)."""
    from nova import context

    ctxt = context.get_admin_context()
    spec = request_spec(flavor, instance)
    started = time.perf_counter()
    try:
        got = api.select_destinations(ctxt, spec, [instance], return_objects=True, return_alternates=True)
    except Exception as exc:  # NoValidHost or a transport error: recorded, and a disagreement if one-sided
        return time.perf_counter() - started, f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    seconds = time.perf_counter() - started
    [choices] = got
    return seconds, [f"{s.service_host}/{s.nodename}" for s in choices]


def percentile(values: list[float], q: float) -> float:
    """Nearest rank: with fewer than 100 samples, p99 is the largest."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def summary(seconds: list[float], first: float) -> dict[str, Any]:
    ms = [s * 1000 for s in seconds]
    return {"n": len(ms), "p50_ms": round(percentile(ms, 50), 3), "p99_ms": round(percentile(ms, 99), 3),
            "mean_ms": round(sum(ms) / len(ms), 3), "max_ms": round(max(ms), 3), "first_ms": round(first * 1000, 3)}


def agreement(nova: list[Any], gantt: list[Any]) -> dict[str, Any]:
    same_host = sum(1 for a, b in zip(nova, gantt, strict=True) if _chosen(a) is not None and _chosen(a) == _chosen(b))
    same_all = sum(1 for a, b in zip(nova, gantt, strict=True) if isinstance(a, list) and a == b)
    out: dict[str, Any] = {"requests": len(nova), "same_host": same_host, "same_host_and_alternates": same_all,
                           "nova_refused": sum(1 for a in nova if isinstance(a, str)),
                           "gantt_refused": sum(1 for b in gantt if isinstance(b, str))}
    differences = [{"request": i, "nova": a, "gantt": b} for i, (a, b) in enumerate(zip(nova, gantt, strict=True))
                   if a != b]
    out["differences"] = differences[:5]
    return out


def _chosen(answer: Any) -> str | None:
    return answer[0] if isinstance(answer, list) and answer else None


# ------------------------------------------------------------------------------------------------ one size


@contextlib.contextmanager
def schedulers(nova: Nova, broker: rabbit.Broker, nodes: int, tag: str, worlds: dict[str, World],
               placement: Placement, args: argparse.Namespace) -> Iterator[dict[str, Scheduler]]:
    """Nova's nova-scheduler and Gantt's, each with its own configuration file beside the shared one."""
    work = nova.work
    max_results = args.nova_max_placement_results or nodes
    nova_host, gantt_host = f"nova-{tag}", f"gantt-{tag}"
    (work / f"{nova_host}.conf").write_text(
        f"[DEFAULT]\nhost = {nova_host}\nlog_file = {work / nova_host}.log\n{worlds['nova'].conf()}"
        f"[scheduler]\nworkers = 1\nmax_placement_results = {max_results}\n"
        f"[placement]\nauth_type = admin_token\ntoken = admin\nendpoint = {placement.url}\n")
    (work / f"{gantt_host}.conf").write_text(
        f"[DEFAULT]\nhost = {gantt_host}\nlog_file = {work / gantt_host}.log\n{worlds['gantt'].conf()}"
        f"[gantt]\nstore = sqlite:///{work / gantt_host}.sqlite\ncell_poll_interval = {args.gantt_poll_interval}\n")
    base = ["--config-file", str(nova.base_conf)]
    venv_bin = Path(sys.executable).parent
    started: dict[str, Scheduler] = {}
    try:
        started["nova"] = Scheduler("nova", nova_host, [str(venv_bin / "nova-scheduler"), *base, "--config-file",
                                                        str(work / f"{nova_host}.conf")], work, broker)
        started["gantt"] = Scheduler("gantt", gantt_host, [sys.executable, "-m", "gantt", "nova-scheduler", *base,
                                                           "--config-file", str(work / f"{gantt_host}.conf")],
                                     work, broker)
        yield started
    finally:
        for scheduler in started.values():
            scheduler.stop()


def sync_instances(broker: rabbit.Broker, nodes: int, timeout: float) -> None:
    """What each nova-compute casts to every scheduler (the fanout) at start and then periodically: the instances
    it runs (none yet). Twice: Nova's HostManager re-reads an unknown host's instances at the first and trusts the
    compute's list from the second on, as in a cloud whose computes have been up a while; until then it would query
    each host's instances at every request. Waits until every scheduler queue is drained."""
    from nova import context
    from nova.scheduler import rpcapi

    api, ctxt = rpcapi.SchedulerAPI(), context.get_admin_context()
    for _ in range(2):
        for i in range(nodes):
            api.sync_instance_info(ctxt, node_name(i), [])
        deadline = time.monotonic() + timeout
        while _backlog(broker) > 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the schedulers did not take the computes' instance lists within {timeout:g} s")
            time.sleep(1.0)


def _backlog(broker: rabbit.Broker) -> int:
    """Messages waiting or being handled on the schedulers' queues, as rabbitmqctl lists them."""
    done = subprocess.run([str(rabbit.CTL_SCRIPT), "-q", "list_queues", "name", "messages"], env=broker.env,
                          capture_output=True, text=True, timeout=60, cwd=broker.tmp)
    total = 0
    for line in done.stdout.splitlines():
        name, _, count = line.partition("\t")
        if name.startswith("scheduler") and count.strip().isdigit():
            total += int(count)
    return total


def run_size(nova: Nova, broker: rabbit.Broker, nodes: int, requests: int,
             args: argparse.Namespace) -> dict[str, Any]:
    tag = f"n{nodes}"
    made = time.monotonic()
    worlds = nova.cells(tag, nodes, KINDS)
    placement = Placement(nova.work / f"placement-{tag}")
    try:
        placement.providers(nodes)
        setup_s = time.monotonic() - made
        with schedulers(nova, broker, nodes, tag, worlds, placement, args) as started:
            ready = {kind: round(s.wait_ready(args.start_timeout), 1) for kind, s in started.items()}
            synced = time.monotonic()
            sync_instances(broker, nodes, args.start_timeout)
            ready["instance_sync"] = round(time.monotonic() - synced, 1)
            clients = {kind: s.client() for kind, s in started.items()}
            seconds: dict[str, list[float]] = {kind: [] for kind in KINDS}
            answers: dict[str, list[Any]] = {kind: [] for kind in KINDS}
            for i, (flavor, instance) in enumerate(sequence(requests + 1, args.seed)):
                # interleaved, Nova first then Gantt, so that both meet the same background load
                for kind in KINDS:
                    took, answer = ask(clients[kind], flavor, instance)
                    seconds[kind].append(took)
                    answers[kind].append(answer)
                # then each world's compute builds the instance where its scheduler put it (not timed)
                for kind in KINDS:
                    if chosen := _chosen(answers[kind][-1]):
                        worlds[kind].boot(chosen.split("/")[0], flavor, instance, started[kind])
                time.sleep(args.settle)
                if args.progress:
                    print(f"{tag} request {i}: " + ", ".join(
                        f"{kind} {seconds[kind][-1] * 1000:.1f} ms {_chosen(answers[kind][-1])}" for kind in KINDS),
                        file=sys.stderr, flush=True)
        stats = {kind: summary(seconds[kind][1:], seconds[kind][0]) for kind in KINDS}
        return {"nodes": nodes, "requests": requests, "setup_s": round(setup_s, 1), "ready_s": ready, **stats,
                "speedup": {q: round(stats["nova"][f"{q}_ms"] / stats["gantt"][f"{q}_ms"], 1)
                            for q in ("p50", "p99", "mean")},
                "agreement": agreement(answers["nova"], answers["gantt"]),
                "chosen": {kind: [_chosen(a) for a in answers[kind][:10]] for kind in KINDS},
                "max_placement_results": args.nova_max_placement_results or nodes}
    finally:
        placement.close()


def machine() -> dict[str, Any]:
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "load": [round(x, 2) for x in os.getloadavg()],
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="1000,10000", help="comma-separated sizes (fake compute nodes)")
    parser.add_argument("--requests", default="10,3",
                        help="measured requests per scheduler (after one unmeasured first request), per size in "
                             "order; sizes beyond the list take its last count")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--nova-max-placement-results", type=int, default=0,
                        help="Nova's [scheduler] max_placement_results (default: the node count)")
    parser.add_argument("--gantt-poll-interval", type=float, default=10.0,
                        help="Gantt's [gantt] cell_poll_interval (default: its default)")
    parser.add_argument("--settle", type=float, default=0.2,
                        help="seconds after each request's simulated builds, for the casts to be handled (not timed)")
    parser.add_argument("--start-timeout", type=float, default=1200.0)
    parser.add_argument("--workdir", help="a directory to work in (default: a temporary one, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, databases)")
    parser.add_argument("--progress", action="store_true", help="each request's latencies on stderr")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.nodes.split(",") if n]
    counts = [int(n) for n in args.requests.split(",") if n]
    if not counts or min(counts) < 1:
        parser.error("--requests: counts of at least 1")
    # one per size, in order; sizes beyond the list take its last count
    requests = {nodes: counts[min(i, len(counts) - 1)] for i, nodes in enumerate(sizes)}
    work = Path(tempfile.mkdtemp(prefix="nova-rpc-", dir=args.workdir))
    before = machine()
    results = []
    try:
        with rabbit.broker(work / "rabbit") as broker:
            nova = Nova(work, broker.url)
            try:
                for nodes in sizes:
                    results.append(run_size(nova, broker, nodes, requests[nodes], args))
                    if args.progress:
                        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
            finally:
                from nova import rpc

                rpc.cleanup()  # this process's connections closed before the broker stops, not retried
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work directory kept: {work}", file=sys.stderr)
    after = machine()
    report = {"bench": "nova_rpc", "seed": args.seed,
              "machine": {**before, "load_after": after["load"]}, "sizes": results}
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
