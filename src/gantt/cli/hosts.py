"""``gantt hosts`` and ``gantt aggregates``: the cloud's compute nodes (list, show, create by a report, set,
disable, enable, delete) and the aggregates over them (as openstackclient's aggregate commands)."""

from __future__ import annotations

import argparse
import uuid as uuidlib
from typing import Any

import msgspec

from gantt.cli import terminal, volume
from gantt.cli.options import client_options, open_client, pairs, uuid_value
from gantt.cli.output import Column, Listing, emit_list, emit_one
from gantt.cli.terminal import UsageError, done, fmt_number


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.0f} h ago"


def _usage(inventory: Any) -> dict[str, float] | None:
    if inventory is None:
        return None
    return {"used": inventory.capacity - inventory.free, "capacity": inventory.capacity}


def _show_usage(value: dict[str, float] | None) -> str:
    return "-" if value is None else f"{fmt_number(value['used'])}/{fmt_number(value['capacity'])}"


def _show_inventory(value: dict[str, Any] | None) -> str:
    if value is None:
        return "-"
    return (f"used {fmt_number(value['reported_used'])} + in flight {fmt_number(value['in_flight'])}, free "
            f"{fmt_number(value['free'])} of {fmt_number(value['capacity'])} (ratio {value['allocation_ratio']:g})")


def _state(host: Any) -> str:
    if host.forced_down:
        return "forced down"
    if not host.up:
        return "down"
    return "disabled" if host.disabled else "up"


_STATE_STYLE = {"up": "green", "down": "red", "forced down": "red", "disabled": "yellow"}
_CLASSIC = ("VCPU", "MEMORY_MB", "DISK_GB")


def _state_style(value: Any) -> str | None:
    return _STATE_STYLE.get(value)


def _count(value: Any) -> str:
    return str(len(value or ()))


HOST_COLUMNS = [
    Column("host"), Column("nodename"), Column("availability_zone"),
    Column("state", style=_state_style), Column("disabled_reason", default=False),
    Column("last_report", show=_ago, right=True),
    *(Column(rc, show=_show_usage, right=True) for rc in _CLASSIC),
    Column("allocations", show=_count, right=True),
    Column("uuid", default=False), Column("host_ip", default=False), Column("hypervisor_type", default=False),
    Column("num_instances", default=False), Column("traits", default=False), Column("aggregates", default=False),
    Column("instances", default=False), Column("updated_at", default=False),
]


def _shown_names(h: Any) -> tuple[str, str]:
    """(host, node) as a person knows them: a provider made through Placement is keyed by its uuid, and known by
    its name (which every command takes in place of the host)."""
    if h.name and h.host == h.uuid:
        return h.name, h.name if h.nodename == h.uuid else h.nodename
    return h.host, h.nodename


def _host_record(h: Any) -> dict[str, Any]:
    record = {name: getattr(h, name) for name in ("availability_zone", "disabled_reason",
                                                  "uuid", "host_ip", "hypervisor_type", "num_instances", "traits",
                                                  "aggregates", "instances", "allocations", "updated_at")}
    record["host"], record["nodename"] = _shown_names(h)
    record["state"] = _state(h)
    record["last_report"] = h.last_report_seconds_ago
    for rc in _CLASSIC:
        record[rc] = _usage(h.inventories.get(rc))
    return record


def _show_host(args: argparse.Namespace, host: Any) -> int:
    record = {name: getattr(host, name) for name in msgspec.structs.asdict(host) if name != "inventories"}
    record["host"], record["nodename"] = _shown_names(host)
    record["state"] = _state(host)
    record["last_report"] = host.last_report_seconds_ago
    inventories = {rc: msgspec.structs.asdict(inv) for rc, inv in host.inventories.items()}
    record.update(inventories)
    names = ["host", "nodename", "uuid", "name", "availability_zone", "state", "disabled_reason", "up", "disabled",
             "forced_down", "last_report", "updated_at", "hypervisor_type", "hypervisor_version",
             "hypervisor_hostname", "host_ip", "num_instances", "num_io_ops", "failed_builds", "free_ram_mb",
             "free_disk_mb", "aggregates", "traits"]
    columns = [Column(n, show=_ago) if n == "last_report" else Column(n) for n in names]
    columns += [Column(rc, show=_show_inventory) for rc in inventories]
    columns += [Column("instances"), Column("allocations")]
    emit_one(terminal.console, columns, record, args, title=f"{record['host']}/{record['nodename']}")
    return 0


