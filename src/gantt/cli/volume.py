"""The ``gantt`` client commands on a volume namespace (``--namespace`` of kind volume, gantt.service.volume).

A volume namespace speaks Cinder's language: a host is a backend (``node1@lvm``) with pools, a request is a volume
of a size. The commands keep their names and options where they mean the same (``hosts``, ``hosts show``,
``hosts create`` with ``--disk-gb`` as the pool's capacity and ``--node`` as the pool, ``hosts delete``,
``select`` with ``--size``, ``allocations``, listed by gantt.cli.allocations); what has no meaning there
(aggregates, moves, vCPUs, traits, a dry run) is refused before anything is sent, naming what to use instead.
"""

from __future__ import annotations

import argparse
import os
import uuid as uuidlib
from typing import Any

from gantt.cli import terminal
from gantt.cli.options import hints, pairs
from gantt.cli.output import Column, Listing, emit_list, emit_one, page
from gantt.cli.terminal import UsageError, done
from gantt.model import Conflict, NotFound

POOL_COLUMNS = [
    Column("host"), Column("pool"), Column("backend_id", default=False), Column("availability_zone"),
    Column("state"), Column("total_capacity_gb", right=True), Column("free_capacity_gb", right=True),
    Column("allocated_capacity_gb", right=True), Column("provisioned_capacity_gb", default=False, right=True),
    Column("max_over_subscription_ratio", default=False, right=True), Column("volumes", right=True),
    Column("storage_protocol", default=False), Column("volume_backend_name", default=False),
]
SELECTION_COLUMNS = [Column("volume_id"), Column("host"), Column("pool"), Column("backend_id"),
                     Column("alternates"), Column("weight", default=False)]
# hosts create/set options that describe a compute node: a pool has none of them
_COMPUTE_CAPACITY = ("vcpus", "memory_mb", "cpu_ratio", "ram_ratio", "disk_ratio", "inventory", "trait",
                     "hypervisor_type", "uuid")
_COMPUTE_REQUEST = ("vcpus", "memory_mb", "root_gb", "resource", "required_trait", "forbidden_trait",
                    "migration_uuid")


def _pool_record(pool: dict[str, Any], volumes: int) -> dict[str, Any]:
    state = pool.get("state") or {}
    service = state.get("service") or {}
    return {"host": pool["host"], "pool": pool["pool"], "backend_id": state.get("backend_id"),
            "availability_zone": service.get("availability_zone"),
            "state": "disabled" if service.get("disabled") else "up",
            **{key: state.get(key) for key in ("total_capacity_gb", "free_capacity_gb", "allocated_capacity_gb",
                                               "provisioned_capacity_gb", "max_over_subscription_ratio",
                                               "storage_protocol", "volume_backend_name")},
            "volumes": volumes}


def _records(client: Any) -> list[dict[str, Any]]:
    held: dict[tuple[str, str], int] = {}
    for allocation in client.allocations():
        key = (allocation.host, allocation.nodename)
        held[key] = held.get(key, 0) + 1
    return [_pool_record(p, held.get((p["host"], p["pool"]), 0)) for p in client.pools()]


def _refuse(args: argparse.Namespace, names: tuple[str, ...], what: str) -> None:
    defaults = {"root_gb": 1, "vcpus": 1, "memory_mb": 512}
    given = [n for n in names if getattr(args, n, None) not in (None, defaults.get(n) if args.command == "select"
                                                                else None)]
    if given:
        options = ", ".join("--" + n.replace("_", "-") for n in given)
        raise UsageError(f"{options}: {what}")


def is_volume(client: Any, args: argparse.Namespace) -> bool:
    """Whether ``--namespace`` (or GANTT_NAMESPACE) names a volume namespace: its face is Cinder's (pools,
    volumes), so the commands speak it. One /health read, only for a named namespace."""
    from gantt.model.namespaces import DEFAULT

    name = getattr(args, "namespace", None) or os.environ.get("GANTT_NAMESPACE") or None
    if name is None or name == DEFAULT:
        return False
    served = client.health().namespaces or {}
    if name in served:
        args.namespace = name
    return bool(served.get(name, {}).get("kind") == "volume")  # unknown: the call's 404 names the namespace


