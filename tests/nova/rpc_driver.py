"""Run under the nova+gantt venv (tests/nova/venv.py): Gantt's nova-scheduler manager served by Nova's own service
framework (``nova.service.Service.create(binary='nova-scheduler')`` with ``SERVICE_MANAGERS`` pointing at Gantt),
asked by Nova's own ``nova.scheduler.rpcapi.SchedulerAPI`` over oslo.messaging, on real Nova databases (SQLite
files made by Nova's own migrations: an API database and one cell per scenario) holding real ``objects.Service`` and
``objects.ComputeNode`` rows.

Nova's own decision path is made to raise for the whole process: ``HostManager.get_filtered_hosts``,
``HostManager.get_weighed_hosts`` and ``SchedulerReportClient.get_allocation_candidates`` (each call is counted
too), so every answer here is Gantt's.

stdin: {"src": checkout's src, "tmp": a directory, "transport_url": "fake:/" or "rabbit://…", "scenarios": [names],
        "store": an optional store URL (etcd://…/prefix) the scenarios use instead of SQLite files}
stdout: {"scenarios": {name: result or {"error": traceback}}, "nova_calls": {...}}
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
import traceback
import uuid as uuidlib
from pathlib import Path
from typing import Any

NOVA_CALLS: dict[str, int] = {}


def main() -> None:
    payload = json.load(sys.stdin)
    sys.path.insert(0, payload["src"])  # the tree under test, never an installed Gantt
    from nova import monkey_patch

    monkey_patch.patch(backend="threading")
    import gantt

    assert gantt.__file__.startswith(payload["src"]), gantt.__file__
    world = World(Path(payload["tmp"]), payload["transport_url"], payload.get("store"))
    world.store_pid = payload.get("store_pid")
    world.handshake = Path(payload["handshake"]) if payload.get("handshake") else None
    out: dict[str, Any] = {}
    for name in payload["scenarios"]:
        try:
            out[name] = SCENARIOS[name](world)
        except Exception:
            out[name] = {"error": traceback.format_exc()}
        finally:
            world.end_scenario()
    json.dump({"scenarios": out, "nova_calls": NOVA_CALLS}, sys.stdout)
    sys.stdout.flush()


def _forbid_nova_decisions() -> None:
    from nova.scheduler import host_manager
    from nova.scheduler.client import report

    def raiser(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            NOVA_CALLS[name] = NOVA_CALLS.get(name, 0) + 1
            raise AssertionError(f"Nova's {name} was called: the decision must be Gantt's")
        return call

    host_manager.HostManager.get_filtered_hosts = raiser("HostManager.get_filtered_hosts")
    host_manager.HostManager.get_weighed_hosts = raiser("HostManager.get_weighed_hosts")
    report.SchedulerReportClient.get_allocation_candidates = raiser(
        "SchedulerReportClient.get_allocation_candidates")


# The computes of this world are database rows with no Placement to report traits to: those of a nova-compute
# older than the one that puts OWNER_NOVA on its providers (73), which Nova's scheduler then does not require.
COMPUTE_VERSION = 72


class World:
    """One process's Nova: configuration, the API database, RPC; a cell and Gantt store per scenario."""

    def __init__(self, tmp: Path, transport_url: str, store: str | None = None) -> None:
        import nova.conf
        from nova import config, objects, rpc
        from nova.db import migration

        self.tmp = tmp
        self.transport_url = transport_url
        self.store = store  # a store URL for every scenario (each under its own suffix), else a SQLite file each
        self.store_pid: int | None = None  # the store's process (an etcd member), for store_down
        self.handshake: Path | None = None  # where broker_restart and the test tell each other when
        conf_file = tmp / "nova.conf"
        conf_file.write_text(
            "[DEFAULT]\n"
            f"transport_url = {transport_url}\n"
            f"state_path = {tmp}\n"
            "host = driver\n"
            "rpc_response_timeout = 30\n"
            "long_rpc_timeout = 60\n"
            "[database]\n"
            f"connection = sqlite:///{tmp}/main.db\n"
            "[api_database]\n"
            f"connection = sqlite:///{tmp}/api.db\n"
            "[oslo_concurrency]\n"
            f"lock_path = {tmp}/locks\n"
            "[filter_scheduler]\n"
            "enabled_filters = AvailabilityZoneFilter,ComputeFilter,ComputeCapabilitiesFilter,"
            "ImagePropertiesFilter,ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter,"
            "DifferentHostFilter,SameHostFilter\n"
            "[gantt]\n"
            # a decision's cheap check must find changes by itself; periodic_read sets its own
            "cell_poll_interval = 3600\n")
        from gantt.nova import conf as gantt_conf

        self.conf = nova.conf.CONF
        gantt_conf.register(self.conf)  # as `gantt nova-scheduler` does, before nova.conf is parsed
        config.parse_args(["driver", "--config-file", str(conf_file)], default_config_files=[])
        objects.register_all()
        migration.db_sync(database="api")
        migration.db_sync(database="main")
        # each scenario's cell database is a copy of this one, migrated once
        self.template = tmp / "cell-template.db"
        shutil.copy(tmp / "main.db", self.template)
        self.rpc = rpc
        _forbid_nova_decisions()
        self.services: list[Any] = []
        self.cell: Any = None
        self.n = 0

    # ------------------------------------------------------------------------------------------ per scenario

    def begin(self, store: str | None = None) -> Any:
        from nova import context, objects

        self.n += 1
        db = self.tmp / f"cell{self.n}.db"
        shutil.copy(self.template, db)
        ctxt = context.get_admin_context()
        self.cell = objects.CellMapping(ctxt, uuid=str(uuidlib.uuid4()), name=f"cell{self.n}",
                                        transport_url=self.transport_url, database_connection=f"sqlite:///{db}")
        self.cell.create()
        default = f"{self.store}-{self.n}" if self.store else f"sqlite:///{self.tmp}/gantt{self.n}.sqlite"
        self.conf.set_override("store", store or default, group="gantt")
        return self.cell

    def another_cell(self, name: str) -> Any:
        """A further cell of this scenario's (its database a copy of the template): the caller destroys it."""
        from nova import context, objects

        db = self.tmp / f"cell{self.n}-{name}.db"
        shutil.copy(self.template, db)
        cell = objects.CellMapping(context.get_admin_context(), uuid=str(uuidlib.uuid4()), name=name,
                                   transport_url=self.transport_url, database_connection=f"sqlite:///{db}")
        cell.create()
        return cell

    def end_scenario(self) -> None:
        from nova import context, objects

        for service in self.services:
            try:
                service.stop()
            except Exception:
                traceback.print_exc(file=sys.stderr)
        self.services = []
        ctxt = context.get_admin_context()
        for agg in objects.AggregateList.get_all(ctxt):
            for host in list(agg.hosts):
                agg.delete_host(host)
            agg.destroy()
        if self.cell is not None:
            self.cell.destroy()
            self.cell = None

    def ctxt(self) -> Any:
        from nova import context

        return context.target_cell(context.get_admin_context(), self.cell).__enter__()

    def scheduler(self, host: str) -> Any:
        """Gantt's manager, as Nova's service framework builds and starts nova-scheduler."""
        from nova import service

        service.SERVICE_MANAGERS["nova-scheduler"] = "gantt.nova.manager.SchedulerManager"
        server = service.Service.create(host=host, binary="nova-scheduler", topic="scheduler",
                                        periodic_enable=False)
        server.start()
        self.services.append(server)
        return server

    def client(self, server: str | None = None) -> Any:
        from nova.scheduler import rpcapi

        api = rpcapi.SchedulerAPI()
        if server is not None:  # one scheduler of several, as round-robin would pick it
            api.client = api.client.prepare(server=server)
        return api

    def compute(self, host: str, *, vcpus: int = 8, memory_mb: int = 8192, local_gb: int = 100,
                node_uuid: str | None = None, new_service: bool = True, version: int = COMPUTE_VERSION,
                cell: Any = None, **fields: Any) -> Any:
        """A compute node of nova-compute ``host`` (its service made too, at ``version``, unless ``new_service`` is
        False: a further node of a multi-node driver) in ``cell`` (default: the scenario's)."""
        from nova import objects
        from nova.db.main import api as db

        with _cell(self, cell) as cctxt:
            if new_service:
                service = objects.Service(cctxt, host=host, binary="nova-compute", topic="compute", report_count=0)
                service.create()
                db.service_update(cctxt, service.id, {"version": version})  # the object's version is its code's
            else:
                service = objects.Service.get_by_compute_host(cctxt, host)
            values: dict[str, Any] = dict(
                host=host, hypervisor_hostname=host, uuid=node_uuid or str(uuidlib.uuid4()),
                vcpus=vcpus, memory_mb=memory_mb, local_gb=local_gb, vcpus_used=0, memory_mb_used=0,
                local_gb_used=0, free_ram_mb=memory_mb, free_disk_gb=local_gb, disk_available_least=local_gb,
                current_workload=0, running_vms=0, hypervisor_type="QEMU", hypervisor_version=8002000,
                cpu_info="{}", cpu_allocation_ratio=1.0, ram_allocation_ratio=1.0, disk_allocation_ratio=1.0,
                supported_hv_specs=[objects.HVSpec(arch="x86_64", hv_type="kvm", vm_mode="hvm")],
                stats={}, host_ip="10.0.0.1", metrics="[]", service_id=service.id,
                pci_device_pools=objects.PciDevicePoolList(objects=[]))
            values.update(fields)
            node = objects.ComputeNode(cctxt, **values)
            node.create()
        return node