def _delete_host(client: Any, args: argparse.Namespace) -> int:
    """Deleting a node removes what is booked on it (its parts of allocations; their parts on other nodes stay):
    say so, and do it only when asked twice (``--yes``, sent as the server's ``force``)."""
    from gantt.model import Conflict, InvalidRequest

    try:
        nodes = [client.host(args.name, args.node)]  # one read, not the whole cloud's listing
    except InvalidRequest:  # a host with several nodes and none named: every node goes
        nodes = [h for h in client.hosts() if h.host == args.name]
    held = [c for h in nodes for c in h.allocations]
    what = _what(args)
    if held and not args.yes:
        raise Conflict(f"{what} holds {len(held)} allocation(s) ({', '.join(held[:5])}{', …' if len(held) > 5 else ''})"
                       ": deleting it releases them there (their parts on other hosts stay); add --yes to do so",
                       field="host")
    # --yes is the server's force: without it the server refuses too (409), should an allocation land meanwhile
    revision = client.delete_host(args.name, args.node, force=bool(args.yes))
    released = f", released {len(held)} allocation(s) there" if held else ""
    return done(args, f"deleted {what}{released} (revision {revision})", host=args.name, node=args.node,
                released=held, revision=revision)


def _what(args: argparse.Namespace) -> str:
    return f"{args.name}{'/' + args.node if args.node else ''}"


def _host_stats(args: argparse.Namespace) -> dict[str, Any]:
    """The report fields hosts create and set name: classic capacities, traits, further inventories."""
    stats: dict[str, Any] = {}
    for option, key in (("vcpus", "vcpus"), ("memory_mb", "memory_mb"), ("disk_gb", "local_gb")):
        value = getattr(args, option)
        if value is not None:
            stats[key] = value
    for option, key in (("cpu_ratio", "cpu_allocation_ratio"), ("ram_ratio", "ram_allocation_ratio"),
                        ("disk_ratio", "disk_allocation_ratio")):
        value = getattr(args, option)
        if value is not None:
            stats[key] = value
    if args.trait is not None:
        stats["traits"] = args.trait
    if args.inventory:
        inventories: dict[str, Any] = {}
        for rc, total in pairs(args.inventory, "--inventory").items():
            if not total.isascii() or not total.isdigit():
                raise UsageError(f"--inventory {rc}={total}: the total must be a whole number")
            inventories[rc] = {"total": int(total)}
        stats["inventories"] = inventories
    if args.hypervisor_type is not None:
        stats["hypervisor_type"] = args.hypervisor_type
    return stats


def _create_host(client: Any, args: argparse.Namespace) -> int:
    """A host report sent by the operator: the host exists, and is up until service_down_time passes without
    a report from it (its own agent's, or this command's again)."""
    from gantt.model import Conflict, InvalidRequest, NotFound

    try:
        client.host(args.name, args.node)
    except NotFound:
        pass
    except InvalidRequest:  # several nodes and none named: the host exists
        raise Conflict(f"host {args.name} exists already: change it with 'gantt hosts set'", field="host") from None
    else:
        raise Conflict(f"host {_what(args)} exists already: change it with 'gantt hosts set'", field="host")
    stats = _host_stats(args)
    if "inventories" not in stats and not ({"vcpus", "memory_mb", "local_gb"} <= stats.keys()):
        raise UsageError("hosts create needs --vcpus, --memory-mb and --disk-gb (or --inventory RC=TOTAL)")
    if args.disable or args.reason:
        stats["service"] = {"disabled": bool(args.disable), "disabled_reason": args.reason}
    # A node without a uuid is no resource provider: Placement (openstack resource provider list) would not
    # show it. Nova's compute node has one; a host made here gets one too, given or new.
    if args.uuid:
        try:
            taken = client.host(args.uuid)  # the /v1 face finds a node by its provider uuid too
        except (NotFound, InvalidRequest):
            pass
        else:
            raise Conflict(f"uuid {args.uuid} is node {taken.host}/{taken.nodename}'s already", field="uuid")
    stats["uuid"] = args.uuid or str(uuidlib.uuid4())
    revision = client.update_resource_stats([args.name, args.node] if args.node else args.name, stats)
    return done(args, f"created {_what(args)} (uuid {stats['uuid']}, revision {revision}); it is down once it "
                      "has not reported for service_down_time", host=args.name, node=args.node,
                uuid=stats["uuid"], revision=revision)