def hosts(client: Any, args: argparse.Namespace) -> int:
    namespace = args.namespace
    if args.action == "list":
        records, caption = page(_records(client), args, lambda r: f"{r['host']}#{r['pool']}")
        emit_list(terminal.console, Listing(POOL_COLUMNS, records, title=f"{len(records)} pools (volume "
                                                                          f"namespace {namespace})",
                                            caption=caption), args)
        return 0
    if args.action in ("set", "disable", "enable"):
        raise UsageError(f"hosts {args.action}: a volume backend changes by its own report (Cinder's "
                         "update_service_capabilities), not by an operator's edit; 'gantt hosts delete' then "
                         "'gantt hosts create' replaces a pool made here")
    backend_pools = [r for r in _records(client) if r["host"] == args.name]
    pools = [r for r in backend_pools if args.node in (None, r["pool"])]
    what = f"{args.name}{'#' + args.node if args.node else ''}"
    if args.action == "show":
        if not pools:
            raise NotFound(f"no pool {what} in volume namespace {namespace}", field="host")
        if len(pools) > 1:
            names = ", ".join(p["pool"] for p in pools)
            raise UsageError(f"backend {args.name} has pools {names}: name one with --node POOL")
        emit_one(terminal.console, POOL_COLUMNS, pools[0], args,
                 title=f"pool {pools[0]['backend_id'] or what}")
        return 0
    if args.action == "delete":
        held = [a.consumer_uuid for a in client.allocations()
                if a.host == args.name and args.node in (None, a.nodename)]
        if not pools:
            raise NotFound(f"no pool {what} in volume namespace {namespace}", field="host")
        if held and not args.yes:
            raise Conflict(f"{what} holds {len(held)} volume(s) ({', '.join(held[:5])}"
                           f"{', …' if len(held) > 5 else ''}): deleting it releases them; add --yes to do so",
                           field="host")
        revision = client.delete_backend(args.name, args.node)
        released = f", released {len(held)} volume(s)" if held else ""
        return done(args, f"deleted {what}{released} (revision {revision})", host=args.name, pool=args.node,
                    released=held, revision=revision)
    # create: one pool of --disk-gb, as a backend with a single pool reports it
    _refuse(args, _COMPUTE_CAPACITY, "a volume pool has a capacity in GiB only (--disk-gb)")
    if args.disk_gb is None:
        raise UsageError("hosts create in a volume namespace needs --disk-gb (the pool's capacity in GiB); "
                         "--node names the pool (default: the backend's name after '@')")
    if backend_pools:
        # A backend's report replaces all of its pools (Cinder's update_service_capabilities): another pool
        # cannot be added beside the ones it has without restating them, which would recount their volumes.
        names = ", ".join(p["pool"] for p in backend_pools)
        raise Conflict(f"backend {args.name} exists already (pools {names}); its report names all its pools at "
                       "once: delete it to make it again", field="host")
    backend = args.name.partition("@")[2] or args.name
    pool = args.node or backend
    report: dict[str, Any] = {
        "host": args.name, "capabilities": {"volume_backend_name": backend},
        "pools": [{"pool_name": pool, "total_capacity_gb": args.disk_gb, "free_capacity_gb": args.disk_gb,
                   "reserved_percentage": 0}]}
    if args.disable:
        report["service"] = {"disabled": True}
    revision = client.report_backend(report)
    return done(args, f"created pool {args.name}#{pool} of {args.disk_gb} GiB (revision {revision})",
                host=args.name, pool=pool, revision=revision)


def select(client: Any, args: argparse.Namespace, spec: dict[str, Any] | None) -> int:
    """``spec``: a whole VolumeRequest from --spec, sent as it is; else one built from the options."""
    if spec is None:
        if args.dry_run:
            raise UsageError("select --dry-run: a volume namespace has no dry run (no /candidates); without it "
                             "the first pool is claimed")
        _refuse(args, _COMPUTE_REQUEST, "for compute namespaces; a volume request is --size GiB (and --extra-spec "
                                        "for its volume type, --az, --project, --user, --hint)")
        if args.num_instances != 1 or len(args.instance_uuid or ()) > 1:
            raise UsageError("select: a volume namespace places one volume at a time (one --instance-uuid, the "
                             "volume id)")
        volume = (args.instance_uuid or [None])[0] or str(uuidlib.uuid4())
        properties: dict[str, Any] = {"size": args.size if args.size is not None else 1}
        for key, value in (("availability_zone", args.az), ("project_id", args.project), ("user_id", args.user)):
            if value:
                properties[key] = value
        spec = {"volume_id": volume, "volume_properties": properties}
        if args.extra_spec:
            spec["volume_type"] = {"extra_specs": pairs(args.extra_spec, "--extra-spec")}
        if args.hint:
            spec["scheduler_hints"] = hints(args.hint)
    picks = client.select_volume(spec)
    first = picks[0]
    records = [{"volume_id": spec.get("volume_id"), "host": first["host"], "pool": first["pool"],
                "backend_id": first["backend_id"], "alternates": [p["backend_id"] for p in picks[1:]],
                "weight": first["weight"]}]
    emit_list(terminal.console, Listing(SELECTION_COLUMNS, records, title="placed"), args)
    return 0


def refuse(command: str, namespace: str) -> None:
    what = {"aggregates": "aggregates (Cinder has none: a pool's zone is its backend's availability_zone)",
            "migrations": "moves (Gantt does not serve Cinder's retype or migrate yet)"}[command]
    raise UsageError(f"{command}: volume namespace {namespace} has no {what}")