class _cell:
    def __init__(self, world: World, cell: Any = None) -> None:
        from nova import context

        self.cm = context.target_cell(context.get_admin_context(), cell or world.cell)

    def __enter__(self) -> Any:
        return self.cm.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self.cm.__exit__(*exc)


def spec(vcpus: int = 1, memory_mb: int = 512, root_gb: int = 1, *, instance_uuid: str | None = None,
         num_instances: int = 1, **fields: Any) -> Any:
    from nova import objects

    flavor = objects.Flavor(name=f"f{vcpus}", flavorid=f"f{vcpus}", id=vcpus, vcpus=vcpus, memory_mb=memory_mb,
                            root_gb=root_gb, ephemeral_gb=0, swap=0, extra_specs={})
    out = objects.RequestSpec(flavor=flavor, num_instances=num_instances, project_id="p", user_id="u",
                              instance_uuid=instance_uuid or str(uuidlib.uuid4()),
                              image=objects.ImageMeta.from_dict({"properties": {}}), is_bfv=False,
                              ignore_hosts=None, force_hosts=None, force_nodes=None, scheduler_hints={},
                              instance_group=None, availability_zone=None, requested_destination=None,
                              pci_requests=objects.InstancePCIRequests(requests=[]), numa_topology=None)
    for name, value in fields.items():
        setattr(out, name, value)
    return out


def _selection(sel: Any) -> dict[str, Any]:
    return {"host": sel.service_host, "nodename": sel.nodename, "uuid": sel.compute_node_uuid,
            "cell_uuid": sel.cell_uuid, "availability_zone": sel.availability_zone,
            "allocation_request": json.loads(sel.allocation_request) if sel.allocation_request else None,
            "allocation_request_version": sel.allocation_request_version}


def _error(exc: BaseException) -> dict[str, Any]:
    # details: what Nova's conductor stores as an instance fault's admin-only details (the traceback, with the
    # causes raised in process, or the server's traceback a broker carried)
    return {"type": type(exc).__name__, "classes": [c.__name__ for c in type(exc).__mro__],
            "message": str(exc).split("\n")[0], "details": "".join(traceback.format_exception(exc))}


def _select(api: Any, ctxt: Any, request: Any, uuids: list[str], *, objects_: bool = True,
            alternates: bool = True) -> dict[str, Any]:
    try:
        got = api.select_destinations(ctxt, request, uuids, return_objects=objects_, return_alternates=alternates)
    except Exception as exc:
        return {"error": _error(exc)}
    if not objects_:
        return {"legacy": got}
    return {"selections": [[_selection(s) for s in choices] for choices in got]}