def _set_host(client: Any, args: argparse.Namespace) -> int:
    stats = _host_stats(args)
    action = args.action
    if action in ("disable", "enable"):
        stats["service"] = {"disabled": action == "disable", "disabled_reason": args.reason}
    elif not stats:
        raise UsageError("hosts set: nothing to change (give --vcpus, --memory-mb, --disk-gb, --trait, "
                         "--inventory, a ratio or --hypervisor-type)")
    revision = client.update_host(args.name, stats, args.node)
    verb = {"set": "set", "disable": "disabled", "enable": "enabled"}[action]
    reason = f" ({args.reason})" if action == "disable" and args.reason else ""
    return done(args, f"{verb} {_what(args)}{reason} (revision {revision})", host=args.name, node=args.node,
                revision=revision, **({"disabled": action == "disable"} if action != "set" else {}))


def cmd_hosts(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        if volume.is_volume(client, args):
            return volume.hosts(client, args)
        if args.action == "delete":
            return _delete_host(client, args)
        if args.action == "create":
            return _create_host(client, args)
        if args.action in ("set", "disable", "enable"):
            return _set_host(client, args)
        if args.action == "show":
            return _show_host(args, client.host(args.name, args.node))
        # One more than asked: whether more follow is said under the table.
        hosts = client.hosts(limit=args.limit + 1 if args.limit else None, marker=args.marker)
    more = bool(args.limit) and len(hosts) > args.limit
    hosts = hosts[: args.limit] if args.limit else hosts
    caption = f"first {args.limit} shown: --marker {_marker(hosts[-1])} for the next ones" if more else None
    emit_list(terminal.console, Listing(HOST_COLUMNS, [_host_record(h) for h in hosts],
                                        title=f"{len(hosts)} compute nodes", caption=caption), args)
    return 0


def _marker(host: Any) -> str:
    return host.host if host.nodename == host.host else f"{host.host}/{host.nodename}"


# ---------------------------------------------------------------------------------------- aggregates

AGGREGATE_COLUMNS = [Column("id"), Column("name"), Column("hosts"), Column("metadata"),
                     Column("uuid", default=False)]


def _aggregate_record(agg: Any) -> dict[str, Any]:
    return {"id": agg.key, "name": agg.name, "hosts": list(agg.hosts), "metadata": dict(sorted(agg.metadata.items())),
            "uuid": agg.uuid}


def cmd_aggregates(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        if volume.is_volume(client, args):
            volume.refuse("aggregates", args.namespace)
        if args.action in ("create", "set", "add-host", "remove-host"):
            return _edit_aggregate(client, args)
        if args.action == "delete":
            revision = client.delete_aggregate(args.id)
            return done(args, f"aggregate {args.id} deleted (revision {revision})", id=args.id, revision=revision)
        if args.action == "show":
            aggregate = client.aggregate(args.id)
            emit_one(terminal.console, AGGREGATE_COLUMNS, _aggregate_record(aggregate), args,
                     title=f"aggregate {args.id}")
            return 0
        aggregates = client.aggregates()
    emit_list(terminal.console, Listing(AGGREGATE_COLUMNS, [_aggregate_record(a) for a in aggregates],
                                        title=f"{len(aggregates)} aggregates"), args)
    return 0


def _edit_aggregate(client: Any, args: argparse.Namespace) -> int:
    """create / set / add-host / remove-host, as openstackclient's aggregate commands do: ``set`` merges what it
    names into the aggregate (name, properties, zone) and keeps the rest; hosts change only by name."""
    from gantt.model import Conflict, InvalidRequest, NotFound

    try:
        current: Any = client.aggregate(args.id)
    except NotFound:
        current = None
    if args.action == "create" and current is not None:
        raise Conflict(f"aggregate {args.id} exists already: change it with 'gantt aggregates set'", field="id")
    if args.action != "create" and current is None:
        raise NotFound(f"no aggregate {args.id}: make it with 'gantt aggregates create'", field="id")
    hosts = list(current.hosts) if current is not None else []
    metadata = dict(current.metadata) if current is not None else {}
    name = current.name if current is not None else None
    if args.action == "add-host":
        hosts += [h for h in args.host if h not in hosts]
    elif args.action == "remove-host":
        missing = [h for h in args.host if h not in hosts]
        if missing:
            raise InvalidRequest(f"aggregate {args.id} has no host {', '.join(missing)}", field="host")
        hosts = [h for h in hosts if h not in args.host]
    else:
        metadata.update(pairs(args.property, "--property"))
        if args.zone:
            metadata["availability_zone"] = args.zone
        name = args.name or name
        if args.hosts is not None:
            hosts = list(args.hosts)
    body: dict[str, Any] = {"id": args.id, "hosts": hosts, "metadata": metadata}
    if name:
        body["name"] = name
    revision = client.update_aggregate(body)
    verb = {"create": "created", "set": "set", "add-host": "updated", "remove-host": "updated"}[args.action]
    return done(args, f"aggregate {args.id} {verb} (revision {revision})", id=args.id, hosts=hosts,
                revision=revision)


HOST_ACTIONS = ["list", "show", "create", "set", "disable", "enable", "delete"]


def add_hosts(sub: Any) -> None:
    p = sub.add_parser("hosts", aliases=["host"],
                       help="list, show, create, set, disable, enable or delete compute hosts",
                       description="create sends a host report (the host is up until service_down_time passes "
                                   "without another); set, disable and enable change the host's record without "
                                   "counting as a report, and keep what they do not name (Nova's 'openstack "
                                   "compute service set --disable --disable-reason'). A disabled host keeps its "
                                   "allocations; ComputeFilter removes it from decisions.")
    client_options(p)
    p.add_argument("action", nargs="?", choices=HOST_ACTIONS, default="list", help="what to do (default list)")
    p.add_argument("name", nargs="?", help="the host (all but list)")
    p.add_argument("--node", help="one node of a host with several (bare metal)")
    capacity = p.add_argument_group("capacity (create, set)")
    capacity.add_argument("--vcpus", type=int, help="physical CPUs (the VCPU inventory's total)")
    capacity.add_argument("--memory-mb", type=int, help="RAM in MiB")
    capacity.add_argument("--disk-gb", type=int, help="local disk in GiB")
    capacity.add_argument("--cpu-ratio", type=float, help="VCPU allocation ratio (default [DEFAULT] "
                                                          "initial_cpu_allocation_ratio)")
    capacity.add_argument("--ram-ratio", type=float, help="MEMORY_MB allocation ratio")
    capacity.add_argument("--disk-ratio", type=float, help="DISK_GB allocation ratio")
    capacity.add_argument("--inventory", action="append", metavar="RC=TOTAL",
                          help="an inventory of any resource class, e.g. CUSTOM_GPU=4 (repeatable)")
    capacity.add_argument("--trait", action="append", metavar="TRAIT",
                          help="a trait of the host (repeatable; set replaces the whole list)")
    capacity.add_argument("--hypervisor-type", help="hypervisor kind (QEMU, ironic, …)")
    p.add_argument("--uuid", type=uuid_value, help="create: the node's uuid, its resource provider's in Placement "
                                                   "(default: a new one; Nova's compute node uuid to match a Nova "
                                                   "cloud)")
    p.add_argument("--disable", action="store_true", help="create: register the host disabled")
    p.add_argument("--reason", help="disable (or create --disable): why, shown in 'gantt hosts show'")
    p.add_argument("--yes", action="store_true", help="delete: also when allocations are booked there (its parts "
                                                     "of them are removed)")
    p.add_argument("--limit", type=int, default=50, help="list: at most this many nodes (default %(default)s; 0: "
                                                          "all)")
    p.add_argument("--marker", help="list: start after this node (host, or host/node), as the caption says")
    p.set_defaults(func=cmd_hosts)


def add_aggregates(sub: Any) -> None:
    p = sub.add_parser("aggregates", aliases=["aggregate"],
                       help="list, show, create, set, add-host, remove-host or delete aggregates",
                       description="set changes only what it names (name, properties, zone; --hosts replaces "
                                   "the member list); add-host and remove-host change members one by one")
    client_options(p)
    p.add_argument("action", nargs="?", default="list", help="what to do (default list)",
                   choices=["list", "show", "create", "set", "add-host", "remove-host", "delete"])
    p.add_argument("id", nargs="?", help="aggregate id (chosen by you: a name or a number)")
    p.add_argument("host", nargs="*", help="hosts, for add-host and remove-host")
    p.add_argument("--name", help="display name")
    p.add_argument("--hosts", action="extend", nargs="*", help="the whole member list (replaces it; repeatable; "
                                                                "--hosts alone empties it)")
    p.add_argument("--property", "--metadata", dest="property", action="extend", nargs="+", metavar="KEY=VALUE",
                   help="metadata to add or change (others are kept; repeatable)")
    p.add_argument("--zone", help="shorthand for --property availability_zone=ZONE")
    p.set_defaults(func=cmd_aggregates)