def _wait(predicate: Any, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


# ------------------------------------------------------------------------------------------------ scenarios


def boot_with_alternates(w: World) -> dict[str, Any]:
    from nova import context

    cell = w.begin()
    nodes = {h: w.compute(h).uuid for h in ("c1", "c2", "c3", "c4")}
    sched = w.scheduler("sched-a")
    uuids = [str(uuidlib.uuid4()), str(uuidlib.uuid4())]
    ctxt = context.get_admin_context()
    answer = _select(w.client(), ctxt, spec(2, 1024, 10, num_instances=2, instance_uuid=uuids[0]), uuids)
    # the same instances asked again (a conductor's retry of the RPC): their claims, with alternates as Nova's
    repeat = _select(w.client(), ctxt, spec(2, 1024, 10, num_instances=2, instance_uuid=uuids[0]), uuids)
    allocations = {a.consumer_uuid: [a.host, dict(a.resources) if hasattr(a, "resources") else None]
                   for a in sched.manager.replica.allocations()}
    return {"answer": answer, "repeat": repeat, "cell": cell.uuid, "nodes": nodes, "instances": uuids,
            "allocations": sorted(allocations)}


def versions(w: World) -> dict[str, Any]:
    """Every argument form Nova's manager accepts: 4.0 (legacy dicts), 4.3 (spec_obj), 4.4 (+ instance_uuids),
    4.5 (+ return_objects / return_alternates), by capping Nova's own client; and 4.6 / 5.0, which none accepts."""
    from nova import context

    w.begin()
    for h in ("v1", "v2", "v3"):
        w.compute(h)
    w.scheduler("sched-v")
    ctxt = context.get_admin_context()
    out: dict[str, Any] = {}
    api = w.client()
    # 4.0: what a pre-Mitaka conductor sent, the legacy request_spec and filter_properties dicts
    legacy = spec(1, 256, 1)
    request_spec = legacy.to_legacy_request_spec_dict()
    try:
        got = api.client.prepare(version="4.0").call(
            ctxt, "select_destinations", request_spec=request_spec,
            filter_properties=legacy.to_legacy_filter_properties_dict())
        out["4.0"] = {"legacy": got}
    except Exception as exc:
        out["4.0"] = {"error": _error(exc)}
    for version, kwargs in (("4.3", {}), ("4.4", {"instance_uuids": None}),
                            ("4.5", {"instance_uuids": None, "return_objects": True, "return_alternates": False})):
        request = spec(1, 256, 1)
        if "instance_uuids" in kwargs:
            kwargs = {**kwargs, "instance_uuids": [request.instance_uuid]}
        try:
            got = api.client.prepare(version=version).call(ctxt, "select_destinations", spec_obj=request,
                                                          filter_properties={}, **kwargs)
            out[version] = ({"selections": [[_selection(s) for s in c] for c in got]}
                            if kwargs.get("return_objects") else {"legacy": got})
        except Exception as exc:
            out[version] = {"error": _error(exc)}
    for version in ("4.6", "5.0"):
        request = spec(1, 256, 1)
        try:
            api.client.prepare(version=version).call(ctxt, "select_destinations", spec_obj=request,
                                                    instance_uuids=[request.instance_uuid],
                                                    return_objects=True, return_alternates=True)
            out[version] = {"answered": True}
        except Exception as exc:
            out[version] = {"error": _error(exc)}
    return out


def no_valid_host(w: World) -> dict[str, Any]:
    from nova import context, objects

    w.begin()
    w.compute("small", vcpus=2, memory_mb=2048)
    w.scheduler("sched-n")
    ctxt = context.get_admin_context()
    api = w.client()
    request = spec(64, 1024, 1)
    out = _select(api, ctxt, request, [request.instance_uuid])
    # no node has room whatever ignore_hosts removed before: still what Placement answers (no candidate)
    ignored = spec(64, 1024, 1, ignore_hosts=["small"])
    out["ignored"] = _select(api, ctxt, ignored, [ignored.instance_uuid])
    # room, but the group's anti-affinity rules the one host out (a member runs there): past Placement, in Nova's
    # filters
    member = spec(1, 512, 1)
    out["member"] = _select(api, ctxt, member, [member.instance_uuid])
    group = objects.InstanceGroup(uuid=str(uuidlib.uuid4()), name="g", policy="anti-affinity", rules={},
                                  members=[member.instance_uuid], hosts=["small"])
    grouped = spec(1, 512, 1, instance_group=group, scheduler_hints={"group": [group.uuid]})
    out["group"] = _select(api, ctxt, grouped, [grouped.instance_uuid])
    return out


def unsupported(w: World) -> dict[str, Any]:
    from nova import context, objects

    w.begin()
    w.compute("u1")
    sched = w.scheduler("sched-u")
    ctxt = context.get_admin_context()
    request = spec(1, 256, 1, request_level_params=objects.RequestLevelParams(
        root_required=set(), root_forbidden=set(), same_subtree=[{"a", "b"}]))
    answer = _select(w.client(), ctxt, request, [request.instance_uuid])
    answer["allocations"] = len(sched.manager.replica.allocations())
    return answer


def aggregates(w: World) -> dict[str, Any]:
    """update_aggregates / delete_aggregate as Nova's API casts them (fanout), and aggregates loaded at start."""
    from nova import context, objects

    w.begin()
    for h in ("a1", "a2", "a3"):
        w.compute(h)
    ctxt = context.get_admin_context()
    # made before the scheduler starts: loaded from the API database
    early = objects.Aggregate(ctxt, name="early", uuid=str(uuidlib.uuid4()), metadata={"availability_zone": "az-e"})
    early.create()
    early.add_host("a1")
    sched = w.scheduler("sched-g")
    replica = sched.manager.replica
    out: dict[str, Any] = {"loaded": sorted(a.name or "" for a in replica.aggregates())}
    api = w.client()
    agg = objects.Aggregate(ctxt, name="fast", uuid=str(uuidlib.uuid4()), metadata={"availability_zone": "az-f"})
    agg.create()
    agg.add_host("a3")
    api.update_aggregates(ctxt, [agg])  # what nova-api's AggregateAPI casts after each change
    out["fanout_seen"] = _wait(lambda: any(a.name == "fast" for a in replica.aggregates()))
    out["fast_hosts"] = [a.hosts for a in replica.aggregates() if a.name == "fast"]
    request = spec(1, 256, 1, availability_zone="az-f")
    out["in_zone"] = _select(api, ctxt, request, [request.instance_uuid])
    request = spec(1, 256, 1, availability_zone="az-e")
    out["in_early_zone"] = _select(api, ctxt, request, [request.instance_uuid])
    api.delete_aggregate(ctxt, agg)
    out["deleted_seen"] = _wait(lambda: not any(a.name == "fast" for a in replica.aggregates()))
    request = spec(1, 256, 1, availability_zone="az-f")
    out["zone_gone"] = _select(api, ctxt, request, [request.instance_uuid])
    return out


def instance_info(w: World) -> dict[str, Any]:
    from nova import context, objects

    w.begin()
    w.compute("i1")
    w.compute("i2")
    sched = w.scheduler("sched-i")
    replica = sched.manager.replica
    api = w.client()
    ctxt = context.get_admin_context()
    a, b, c = (str(uuidlib.uuid4()) for _ in range(3))
    out: dict[str, Any] = {"a": a, "b": b, "c": c}
    api.sync_instance_info(ctxt, "i1", [a, b])
    out["synced"] = _wait(lambda: sorted(replica.instance_info.get("i1", [])) == sorted([a, b]))
    api.update_instance_info(ctxt, "i1", objects.Instance(uuid=c, host="i1"))
    out["updated"] = _wait(lambda: sorted(replica.instance_info.get("i1", [])) == sorted([a, b, c]))
    api.delete_instance_info(ctxt, "i1", b)
    out["deleted"] = _wait(lambda: sorted(replica.instance_info.get("i1", [])) == sorted([a, c]))
    # Nova's DifferentHostFilter reads the instance lists: away from a -> i2
    request = spec(1, 256, 1, scheduler_hints={"different_host": [a]})
    out["different_host"] = _select(api, ctxt, request, [request.instance_uuid])
    request = spec(1, 256, 1, scheduler_hints={"same_host": [c]})
    out["same_host"] = _select(api, ctxt, request, [request.instance_uuid])
    return out


def two_schedulers(w: World) -> dict[str, Any]:
    """Two Gantt nova-schedulers on one SQLite store, each with its own replica, asked at once: one-slot hosts
    are never booked twice."""
    from nova import context

    w.begin()
    hosts = [f"s{i}" for i in range(3)]
    for h in hosts:
        w.compute(h, vcpus=1, memory_mb=1024, local_gb=10)
    w.scheduler("sched-1")
    w.scheduler("sched-2")
    clients = [w.client("sched-1"), w.client("sched-2")]
    ctxt = context.get_admin_context()
    results: list[dict[str, Any]] = [{} for _ in range(8)]
    barrier = threading.Barrier(8)

    def ask(i: int) -> None:
        request = spec(1, 512, 1)
        barrier.wait()
        results[i] = _select(clients[i % 2], ctxt, request, [request.instance_uuid], alternates=False)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    placed = [r["selections"][0][0]["host"] for r in results if "selections" in r]
    refused = [r["error"] for r in results if "error" in r]
    return {"placed": placed, "refused": refused, "hosts": hosts}


def new_compute(w: World) -> dict[str, Any]:
    """A compute node that appears (or is disabled, or deleted) after the scheduler started is seen by the next
    decision, without waiting for the periodic read."""
    from nova import context, objects

    w.begin()
    w.compute("n1", vcpus=1)
    sched = w.scheduler("sched-c")
    api = w.client()
    ctxt = context.get_admin_context()
    out: dict[str, Any] = {}
    w.compute("n2", vcpus=16)
    request = spec(8, 256, 1)
    out["new"] = _select(api, ctxt, request, [request.instance_uuid])
    with _cell(w) as cctxt:
        service = objects.Service.get_by_compute_host(cctxt, "n2")
        service.disabled = True
        service.disabled_reason = "maintenance"
        service.save()
    request = spec(8, 256, 1)
    out["disabled"] = _select(api, ctxt, request, [request.instance_uuid])
    with _cell(w) as cctxt:
        service.disabled = False
        service.save()
        service.forced_down = True
        service.save()
    request = spec(8, 256, 1)
    out["forced_down"] = _select(api, ctxt, request, [request.instance_uuid])
    with _cell(w) as cctxt:
        service.forced_down = False
        service.save()
        objects.ComputeNode.get_by_nodename(cctxt, "n1").destroy()
    request = spec(1, 256, 1)
    out["after_delete"] = _select(api, ctxt, request, [request.instance_uuid])
    out["hosts"] = sorted(h["host"] for h in sched.manager.replica.hosts())
    out["reads"] = sched.manager.reader.reads
    return out


def updated_node(w: World) -> dict[str, Any]:
    """A compute node's row updated in place (nova-compute's resource tracker after a claim, or a resize of the
    hypervisor) is seen by the next decision by reading that node alone, not the whole cell again."""
    from nova import context, objects

    w.begin()
    for h in ("u1", "u2", "u3"):
        w.compute(h, vcpus=4)
    sched = w.scheduler("sched-u")
    reader = sched.manager.reader
    api = w.client()
    ctxt = context.get_admin_context()
    request = spec(12, 256, 1)
    out: dict[str, Any] = {"before": _select(api, ctxt, request, [request.instance_uuid])}
    def partial_reads() -> int:
        return int(getattr(reader, "partial_reads", 0))  # a reader without them reads the cell again in full

    reads, partial, written = reader.reads, partial_reads(), reader.written
    with _cell(w) as cctxt:
        node = objects.ComputeNode.get_by_nodename(cctxt, "u2")
        node.vcpus = 16
        node.save()
    request = spec(12, 256, 1)
    out["after"] = _select(api, ctxt, request, [request.instance_uuid])
    out["full_reads"] = reader.reads - reads
    out["partial_reads"] = partial_reads() - partial
    out["written"] = reader.written - written
    return out


def periodic_read(w: World) -> dict[str, Any]:
    """Without any request, the periodic read brings a new node in, and heartbeats the others."""
    w.begin()
    w.conf.set_override("cell_poll_interval", 0.5, group="gantt")
    w.compute("p1")
    sched = w.scheduler("sched-p")
    replica = sched.manager.replica
    w.compute("p2")
    seen = _wait(lambda: sorted(h["host"] for h in replica.hosts()) == ["p1", "p2"], 20)
    reader = sched.manager.reader
    passes = reader.passes
    _wait(lambda: reader.passes >= passes + 2, 10)
    grew = reader.passes >= passes + 2
    # Nova 34 stops a service through the manager's graceful_shutdown (never cleanup_host): the reader must stop
    # with it, or it reads the cells again through a thread pool the stop has shut down
    w.services.remove(sched)
    sched.stop()
    stopped_at = sched.manager.reader.passes
    time.sleep(1.5)
    w.conf.clear_override("cell_poll_interval", group="gantt")
    return {"seen": seen, "passes_grew": grew, "written": sched.manager.reader.written,
            "reader_alive_after_stop": any(t.name == "gantt-nova-cells" and t.is_alive()
                                           for t in threading.enumerate()),
            "reads_after_stop": sched.manager.reader.passes - stopped_at}


def incremental_read(w: World) -> dict[str, Any]:
    """The periodic pass reads the nodes whose row changed, not the cell: a pass with nothing changed reads no
    node and heartbeats them all; one node updated is read alone; a node written with a time not newer than the
    latest read (a tie: MySQL keeps whole seconds) is still read; a service that stops reporting goes down by
    Nova's servicegroup verdict (time's, no row moves); the nodes whose service keeps reporting stay up in Gantt
    past service_down_time on heartbeats alone."""
    import datetime
    import sqlite3

    from nova import context

    w.begin()
    # short, so "stays up" and "goes down" are seen in seconds; the services report by hand (``beat``)
    # (Nova's servicegroup raises service_down_time to 2.5 report_intervals when it is not above one)
    w.conf.set_override("report_interval", 1, group=None)
    w.conf.set_override("service_down_time", 6, group=None)
    try:
        for h in ("i1", "i2", "i3"):
            w.compute(h, vcpus=4)
        db = sqlite3.connect(str(w.tmp / f"cell{w.n}.db"), isolation_level=None)

        def now() -> datetime.datetime:
            return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)

        def beat(*hosts: str) -> None:  # nova-compute's servicegroup heartbeat: report_count, last_seen_up
            for host in hosts:
                db.execute("UPDATE services SET report_count = report_count + 1, last_seen_up = ?, updated_at = ?"
                           " WHERE host = ? AND deleted = 0", (str(now()), str(now()), host))

        # a node whose service row is gone: every read leaves it out (as Nova's HostManager does), and that must not
        # make every periodic pass a full read
        w.compute("i4", vcpus=4)
        db.execute("DELETE FROM services WHERE host = 'i4'")
        beat("i1", "i2", "i3")
        time.sleep(1.2)  # past the tie window of the start's read
        sched = w.scheduler("sched-i")
        reader, replica = sched.manager.reader, sched.manager.replica
        ctxt = context.get_admin_context()
        poll = getattr(reader, "poll", reader.refresh)  # a reader without it reads every node each pass

        def one_pass() -> dict[str, Any]:
            before = (reader.reads, getattr(reader, "nodes_read", None), reader.written)
            poll(ctxt)
            after = (reader.reads, getattr(reader, "nodes_read", None), reader.written)
            read = None if after[1] is None or before[1] is None else after[1] - before[1]
            return {"full": after[0] - before[0], "nodes_read": read, "written": after[2] - before[2]}

        def vcpus(host: str) -> int:
            return int(replica.host(host)["inventories"]["VCPU"]["total"])

        out: dict[str, Any] = {"quiet": one_pass()}
        with _cell(w) as cctxt:
            from nova import objects

            node = objects.ComputeNode.get_by_nodename(cctxt, "i2")
            node.vcpus = 16
            node.save()
        out["one_changed"] = one_pass()
        out["one_changed_vcpus"] = vcpus("i2")
        # a tie: i3 written with the very time of the latest row the reader took (i2's), in whole seconds
        stamp = now().replace(microsecond=0)
        db.execute("UPDATE compute_nodes SET updated_at = ? WHERE hypervisor_hostname = 'i2'", (str(stamp),))
        one_pass()
        db.execute("UPDATE compute_nodes SET vcpus = 6, updated_at = ? WHERE hypervisor_hostname = 'i3'",
                   (str(stamp),))
        out["tie_other_node"] = one_pass()
        out["tie_other_node_vcpus"] = vcpus("i3")
        # and the same node again in the same second: its time did not move at all
        db.execute("UPDATE compute_nodes SET vcpus = 7, updated_at = ? WHERE hypervisor_hostname = 'i3'",
                   (str(stamp),))
        out["tie_same_node"] = one_pass()
        out["tie_same_node_vcpus"] = vcpus("i3")
        # a writer whose clock lags (or whose transaction committed late): a time older than the latest read
        db.execute("UPDATE compute_nodes SET vcpus = 5, updated_at = ? WHERE hypervisor_hostname = 'i1'",
                   (str(now() - datetime.timedelta(seconds=20)),))
        out["late_writer"] = one_pass()
        out["late_writer_vcpus"] = vcpus("i1")
        # i1's nova-compute stops reporting; i2 and i3 go on; no node row moves
        passes = []
        deadline = time.monotonic() + 8  # past service_down_time (6 s) since i1's last report
        while time.monotonic() < deadline:
            beat("i2", "i3")
            passes.append(one_pass())
            time.sleep(1)
        out["later_passes"] = passes
        out["up"] = {h["host"]: h["up"] for h in replica.hosts()}
        out["forced_down"] = {h["host"]: h["forced_down"] for h in replica.hosts()}
        # the safety net: every full_every-th pass reads every node
        reader.full_every = 2
        out["safety_net"] = sorted(one_pass()["full"] for _ in range(2))
        return out
    finally:
        w.conf.clear_override("service_down_time", group=None)
        w.conf.clear_override("report_interval", group=None)


def host_fields(w: World) -> dict[str, Any]:
    """Every compute node field Nova's filters read reaches Gantt's host record by Nova's name."""
    from nova import objects

    w.begin()
    numa = objects.NUMATopology(cells=[objects.NUMACell(
        id=0, cpuset={0, 1}, pcpuset={2, 3}, memory=4096, cpu_usage=0, memory_usage=0, pinned_cpus=set(),
        siblings=[{0}, {1}, {2}, {3}], mempages=[objects.NUMAPagesTopology(size_kb=4, total=1048576, used=0)],
        network_metadata=objects.NetworkMetadata(physnets=set(), tunneled=False), socket=0)])
    pools = objects.PciDevicePoolList(objects=[objects.PciDevicePool(
        product_id="1520", vendor_id="8086", numa_node=0, tags={"dev_type": "type-VF", "physical_network": "p"},
        count=4)])
    w.compute("f1", numa_topology=numa._to_json(), pci_device_pools=pools,
              cpu_info='{"arch": "x86_64", "features": ["avx2"]}',
              metrics='[{"name": "cpu.percent", "value": 0.5, "source": "libvirt", "timestamp": '
                      '"2026-11-28T00:00:00.000000"}]',
              **{"stats": {"num_instances": "3", "io_workload": "2", "failed_builds": "1", "custom": "x"}})
    sched = w.scheduler("sched-f")
    from gantt.model import to_builtins

    # the record Gantt's store holds for the node, as written by the cell reader
    record = sched.manager.replica.providers.by_key[("f1", "f1")].record
    return {"stats": to_builtins(record.stats), "host": sched.manager.replica.host("f1")}


def move(w: World) -> dict[str, Any]:
    """A repeat of a boot is answered with the claim it made; a move (the conductor's pre-migrating migration in
    the instance's cell, the RequestSpec naming none) gets a new destination, the source kept under the migration."""
    from nova import context, objects

    cell = w.begin()
    w.compute("m1")
    w.compute("m2")
    sched = w.scheduler("sched-m")
    api = w.client()
    ctxt = context.get_admin_context()
    instance = str(uuidlib.uuid4())
    objects.InstanceMapping(ctxt, instance_uuid=instance, cell_mapping=cell, project_id="p").create()
    out: dict[str, Any] = {"boot": _select(api, ctxt, spec(1, 256, 1, instance_uuid=instance), [instance])}
    source = out["boot"]["selections"][0][0]["host"]
    out["repeat"] = _select(api, ctxt, spec(1, 256, 1, instance_uuid=instance), [instance])
    migration = str(uuidlib.uuid4())
    with _cell(w) as cctxt:
        objects.Migration(cctxt, uuid=migration, instance_uuid=instance, status="pre-migrating",
                          migration_type="migration", source_compute=source, source_node=source,
                          old_instance_type_id=1, new_instance_type_id=1).create()
    out["move"] = _select(api, ctxt, spec(1, 256, 1, instance_uuid=instance, ignore_hosts=[source]), [instance],
                          alternates=False)
    replica = sched.manager.replica
    out["allocations"] = {a.consumer_uuid: a.host for a in replica.allocations()}
    out.update(source=source, instance=instance, migration=migration)
    # the source compute casts that the instance left it: the claim on the destination stays
    api.delete_instance_info(ctxt, source, instance)
    dest = out["move"]["selections"][0][0]["host"] if "selections" in out["move"] else None
    _wait(lambda: replica.instance_info.get(source) == [] or False, 3)
    time.sleep(0.5)
    out["after_source_left"] = {a.consumer_uuid: a.host for a in replica.allocations()}
    # then the instance is deleted on the destination: its claim goes
    api.sync_instance_info(ctxt, dest, [instance])
    _wait(lambda: replica.instance_info.get(dest) == [instance])
    api.delete_instance_info(ctxt, dest, instance)
    out["deleted"] = _wait(lambda: instance not in {a.consumer_uuid for a in replica.allocations()})
    out["after_delete"] = {a.consumer_uuid: a.host for a in replica.allocations()}
    return out


def evacuate(w: World) -> dict[str, Any]:
    """An evacuation (nova-api's accepted migration of type evacuation; the conductor ignores the down source):
    the destination booked beside the source in the instance's own allocation, as Nova's scheduler books it, the
    migration holding nothing; asked again, the same answer."""
    from nova import context, objects

    cell = w.begin()
    w.compute("e1")
    w.compute("e2")
    sched = w.scheduler("sched-e")
    api = w.client()
    ctxt = context.get_admin_context()
    instance = str(uuidlib.uuid4())
    objects.InstanceMapping(ctxt, instance_uuid=instance, cell_mapping=cell, project_id="p").create()
    out: dict[str, Any] = {"boot": _select(api, ctxt, spec(1, 256, 1, instance_uuid=instance, force_hosts=["e1"]),
                                           [instance])}
    migration = str(uuidlib.uuid4())
    with _cell(w) as cctxt:
        down = objects.Service.get_by_compute_host(cctxt, "e1")
        down.forced_down = True
        down.save()
        objects.Migration(cctxt, uuid=migration, instance_uuid=instance, status="accepted",
                          migration_type="evacuation", source_compute="e1", source_node="e1",
                          old_instance_type_id=1, new_instance_type_id=1).create()
    request = spec(1, 256, 1, instance_uuid=instance, ignore_hosts=["e1"])
    out["evacuate"] = _select(api, ctxt, request, [instance], alternates=False)
    out["repeat"] = _select(api, ctxt, request, [instance], alternates=False)
    out["allocations"] = {a.consumer_uuid: [[key[0], resources] for key, resources in a.parts()]
                          for a in sched.manager.replica.allocations()}
    out.update(instance=instance, migration=migration)
    return out


def max_attempts(w: World) -> dict[str, Any]:
    """[scheduler] max_attempts set after the scheduler started (a functional test's flags) counts from the next
    request, as Nova reads it at each one: the claimed host and max_attempts - 1 alternates."""
    from nova import context

    w.begin()
    for h in ("a1", "a2", "a3", "a4", "a5", "a6"):
        w.compute(h)
    w.scheduler("sched-x")
    api = w.client()
    ctxt = context.get_admin_context()
    out: dict[str, Any] = {"default": _select(api, ctxt, spec(), [str(uuidlib.uuid4())])}
    w.conf.set_override("max_attempts", 5, group="scheduler")
    try:
        out["five"] = _select(api, ctxt, spec(), [str(uuidlib.uuid4())])
    finally:
        w.conf.clear_override("max_attempts", group="scheduler")
    return out


def same_host_resize(w: World) -> dict[str, Any]:
    """A resize nova-api let stay on the instance's host (``ignore_hosts`` empty: ``allow_resize_to_same_host``,
    or a cold migration to a node with COMPUTE_SAME_HOST_COLD_MIGRATE while that option stays off, as here): the
    one host is chosen, the new size claimed beside the old one the migration holds, refused when both do not fit;
    the confirm's delete_instance_info from that host leaves the instance's claim, a deletion's releases it."""
    from nova import context, objects

    cell = w.begin()
    node = w.compute("sh1", vcpus=4)
    sched = w.scheduler("sched-sh")
    api = w.client()
    ctxt = context.get_admin_context()
    instance = str(uuidlib.uuid4())
    objects.InstanceMapping(ctxt, instance_uuid=instance, cell_mapping=cell, project_id="p").create()
    with _cell(w) as cctxt:
        record = objects.Instance(cctxt, uuid=instance, host="sh1", node="sh1", compute_id=node.id,
                                  vm_state="active",
                                  project_id="p", user_id="u")
        record.create()
    out: dict[str, Any] = {"boot": _select(api, ctxt, spec(2, 256, 1, instance_uuid=instance), [instance])}
    migration = str(uuidlib.uuid4())
    with _cell(w) as cctxt:
        objects.Migration(cctxt, uuid=migration, instance_uuid=instance, status="pre-migrating",
                          migration_type="resize", source_compute="sh1", source_node="sh1",
                          old_instance_type_id=2, new_instance_type_id=3).create()
    replica = sched.manager.replica
    out["too_big"] = _select(api, ctxt, spec(3, 256, 1, instance_uuid=instance, ignore_hosts=[]), [instance])
    out["after_too_big"] = {a.consumer_uuid: a.host for a in replica.allocations()}
    out["resize"] = _select(api, ctxt, spec(2, 512, 1, instance_uuid=instance, ignore_hosts=[]), [instance])
    out["allocations"] = {a.consumer_uuid: [a.host, a.resources.get("VCPU")] for a in replica.allocations()}
    # confirm: the migration's hold goes (Placement), and the "source" casts that the instance left it
    replica.release(migration)
    api.delete_instance_info(ctxt, "sh1", instance)
    time.sleep(1.0)  # a cast: nothing to wait for when it (rightly) leaves the claim alone
    out["after_confirm"] = {a.consumer_uuid: a.host for a in replica.allocations()}
    with _cell(w) as cctxt:
        record.destroy()
    api.delete_instance_info(ctxt, "sh1", instance)
    out["deleted"] = _wait(lambda: instance not in {a.consumer_uuid for a in replica.allocations()})
    out.update(instance=instance, migration=migration)
    return out


def rebuild(w: World) -> dict[str, Any]:
    """A rebuild with a new image (the conductor's ``_nova_check_type: ['rebuild']``, forced to the instance's
    host and node): that host checked with the rebuild filters, nothing claimed (the instance's host is full, which
    a rebuild does not ask about), no allocation request in the answer; an image the host cannot run is a
    NoValidHost naming the filter."""
    from nova import context, objects

    w.begin()
    w.compute("r1", vcpus=2)
    w.compute("r2", vcpus=8)
    sched = w.scheduler("sched-r")
    api = w.client()
    ctxt = context.get_admin_context()
    instance = str(uuidlib.uuid4())
    out: dict[str, Any] = {"boot": _select(api, ctxt, spec(2, 256, 1, instance_uuid=instance,
                                                         force_hosts=["r1"]), [instance])}
    replica = sched.manager.replica
    before = {a.consumer_uuid: a.host for a in replica.allocations()}

    def check(arch: str) -> dict[str, Any]:
        request = spec(2, 256, 1, instance_uuid=instance, force_hosts=["r1"], force_nodes=["r1"],
                       scheduler_hints={"_nova_check_type": ["rebuild"]},
                       image=objects.ImageMeta.from_dict({"properties": {"hw_architecture": arch}}))
        return _select(api, ctxt, request, [instance], alternates=False)

    out["good"] = check("x86_64")
    out["bad"] = check("aarch64")
    out["unchanged"] = {a.consumer_uuid: a.host for a in replica.allocations()} == before
    out["instance"] = instance
    return out


def seed_instances(w: World) -> dict[str, Any]:
    """A first start on an empty store: the hosts' instance lists are read from the cell's instance table (as
    Nova's HostManager does at start), not left empty until nova-compute's periodic sync; deleted instances are
    not listed; a host whose list the store has already keeps it."""
    from nova import context, objects

    w.begin()
    nodes = {h: w.compute(h) for h in ("p1", "p2", "p3")}
    a, b, c, gone = (str(uuidlib.uuid4()) for _ in range(4))
    with _cell(w) as cctxt:
        for uuid, host in ((a, "p1"), (b, "p1"), (c, "p2"), (gone, "p2")):
            objects.Instance(cctxt, uuid=uuid, host=host, node=host, compute_id=nodes[host].id, vm_state="active",
                             project_id="p", user_id="u").create()
        objects.Instance.get_by_uuid(cctxt, gone).destroy()
    sched = w.scheduler("sched-p")
    replica = sched.manager.replica
    out: dict[str, Any] = {"lists": {h: sorted(replica.instance_info.get(h, [])) for h in nodes},
                           "a": a, "b": b, "c": c}
    api = w.client()
    ctxt = context.get_admin_context()
    request = spec(1, 256, 1, scheduler_hints={"same_host": [c]})
    out["same_host"] = _select(api, ctxt, request, [request.instance_uuid])
    # a second scheduler on the same store: p1's list, as a cast left it since, is not replaced by the table's
    api.sync_instance_info(ctxt, "p1", [a])
    _wait(lambda: replica.instance_info.get("p1") == [a])
    second = w.scheduler("sched-p2")
    out["second"] = sorted(second.manager.replica.instance_info.get("p1", []))
    return out


def request_filters(w: World) -> dict[str, Any]:
    """Nova's request filters that ask other services: OWNER_NOVA required once every nova-compute reports it (the
    cells' services tables, asked per request), COMPUTE_REMOTE_MANAGED_PORTS for a port Neutron says is
    remote-managed (Neutron stood in for by its answers), a refusal when Neutron cannot be asked."""
    from nova import context, objects
    from nova.network import neutron

    from gantt.placement.facade import Placement

    ports = {str(uuidlib.uuid4()): answer for answer in (True, False, None)}  # None: Neutron fails

    def is_remote_managed_port(self: Any, ctxt: Any, port_id: str) -> bool:
        answer = ports[port_id]
        if answer is None:
            raise RuntimeError("Neutron is unreachable")
        return answer

    w.begin()
    context.CELLS = []  # Nova lists the cells once per process; this world makes one per scenario
    nodes = {name: w.compute(name, version=73).uuid for name in ("owned", "remote", "bare")}
    sched = w.scheduler("sched-f")
    api = w.client()
    ctxt = context.get_admin_context()
    sched.manager.reader.refresh(ctxt)
    placement = Placement(sched.manager.replica)
    placement.set_provider_traits(nodes["owned"], None, ["OWNER_NOVA"])
    placement.set_provider_traits(nodes["remote"], None, ["OWNER_NOVA", "COMPUTE_REMOTE_MANAGED_PORTS"])
    out: dict[str, Any] = {"nodes": nodes}

    def boot(name: str, port: str | None = None, **fields: Any) -> None:
        request = spec(1, 256, 1, **fields)
        if port is not None:
            request.requested_networks = objects.NetworkRequestList(objects=[objects.NetworkRequest(port_id=port)])
        out[name] = _select(api, ctxt, request, [request.instance_uuid], alternates=False)

    original = neutron.API.is_remote_managed_port
    neutron.API.is_remote_managed_port = is_remote_managed_port
    try:
        boot("owner_required", ignore_hosts=["owned", "remote"])  # bare lacks OWNER_NOVA
        remote, plain, broken = ports
        boot("remote_managed", remote)
        boot("plain_port", plain, ignore_hosts=["remote"])
        boot("neutron_down", broken)
        w.compute("old", version=72)  # an older compute joins: OWNER_NOVA is no longer required
        boot("owner_not_required", ignore_hosts=["owned", "remote", "old"])
    finally:
        neutron.API.is_remote_managed_port = original
    return out


def tenant_aggregates(w: World) -> dict[str, Any]:
    """Nova's [scheduler] limit_tenants_to_placement_aggregate and placement_aggregate_required_for_tenants turned
    on after the scheduler started, as Nova's TenantAggregateFilterTest does (Nova's request filters read them at
    each request): the next request follows them, even for a project a decision made while they were off."""
    from nova import context, objects

    w.begin()
    for name in ("t1", "t2"):
        w.compute(name)
    ctxt = context.get_admin_context()
    agg = objects.Aggregate(ctxt, name="only-t1", uuid=str(uuidlib.uuid4()),
                            metadata={"filter_tenant_id0": "other", "filter_tenant_id1": "p"})
    agg.create()
    agg.add_host("t1")
    w.scheduler("sched-t")
    api = w.client()
    out: dict[str, Any] = {}

    def boot(project: str) -> Any:
        request = spec(1, 256, 1, project_id=project)
        answer = _select(api, ctxt, request, [request.instance_uuid], alternates=False)
        return answer["selections"][0][0]["host"] if "selections" in answer else answer

    switches = ("limit_tenants_to_placement_aggregate", "placement_aggregate_required_for_tenants",
                "query_placement_for_routed_network_aggregates")
    try:
        out["off"] = sorted(boot("p") for _ in range(4))  # spread over both (RAMWeigher)
        w.conf.set_override("limit_tenants_to_placement_aggregate", True, group="scheduler")
        out["on"] = [boot("p") for _ in range(4)]
        out["no_aggregate"] = sorted(boot("q") for _ in range(2))  # q has none: every host, not required
        w.conf.set_override("placement_aggregate_required_for_tenants", True, group="scheduler")
        out["required"] = boot("q")
        w.conf.clear_override("limit_tenants_to_placement_aggregate", group="scheduler")
        out["off_again"] = sorted(boot("q") for _ in range(2))
        w.conf.set_override("query_placement_for_routed_network_aggregates", True, group="scheduler")
        out["routed"] = boot("p")
    finally:
        for name in switches:
            w.conf.clear_override(name, group="scheduler")
    return out


def per_request_options(w: World) -> dict[str, Any]:
    """Nova's [filter_scheduler] options its filters and weighers read at each request, set after the scheduler
    started (as Nova's functional tests set flags): the next request decides with them; one Gantt cannot honour is
    a NoValidHost naming it while it is set; one Nova reads once, when it builds its HostManager (enabled_filters),
    is not followed either."""
    from nova import context, objects

    w.begin()
    for name, memory in (("o1", 65536), ("o2", 16384), ("o3", 8192), ("o4", 131072)):
        w.compute(name, memory_mb=memory)
    with _cell(w) as cctxt:  # the largest, disabled: ComputeFilter keeps it out
        service = objects.Service.get_by_compute_host(cctxt, "o4")
        service.disabled = True
        service.save()
    alone = ("io_ops_weight_multiplier", "cpu_weight_multiplier", "disk_weight_multiplier")
    for name in alone:  # RAMWeigher alone decides (each boot takes a vCPU, a GB and an I/O operation too)
        w.conf.set_override(name, 0.0, group="filter_scheduler")
    try:
        w.scheduler("sched-o")
        api, ctxt = w.client(), context.get_admin_context()

        def boot() -> Any:
            request = spec(1, 256, 1)
            answer = _select(api, ctxt, request, [request.instance_uuid], alternates=False)
            return answer["selections"][0][0]["host"] if "selections" in answer else answer

        out: dict[str, Any] = {"spread": boot()}
        w.conf.set_override("ram_weight_multiplier", -1.0, group="filter_scheduler")
        out["stacked"] = boot()
        w.conf.set_override("image_props_weight_multiplier", 1.0, group="filter_scheduler")
        out["refused"] = [boot(), boot()]
        w.conf.clear_override("image_props_weight_multiplier", group="filter_scheduler")
        out["honoured_again"] = boot()
        w.conf.clear_override("ram_weight_multiplier", group="filter_scheduler")
        w.conf.set_override("enabled_filters", ["AvailabilityZoneFilter"], group="filter_scheduler")
        out["filters_kept"] = boot()
        return out
    finally:
        for name in (*alone, "ram_weight_multiplier", "image_props_weight_multiplier", "enabled_filters"):
            w.conf.clear_override(name, group="filter_scheduler")


def unreachable_cell(w: World) -> dict[str, Any]:
    """A cell whose database cannot be opened: logged, and the other cells' hosts still scheduled, at once (never
    a hung conductor)."""
    from nova import context, objects

    w.begin()
    w.compute("ok1")
    ctxt = context.get_admin_context()
    bad = objects.CellMapping(ctxt, uuid=str(uuidlib.uuid4()), name="unreachable", transport_url=w.transport_url,
                              database_connection=f"sqlite:///{w.tmp}/no-such-dir/cell.db")
    bad.create()
    try:
        w.scheduler("sched-b")
        request = spec(1, 256, 1)
        started = time.monotonic()
        answer = _select(w.client(), ctxt, request, [request.instance_uuid])
        return {"answer": answer, "seconds": time.monotonic() - started}
    finally:
        bad.destroy()


def two_cells(w: World) -> dict[str, Any]:
    """Two cells whose hosts interleave by weight (free RAM): a requested cell keeps only its hosts, alternates
    come from the chosen host's cell only and still fill max_attempts - 1 (Nova's _get_alternate_hosts walks on
    down the weighed list), and an unknown cell or a cross-cell move is refused by name."""
    from nova import context, objects

    a = w.begin()
    b = w.another_cell("cell-b")
    try:
        # by free RAM: b1 > a1 > a2 > b2 > b3 > a3
        for host, mem, cell in (("b1", 16384, b), ("a1", 15360, a), ("a2", 14336, a), ("b2", 13312, b),
                                ("b3", 12288, b), ("a3", 11264, a)):
            w.compute(host, memory_mb=mem, cell=cell)
        w.scheduler("sched-cells")
        ctxt = context.get_admin_context()
        out: dict[str, Any] = {"cells": {"a": a.uuid, "b": b.uuid}}
        request = spec(1, 256, 1)
        out["boot"] = _select(w.client(), ctxt, request, [request.instance_uuid])
        for name, cell, cross in (("in_a", a.uuid, False), ("in_b", b.uuid, False),
                                  ("unknown", str(uuidlib.uuid4()), False), ("cross", b.uuid, True)):
            request = spec(1, 256, 1, ignore_hosts=["a1"] if name == "in_a" else None)
            request.requested_destination = objects.Destination(
                cell=objects.CellMapping(uuid=cell), allow_cross_cell_move=cross)
            out[name] = _select(w.client(), ctxt, request, [request.instance_uuid])
        return out
    finally:
        b.destroy()


def store_down(w: World) -> dict[str, Any]:
    """Gantt's store goes away (the test's one etcd member, killed): a decision is a NoValidHost saying so, in
    bounded time, and nothing is booked."""
    import os
    import signal

    from nova import context

    if w.store_pid is None:
        return {"skipped": "needs a store process to kill"}
    w.begin()
    w.compute("d1")
    w.scheduler("sched-d")
    api = w.client()
    ctxt = context.get_admin_context()
    request = spec(1, 256, 1)
    out: dict[str, Any] = {"before": _select(api, ctxt, request, [request.instance_uuid])}
    os.kill(w.store_pid, signal.SIGKILL)
    request = spec(1, 256, 1)
    started = time.monotonic()
    out["down"] = _select(api, ctxt, request, [request.instance_uuid])
    out["seconds"] = time.monotonic() - started
    return out


def broker_restart(w: World) -> dict[str, Any]:
    """A request, then the broker restarts (the test does it when it sees ``ready``, and says ``go``), then another
    request through the same client and scheduler."""
    from nova import context

    if w.handshake is None:
        return {"skipped": "needs the test to restart the broker"}
    w.begin()
    w.compute("r1")
    w.scheduler("sched-r")
    api = w.client()
    ctxt = context.get_admin_context()
    request = spec(1, 256, 1)
    out: dict[str, Any] = {"before": _select(api, ctxt, request, [request.instance_uuid])}
    (w.handshake / "ready").touch()
    out["restarted"] = _wait(lambda: (w.handshake / "go").exists(), 300)
    time.sleep(2)  # the scheduler's consumer reconnects on its own schedule (oslo.messaging's retry interval)
    request = spec(1, 256, 1)
    out["after"] = _select(api, ctxt, request, [request.instance_uuid])
    return out


def configuration(w: World) -> dict[str, Any]:
    """Gantt's options come from Nova's parsed configuration (flags included); an option Gantt does not implement,
    set away from Nova's default, stops the manager at construction, naming it."""
    from gantt.model import InvalidRequest
    from gantt.nova import conf as gantt_conf
    from gantt.nova.manager import SchedulerManager

    w.begin()
    out: dict[str, Any] = {}
    w.conf.set_override("host_subset_size", 3, group="filter_scheduler")
    w.conf.set_override("max_attempts", 5, group="scheduler")
    w.conf.set_override("alias", ['{"name": "a1", "vendor_id": "8086", "product_id": "1520"}'], group="pci")
    try:
        config = gantt_conf.gantt_config(w.conf)
        out["read"] = [config.filter_scheduler.host_subset_size, config.scheduler.max_attempts,
                       sorted(config.pci.aliases), config.gantt.store == w.conf.gantt.store]
    finally:
        for name, group in (("host_subset_size", "filter_scheduler"), ("max_attempts", "scheduler"),
                            ("alias", "pci")):
            w.conf.clear_override(name, group=group)
    w.conf.set_override("image_props_weight_multiplier", 1.0, group="filter_scheduler")
    try:
        SchedulerManager()
        out["refused"] = None
    except InvalidRequest as exc:
        out["refused"] = [exc.field, exc.message]
    finally:
        w.conf.clear_override("image_props_weight_multiplier", group="filter_scheduler")
    return out


def separate_processes(w: World) -> dict[str, Any]:
    """Two `gantt nova-scheduler --config-file nova.conf` processes, as a deployment runs them, on one SQLite store
    (needs a broker: with fake:// a process talks only to itself). Asked at once through Nova's client: one-slot
    hosts never booked twice; then SIGTERM stops them."""
    import os
    import signal
    import subprocess

    from nova import context, objects

    if w.transport_url.startswith("fake"):
        return {"skipped": "needs a broker"}
    w.begin()
    hosts = [f"x{i}" for i in range(3)]
    for h in hosts:
        w.compute(h, vcpus=1, memory_mb=1024, local_gb=10)
    base = w.tmp / "nova.conf"
    store = w.conf.gantt.store
    procs = []
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    for name in ("ext-1", "ext-2"):
        extra = w.tmp / f"{name}.conf"
        # the cell mapping this scenario made is in the API database; the process finds it there
        extra.write_text(f"[DEFAULT]\nhost = {name}\nlog_file = {w.tmp / name}.log\n[gantt]\nstore = {store}\n")
        procs.append(subprocess.Popen([sys.executable, "-m", "gantt", "nova-scheduler", "--config-file", str(base),
                                       "--config-file", str(extra)], env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True))
    out: dict[str, Any] = {}
    try:
        ctxt = context.get_admin_context()
        up = _wait(lambda: {s.host for s in objects.ServiceList.get_by_binary(ctxt, "nova-scheduler")}
                   >= {"ext-1", "ext-2"} or any(p.poll() is not None for p in procs), 90)
        time.sleep(2)  # the record is written just before the RPC server starts consuming
        out["started"] = up and all(p.poll() is None for p in procs)
        clients = [w.client("ext-1"), w.client("ext-2")]
        results: list[dict[str, Any]] = [{} for _ in range(6)]
        barrier = threading.Barrier(6)

        def ask(i: int) -> None:
            request = spec(1, 512, 1)
            barrier.wait()
            results[i] = _select(clients[i % 2], ctxt, request, [request.instance_uuid], alternates=False)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out["placed"] = [r["selections"][0][0]["host"] for r in results if "selections" in r]
        out["refused"] = [r["error"] for r in results if "error" in r]
        out["hosts"] = hosts
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        out["exit"] = []
        for p in procs:
            try:
                out["exit"].append(p.wait(timeout=60))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                out["exit"].append(p.wait())
        out["logs"] = {n: (w.tmp / f"{n}.log").read_text()[-3000:] if (w.tmp / f"{n}.log").exists() else ""
                       for n in ("ext-1", "ext-2")}
        for service in objects.ServiceList.get_by_binary(context.get_admin_context(), "nova-scheduler"):
            service.destroy()
    return out


SCENARIOS = {f.__name__: f for f in (boot_with_alternates, versions, no_valid_host, unsupported, aggregates,
                                     instance_info, two_schedulers, new_compute, updated_node, periodic_read,
                                     incremental_read, host_fields, move, same_host_resize, rebuild,
                                     evacuate, max_attempts,
                                     seed_instances, unreachable_cell, store_down, broker_restart, configuration,
                                     separate_processes, request_filters, two_cells,
                                     tenant_aggregates, per_request_options)}


if __name__ == "__main__":
    main()
