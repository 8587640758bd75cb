"""The ``gantt`` command: run the service, talk to it, audit a store, run benchmarks, the simulator, the demo.

Client commands take ``--url`` (GANTT_URL, default http://127.0.0.1:8780), ``--token`` (GANTT_TOKEN) and
``--namespace`` (GANTT_NAMESPACE, default the service's default namespace, compute).
Exit status: see EXIT_STATUS (printed by ``gantt --help``).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import uuid as uuidlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import msgspec
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gantt.base.version import __version__
from gantt.cli.output import (
    Column,
    Listing,
    OutputError,
    add_output_options,
    emit_list,
    emit_one,
    json_requested,
    print_renderables,
    show_value,
    write_json_error,
)
from gantt.model import Explanation, GanttError, NoValidHost

# Messages are printed with soft_wrap (one line whatever the width: piped, rich would wrap them at 80 columns);
# tables go through print_renderables, which draws them whole when piped and fits them to a terminal.
console = Console()
err_console = Console(stderr=True)
REFUSED = 1
USAGE = 2
STORE_UNUSABLE = 3
NO_ANSWER = 4
EXIT_STATUS = (
    "exit status: 0 done; 1 the service answered no (NoValidHost, not found, conflict, a refused request) or "
    "the audit found violations; 2 bad usage or configuration (nothing was sent); 3 the store cannot be used "
    "(serve, audit: no such file, not a Gantt store, damaged, read-only, etcd unreachable); 4 no answer from "
    "the service (cannot connect, timed out, or a server-side error, 5xx): try again or check the service; "
    "130 interrupted.")


# ------------------------------------------------------------------------------------------ helpers


def _client(args: argparse.Namespace) -> Any:
    from gantt.client import SchedulerClient

    return SchedulerClient(args.url, token=args.token, namespace=getattr(args, "namespace", None))


def _pairs(items: Sequence[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} must be KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"


def explanation_table(explanation: Explanation, title: str = "No valid host") -> Group:
    """The filters' table, then why in words (a line each, not a caption: a caption wraps at the table's width)."""
    table = Table(title=f"{title}: {explanation.hosts} hosts considered", title_justify="left")
    table.add_column("filter")
    table.add_column("before", justify="right")
    table.add_column("removed", justify="right")
    table.add_column("after", justify="right")
    for step in explanation.steps:
        style = "bold red" if step.removed and step.after == 0 else ("yellow" if step.removed else "dim")
        table.add_row(step.name, str(step.before), str(step.removed), str(step.after), style=style)
    captions = []
    if explanation.reason:
        captions.append(f"reason: {explanation.reason}")
    for miss in explanation.nearest_miss:
        if miss.constraint:  # no amount of free room helps: say what does block, not "short by 0"
            captions.append(f"{miss.resource_class} {miss.requested} can never fit: {miss.constraint}")
            continue
        where = f" on {miss.host}" + (f"/{miss.nodename}" if miss.nodename and miss.nodename != miss.host else "") \
            if miss.host else ""
        captions.append(f"nearest {miss.resource_class}: {_fmt(miss.best_free)} free of {miss.requested} asked"
                        f"{where} (short by {_fmt(miss.short_by)})")
    if explanation.down:
        captions.append(f"{explanation.down} node(s) down: no report for > {explanation.service_down_time:g} s")
    return Group(table, *(Text(line) for line in captions))


class UsageError(Exception):
    """Bad usage found after parsing (exit 2, as argparse's own errors)."""


def _done(args: argparse.Namespace, message: str, **result: Any) -> int:
    """What a command that changes something prints: a sentence, or (-f json|yaml) the result as an object."""
    fmt = getattr(args, "format", None) or "table"
    if fmt in ("json", "yaml"):
        columns = [Column(name) for name in result]
        emit_one(console, columns, result, args)
    else:
        console.print(escape(message), soft_wrap=True)  # one line per message, whatever the width
    return 0


def _report_error(error: GanttError, args: argparse.Namespace | None = None) -> int:
    # A 5xx is no answer to the question (the store behind the service failed, a bug): a script may retry it,
    # unlike a refusal.
    status = NO_ANSWER if error.status >= 500 else REFUSED
    if args is not None and getattr(args, "format", None) == "json":
        explanation = error.explanation if isinstance(error, NoValidHost) else None
        write_json_error(error.status, error.title, error.message, field=error.field, explanation=explanation)
        return status
    if isinstance(error, NoValidHost) and error.explanation is not None:
        print_renderables(err_console, explanation_table(error.explanation))
        return status
    where = f" (field {error.field})" if error.field else ""
    err_console.print(f"[bold red]{escape(error.title)}[/]: {escape(error.message)}{escape(where)}", soft_wrap=True)
    return status


# --------------------------------------------------------------------------------------------- serve


def cmd_serve(args: argparse.Namespace) -> int:
    from gantt.compute.scheduler import Scheduler
    from gantt.config import load_config
    from gantt.service.server import ServeError, ServeOptions, serve

    config_path = args.config or os.environ.get("GANTT_CONFIG") or None
    try:
        config = load_config(config_path, log_unused=False)  # listed once by the server's start-up line
        Scheduler(config)  # unknown filters or weighers: say so now, not in every worker's log
    except (GanttError, ValueError, OSError) as exc:
        err_console.print(f"gantt serve: bad configuration: {exc}", markup=False, soft_wrap=True)
        return 2
    options = ServeOptions(
        store=args.store or config.gantt.store, host=args.host or config.gantt.bind,
        port=args.port if args.port is not None else config.gantt.port, config_path=config_path,
        workers=args.workers or config.scheduler.workers or 1,
        token=os.environ.get("GANTT_TOKEN") or config.gantt.token, fd=args.fd,
        log_level=args.log_level)
    try:
        return serve(options)
    except ServeError as exc:
        err_console.print(f"gantt serve: {exc}", markup=False, soft_wrap=True)  # "[gantt] token": no markup
        return STORE_UNUSABLE if exc.store else 2
    except OSError as exc:
        err_console.print(f"gantt serve: cannot bind {options.host}:{options.port}: {exc}", markup=False,
                          soft_wrap=True)
        return 2


# --------------------------------------------------------------------------------------------- hosts


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
    return "-" if value is None else f"{_fmt(value['used'])}/{_fmt(value['capacity'])}"


def _show_inventory(value: dict[str, Any] | None) -> str:
    if value is None:
        return "-"
    return (f"used {_fmt(value['reported_used'])} + in flight {_fmt(value['in_flight'])}, free "
            f"{_fmt(value['free'])} of {_fmt(value['capacity'])} (ratio {value['allocation_ratio']:g})")


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
    emit_one(console, columns, record, args, title=f"{record['host']}/{record['nodename']}")
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
    return _done(args, f"deleted {what}{released} (revision {revision})", host=args.name, node=args.node,
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
        for rc, total in _pairs(args.inventory, "--inventory").items():
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
    return _done(args, f"created {_what(args)} (uuid {stats['uuid']}, revision {revision}); it is down once it "
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
    done = {"set": "set", "disable": "disabled", "enable": "enabled"}[action]
    reason = f" ({args.reason})" if action == "disable" and args.reason else ""
    return _done(args, f"{done} {_what(args)}{reason} (revision {revision})", host=args.name, node=args.node,
                 revision=revision, **({"disabled": action == "disable"} if action != "set" else {}))


def _volume(client: Any, args: argparse.Namespace) -> bool:
    """Whether ``--namespace`` (or GANTT_NAMESPACE) names a volume namespace: its face is Cinder's (pools,
    volumes), so the commands speak it (gantt.cli.volume). One /health read, only for a named namespace."""
    from gantt.model.namespaces import DEFAULT

    name = getattr(args, "namespace", None) or os.environ.get("GANTT_NAMESPACE") or None
    if name is None or name == DEFAULT:
        return False
    served = client.health().namespaces or {}
    if name in served:
        args.namespace = name
    return bool(served.get(name, {}).get("kind") == "volume")  # unknown: the call's 404 names the namespace


def cmd_hosts(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if _volume(client, args):
            from gantt.cli import volume as cli_volume
            return cli_volume.hosts(client, args)
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
    emit_list(console, Listing(HOST_COLUMNS, [_host_record(h) for h in hosts], title=f"{len(hosts)} compute nodes",
                               caption=caption), args)
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
    with _client(args) as client:
        if _volume(client, args):
            from gantt.cli import volume as cli_volume
            cli_volume.refuse("aggregates", args.namespace)
        if args.action in ("create", "set", "add-host", "remove-host"):
            return _edit_aggregate(client, args)
        if args.action == "delete":
            revision = client.delete_aggregate(args.id)
            return _done(args, f"aggregate {args.id} deleted (revision {revision})", id=args.id, revision=revision)
        if args.action == "show":
            aggregate = client.aggregate(args.id)
            emit_one(console, AGGREGATE_COLUMNS, _aggregate_record(aggregate), args, title=f"aggregate {args.id}")
            return 0
        aggregates = client.aggregates()
    emit_list(console, Listing(AGGREGATE_COLUMNS, [_aggregate_record(a) for a in aggregates],
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
        metadata.update(_pairs(args.property, "--property"))
        if args.zone:
            metadata["availability_zone"] = args.zone
        name = args.name or name
        if args.hosts is not None:
            hosts = list(args.hosts)
    body: dict[str, Any] = {"id": args.id, "hosts": hosts, "metadata": metadata}
    if name:
        body["name"] = name
    revision = client.update_aggregate(body)
    done = {"create": "created", "set": "set", "add-host": "updated", "remove-host": "updated"}[args.action]
    return _done(args, f"aggregate {args.id} {done} (revision {revision})", id=args.id, hosts=hosts,
                 revision=revision)


# -------------------------------------------------------------------------------------------- select


def _spec(args: argparse.Namespace) -> dict[str, Any]:
    if args.spec:
        text = sys.stdin.read() if args.spec == "-" else Path(args.spec).read_text()
        spec: dict[str, Any] = msgspec.json.decode(text)
        return spec
    spec = {"num_instances": args.num_instances}
    if args.vcpus or args.memory_mb or args.root_gb or args.extra_spec or not args.resource:
        spec["flavor"] = {"name": args.flavor, "vcpus": args.vcpus, "memory_mb": args.memory_mb,
                          "root_gb": args.root_gb, "extra_specs": _pairs(args.extra_spec, "--extra-spec")}
    if args.resource:
        try:
            spec["resources"] = {k: int(v) for k, v in _pairs(args.resource, "--resource").items()}
        except ValueError:
            raise UsageError("--resource amounts must be integers") from None
    for key, value in (("availability_zone", args.az), ("project_id", args.project), ("user_id", args.user)):
        if value:
            spec[key] = value
    if args.instance_uuid:
        spec["instance_uuids"] = args.instance_uuid
    if args.migration_uuid:
        spec["migration_uuid"] = args.migration_uuid
    if args.required_trait:
        spec["required_traits"] = args.required_trait
    if args.forbidden_trait:
        spec["forbidden_traits"] = args.forbidden_trait
    if args.hint:
        spec["scheduler_hints"] = _hints(args.hint)
    return spec


def _hints(items: Sequence[str]) -> dict[str, str | list[str]]:
    """``--hint`` pairs as Nova's scheduler_hints: a key given twice is a list (``different_host=a``,
    ``different_host=b``), as openstackclient's ``server create --hint`` makes it."""
    out: dict[str, str | list[str]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--hint must be KEY=VALUE, got {item!r}")
        held = out.get(key)
        if held is None:
            out[key] = value
        elif isinstance(held, list):
            held.append(value)
        else:
            out[key] = [held, value]
    return out


def _rounded(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else show_value(value)


def _dry_run(client: Any, args: argparse.Namespace, spec: dict[str, Any]) -> int:
    result = client.candidates(spec, limit=args.limit)
    weighers = sorted({name for c in result.candidates for name in c.weights})
    columns = [Column("rank", right=True), Column("host"), Column("nodename"), Column("availability_zone"),
               Column("weight", show=_rounded, right=True),
               *(Column(w, show=_rounded, right=True) for w in weighers), Column("uuid", default=False)]
    records = [{"rank": i, "host": c.host, "nodename": c.nodename, "availability_zone": c.availability_zone,
                "weight": c.weight, "uuid": c.uuid, **{w: c.weights.get(w, 0.0) for w in weighers}}
               for i, c in enumerate(result.candidates, 1)]
    if not records:
        raise NoValidHost(result.explanation.summary(), result.explanation)
    passed = result.explanation.steps[-1].after if result.explanation.steps else 0
    emit_list(console, Listing(columns, records, title=f"candidates (dry run, nothing claimed): {len(records)} "
                                                       f"shown, {passed} pass",
                               extras=[explanation_table(result.explanation, "filters")]), args)
    return 0


SELECTION_COLUMNS = [Column("consumer_uuid"), Column("host"), Column("nodename"), Column("availability_zone"),
                     Column("allocation"), Column("alternates"), Column("weight", default=False, show=_rounded)]


def cmd_select(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if _volume(client, args):
            from gantt.cli import volume as cli_volume
            return cli_volume.select(client, args, _spec(args) if args.spec else None)
        if args.size is not None:
            raise UsageError("select --size is a volume's size, for volume namespaces (a flavor's disk is "
                             "--root-gb)")
        spec = _spec(args)
        if args.dry_run:
            return _dry_run(client, args, spec)
        answer = client.select_destinations(spec)
    records = [{"consumer_uuid": s[0].consumer_uuid, "host": s[0].host, "nodename": s[0].nodename,
                "availability_zone": s[0].availability_zone, "allocation": s[0].allocation,
                "alternates": [a.host for a in s[1:]], "weight": s[0].weight} for s in answer]
    emit_list(console, Listing(SELECTION_COLUMNS, records, title="placed"), args)
    return 0


# ------------------------------------------------------------------------------------------ capacity

CAPACITY_COLUMNS = [Column("host"), Column("nodename"), Column("instances", right=True)]


def _capacity_question(args: argparse.Namespace) -> dict[str, Any]:
    flavor = {"name": args.flavor, "vcpus": args.vcpus, "memory_mb": args.memory_mb, "root_gb": args.root_gb}
    spec: dict[str, Any] = {"flavor": flavor}
    for key, value in (("availability_zone", args.az), ("project_id", args.project)):
        if value:
            spec[key] = value
    without = {key: values for key, values in (("hosts", args.without_host), ("aggregates", args.without_aggregate),
                                               ("zones", args.without_zone)) if values}
    return {"requests": [spec], "limit": args.limit, **({"without": without} if without else {})}


def cmd_capacity(args: argparse.Namespace) -> int:
    if args.format in ("json", "yaml") and args.column:
        raise UsageError("-c narrows a table's columns; -f json and yaml print the whole answer")
    with _client(args) as client:
        answer = client.capacity(_capacity_question(args))
    if args.format in ("json", "yaml"):
        emit_one(console, [Column("requests"), Column("displaced")], msgspec.structs.asdict(answer), args)
        return 0
    [room] = answer.requests
    zones = ", ".join(f"{zone} {count:,}" for zone, count in room.by_zone.items()) or "none"
    title = f"{room.flavor}: {room.instances:,} more fit on {room.nodes:,} nodes ({zones})"
    if room.instances_before is not None:
        title += f"; {room.instances_before:,} on {room.nodes_before:,} nodes with the hosts taken away"
    extras = []
    if room.by_aggregate:
        racks = Table(title="per aggregate", title_justify="left")
        racks.add_column("aggregate")
        racks.add_column("instances", justify="right")
        for name, count in room.by_aggregate.items():
            racks.add_row(name, f"{count:,}")
        extras.append(racks)
    displaced = answer.displaced
    if displaced is not None:
        lost = Table(title=f"taken away: {displaced.nodes} nodes holding {displaced.consumers} consumers",
                     title_justify="left")
        for name in ("held there", "consumers", "fit again elsewhere"):
            lost.add_column(name, justify="left" if name == "held there" else "right")
        for shape in displaced.shapes:
            lost.add_row(show_value(shape.resources), str(shape.consumers), str(shape.fit_again))
        extras.append(lost)
    records = [{"host": r.host, "nodename": r.nodename, "instances": r.instances} for r in room.top]
    if (args.format or "table") == "table":
        console.print(escape(title), soft_wrap=True)  # a sentence, not cut to the table's width
    emit_list(console, Listing(CAPACITY_COLUMNS, records, title="the nodes with the most room", extras=extras), args)
    return 0


def _add_capacity(sub: Any) -> None:
    p = sub.add_parser("capacity", help="how many more instances of a flavor fit, where, and what hosts take with "
                                        "them (claims nothing)",
                       description="Counted by the service's own filters: the same count claims one at a time "
                                   "would reach. --without-* take hosts away first (a rack or a zone lost).")
    _client_options(p)
    p.add_argument("--flavor", default="cli", help="flavor name: a label only (default %(default)s)")
    p.add_argument("--vcpus", type=int, default=1, help="flavor vCPUs (default %(default)s)")
    p.add_argument("--memory-mb", type=int, default=512, help="flavor RAM in MiB (default %(default)s)")
    p.add_argument("--root-gb", type=int, default=1, help="flavor root disk in GiB (default %(default)s)")
    p.add_argument("--az", help="count in this availability zone only")
    p.add_argument("--project", help="project (tenant) id, for tenant isolation")
    p.add_argument("--without-host", action="append", metavar="HOST", help="take this host away (repeat)")
    p.add_argument("--without-aggregate", action="append", metavar="AGGREGATE",
                   help="take this aggregate's hosts away: its id, uuid or name (repeat)")
    p.add_argument("--without-zone", action="append", metavar="ZONE", help="take this zone's hosts away (repeat)")
    p.add_argument("--limit", type=int, default=10, help="nodes with the most room listed (default %(default)s)")
    p.set_defaults(func=cmd_capacity)


# --------------------------------------------------------------------------------------- allocations

ALLOCATION_COLUMNS = [Column("consumer_uuid"), Column("host"), Column("nodename"), Column("resources"),
                      Column("project_id"), Column("confirmed"), Column("user_id", default=False),
                      Column("created_at", default=False), Column("migration_uuid", default=False),
                      Column("instance_uuid", default=False), Column("group", default=False)]


def _allocation_record(a: Any) -> dict[str, Any]:
    record = {c.name: getattr(a, c.name) for c in ALLOCATION_COLUMNS}
    record["created_at"] = _iso(a.created_at)
    return record


def _iso(epoch: float) -> str | None:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z") if epoch > 0 else None


def cmd_allocations(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if args.action == "list" and _volume(client, args):
            from gantt.cli import volume as cli_volume
            return cli_volume.allocations(client, args)
        if args.action == "release":
            revision = client.release(args.consumer)
            return _done(args, f"released {args.consumer} (revision {revision})", consumer_uuid=args.consumer,
                         revision=revision)
        if args.action == "show":
            allocation = client.allocation(args.consumer)
            emit_one(console, ALLOCATION_COLUMNS, _allocation_record(allocation), args,
                     title=f"allocation {args.consumer}")
            return 0
        allocations = client.allocations(limit=args.limit + 1 if args.limit else None, marker=args.marker)
    more = bool(args.limit) and len(allocations) > args.limit
    allocations = allocations[: args.limit] if args.limit else allocations
    caption = f"first {args.limit} shown: --marker {allocations[-1].consumer_uuid} for the next ones" if more \
        else None
    emit_list(console, Listing(ALLOCATION_COLUMNS, [_allocation_record(a) for a in allocations],
                               title=f"{len(allocations)} allocations", caption=caption), args)
    return 0


MIGRATION_COLUMNS = [Column("migration_uuid"), Column("instance_uuid"), Column("source"), Column("destination"),
                     Column("resources"), Column("created_at", default=False)]


def _node_name(host: str, nodename: str) -> str:
    return host if nodename == host else f"{host}/{nodename}"


def _list_migrations(client: Any, args: argparse.Namespace) -> int:
    """The moves in progress: a migration's allocation holds the source (``instance_uuid`` set) until confirm or
    revert; the instance's own allocation is the destination."""
    allocations = client.allocations()
    by_consumer = {a.consumer_uuid: a for a in allocations}
    records = []
    for held in allocations:
        if not held.instance_uuid:
            continue
        dest = by_consumer.get(held.instance_uuid)
        records.append({"migration_uuid": held.consumer_uuid, "instance_uuid": held.instance_uuid,
                        "source": _node_name(held.host, held.nodename),
                        "destination": _node_name(dest.host, dest.nodename) if dest is not None else None,
                        "resources": held.resources, "created_at": _iso(held.created_at)})
    emit_list(console, Listing(MIGRATION_COLUMNS, records, title=f"{len(records)} moves in progress (confirm or "
                                                                 "revert each)"), args)
    return 0


def cmd_migrations(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if _volume(client, args):
            from gantt.cli import volume as cli_volume
            cli_volume.refuse("migrations", args.namespace)
        if args.action == "list":
            return _list_migrations(client, args)
        allocation = (client.confirm_move if args.action == "confirm" else client.revert_move)(args.migration)
    if (args.format or "table") != "table":
        emit_one(console, ALLOCATION_COLUMNS, _allocation_record(allocation), args)
        return 0
    resources = ", ".join(f"{k}={v}" for k, v in allocation.resources.items())
    where = f"{escape(allocation.host)}/{escape(allocation.nodename)} ({resources})"
    if args.action == "confirm":
        console.print(f"confirmed {escape(args.migration)}: dropped the source of "
                      f"{escape(allocation.instance_uuid or '')} on {where}", soft_wrap=True)
    else:
        console.print(f"reverted {escape(args.migration)}: {escape(allocation.consumer_uuid)} back on {where}",
                      soft_wrap=True)
    return 0


# --------------------------------------------------------------------------------------------- audit


def cmd_audit(args: argparse.Namespace) -> int:
    """Audit the store's default namespace and every namespace the config declares (or only ``--namespace``):
    a compute namespace by its resource classes, a volume one by Cinder's capacity rules (volume_replica.audit)."""
    from gantt.config import DEFAULT_NAMESPACE, load_config
    from gantt.model import StoreUnavailable
    from gantt.replication.replica import audit
    from gantt.store.base import open_store
    from gantt.volume.facade import audit as audit_volume

    as_json = args.format == "json"

    def fail(status: int, title: str, message: str) -> int:
        if as_json:
            write_json_error(503 if status == STORE_UNUSABLE else 400, title, message)
        else:
            err_console.print(f"gantt audit: {message}", markup=False, soft_wrap=True)
        return status

    try:
        config = load_config(args.config or os.environ.get("GANTT_CONFIG") or None)
    except (GanttError, ValueError, OSError) as exc:
        return fail(USAGE, "Bad configuration", f"bad configuration: {exc}")
    store_url = args.store or config.gantt.store  # the store gantt serve would open with this config
    namespaces = config.namespaces()
    if args.namespace is not None:
        if args.namespace not in namespaces:
            return fail(USAGE, "Bad usage", f"namespace {args.namespace!r} is not in the config (it declares: "
                                            f"{', '.join(namespaces)}): its kind is unknown")
        namespaces = {args.namespace: namespaces[args.namespace]}
    total = 0
    results = []
    for name, namespace in namespaces.items():
        label = "" if name == DEFAULT_NAMESPACE and len(namespaces) == 1 else f"namespace {name} ({namespace.kind}): "
        try:
            with console.status(f"reading {store_description(store_url)}") if not as_json else _nothing(), \
                    open_store(store_url, create=False, namespace=name) as store:
                snapshot = store.snapshot()
                skipped = list(getattr(store, "skipped", ()))
        except (StoreUnavailable, ValueError) as exc:
            return fail(STORE_UNUSABLE, "Store unusable", f"{label}{exc} (store {store_description(store_url)})")
        problems = [f"unreadable row, skipped: {row}" for row in skipped]
        if namespace.kind == "volume":
            problems += audit_volume(snapshot, namespace.options)
            figures = {"pools": len(snapshot.hosts), "volumes": len(snapshot.allocations)}
        else:
            problems += audit(snapshot, namespace.config)
            figures = {"nodes": len(snapshot.hosts), "allocations": len(snapshot.allocations),
                       "aggregates": len(snapshot.aggregates)}
        results.append({"namespace": name, "kind": namespace.kind, "revision": snapshot.revision, **figures,
                        "violations": problems})
        total += len(problems)
        if as_json:
            continue
        summary = f"{label}{', '.join(f'{v} {k}' for k, v in figures.items())} at revision {snapshot.revision}"
        if not problems:
            console.print(f"[green]audit ok[/]: {escape(summary)}: nothing over capacity", soft_wrap=True)
            continue
        for problem in problems:
            console.print(f"[red]violation[/]: {escape(label + problem)}", soft_wrap=True)
        console.print(f"[bold red]{len(problems)} violation(s)[/] in {escape(summary)}", soft_wrap=True)
    if as_json:
        body = {"store": store_description(store_url), "ok": not total, "violations": total, "namespaces": results}
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(body)).decode() + "\n")
    return REFUSED if total else 0


def _nothing() -> Any:
    import contextlib

    return contextlib.nullcontext()


def store_description(url: str) -> str:
    """A store URL as a person checks it: a SQLite URL with the absolute path of its file (``sqlite:///rel`` is
    relative to the working directory, ``sqlite:////abs`` absolute, as SQLAlchemy reads them)."""
    from gantt.service.server import describe_store

    return describe_store(url)


# ------------------------------------------------------------------------------------ bench, simulate


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[3]


def load_entry(candidates: Sequence[str], func: str = "main") -> Callable[[list[str]], Any] | None:
    """The first importable ``module:main`` of ``candidates`` (dotted names, or paths relative to the repo)."""
    for candidate in candidates:
        module: Any = None
        if candidate.endswith(".py"):
            path = _repo_root() / candidate
            if not path.is_file():
                continue
            spec = importlib.util.spec_from_file_location(f"gantt_bench_{path.stem}", path)
            if spec is None or spec.loader is None:
                continue
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            try:
                module = importlib.import_module(candidate)
            except ModuleNotFoundError as exc:
                if exc.name is not None and candidate.startswith(exc.name):
                    continue  # the module itself is missing; an import error inside it must surface
                raise
        entry = getattr(module, func, None)
        if callable(entry):
            return entry  # type: ignore[no-any-return]
    return None


def _run_entry(entry: Callable[[list[str]], Any], argv: list[str]) -> int:
    result = entry(argv)
    return result if isinstance(result, int) else 0


def cmd_bench(args: argparse.Namespace) -> int:
    candidates = [f"bench/{args.which}.py", f"bench.{args.which}", f"gantt.bench.engine.{args.which}"]
    entry = load_entry(candidates)
    if entry is None:
        err_console.print(f"gantt bench {args.which}: no benchmark found (looked for bench/{args.which}.py with a "
                          f"main(argv) function under {_repo_root()}); it may not be written yet", soft_wrap=True)
        return 2
    return _run_entry(entry, args.args)


def cmd_simulate(args: argparse.Namespace) -> int:
    entry = load_entry(["gantt.sim.cli"])
    if entry is None:
        err_console.print("gantt simulate: the simulator's command line (gantt.sim.cli.main) is not available yet")
        return 2
    return _run_entry(entry, args.args)


def cmd_nova_scheduler(args: argparse.Namespace) -> int:
    try:  # Nova's environment only: gantt.nova imports nova, which core Gantt never does
        from gantt.nova.cmd import main as nova_scheduler
    except ImportError as exc:
        err_console.print(escape(f"gantt nova-scheduler: nova is not installed in this environment ({exc}); install "
                                 "Gantt into Nova's environment: pip install 'gantt[nova]'"), soft_wrap=True)
        return USAGE
    status: int = nova_scheduler(["gantt nova-scheduler", *args.args])
    return status


def cmd_completion(args: argparse.Namespace) -> int:
    from gantt.cli.completion import bash_script, zsh_script

    script = (bash_script if args.shell == "bash" else zsh_script)(build_parser())
    sys.stdout.write(script)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from gantt.cli.demo import run_demo

    return run_demo(hosts=args.hosts, requests=args.requests, concurrency=args.concurrency, store=args.store,
                    stay=args.stay)


# ---------------------------------------------------------------------------------------------- parser

BENCHMARKS = ["engine", "http_api", "cluster"]


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is a JSON object on stdout when the command line asks for JSON."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        if Parser.json_errors:
            write_json_error(2, "Bad usage", message, usage=self.format_usage().strip())
            raise SystemExit(2)
        super().error(message)


def _client_options(parser: argparse.ArgumentParser, *, lister: bool = True) -> None:
    parser.add_argument("--url", default=os.environ.get("GANTT_URL", "http://127.0.0.1:8780"),
                        help="service URL (env GANTT_URL; default %(default)s)")
    parser.add_argument("--token", default=os.environ.get("GANTT_TOKEN"), help="bearer token (env GANTT_TOKEN)")
    parser.add_argument("--namespace", type=_namespace, default=os.environ.get("GANTT_NAMESPACE") or None,
                        help="the namespace to talk to (env GANTT_NAMESPACE; default compute, the service's "
                             "default one)")
    add_output_options(parser, lister=lister)


def _uuid(value: str) -> str:
    try:
        return str(uuidlib.UUID(value))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a UUID") from None


def _namespace(value: str) -> str:
    from gantt.model.namespaces import check_name

    try:
        return check_name(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_serve(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the HTTP service")
    p.add_argument("--store", help="store URL: sqlite:///path (default [gantt] store, sqlite:///gantt.sqlite), "
                                   "etcd://host:port[,…] or memory://")
    p.add_argument("--host", help="address to bind (default [gantt] bind, 127.0.0.1); anything but loopback "
                                  "needs a token")
    p.add_argument("--port", type=int, help="port (default [gantt] port, 8780)")
    p.add_argument("--config", help="config file, TOML or nova.conf-style INI (env GANTT_CONFIG)")
    p.add_argument("--workers", type=int, default=None,
                   help="processes on one store, each with its own replica (default: [scheduler] workers, else 1)")
    p.add_argument("--fd", type=int, help="serve on this inherited listening socket instead of binding")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"],
                   help="log level (default %(default)s); info adds one line per answer on gantt.access")
    p.set_defaults(func=cmd_serve)


def _add_select(sub: Any) -> None:
    p = sub.add_parser("select", help="place a request (or --dry-run: rank candidates with their weights)",
                       description="The request is a flavor of --vcpus, --memory-mb and --root-gb (defaults shown "
                                   "below: --flavor only names it), plus resources, traits and hints; or a whole "
                                   "RequestSpec with --spec.")
    _client_options(p)
    p.add_argument("--spec", help="a RequestSpec as a JSON file ('-': stdin); the options below are then ignored "
                                  "and refused")
    p.add_argument("--flavor", default="cli", help="flavor name: a label only, the amounts are --vcpus, --memory-mb "
                                                   "and --root-gb (default %(default)s)")
    p.add_argument("--vcpus", type=int, default=1, help="flavor vCPUs (default %(default)s)")
    p.add_argument("--memory-mb", type=int, default=512, help="flavor RAM in MiB (default %(default)s)")
    p.add_argument("--root-gb", type=int, default=1, help="flavor root disk in GiB (default %(default)s)")
    p.add_argument("--extra-spec", action="extend", nargs="+", metavar="KEY=VALUE",
                   help="flavor extra specs (repeatable)")
    p.add_argument("--resource", action="extend", nargs="+", metavar="RC=AMOUNT",
                   help="resources beyond the flavor's, by class (repeatable)")
    p.add_argument("--required-trait", action="extend", nargs="+", metavar="TRAIT",
                   help="traits every chosen host must have (repeatable)")
    p.add_argument("--forbidden-trait", action="extend", nargs="+", metavar="TRAIT",
                   help="traits no chosen host may have (repeatable)")
    p.add_argument("--hint", action="extend", nargs="+", metavar="KEY=VALUE",
                   help="scheduler hints (repeatable; a key given twice is a list, as different_host takes)")
    p.add_argument("--az", help="availability zone")
    p.add_argument("--project", help="project (tenant) id, for tenant isolation and aggregate filters")
    p.add_argument("--user", help="user id")
    p.add_argument("--num-instances", type=int, default=1, help="instances to place at once (default %(default)s)")
    p.add_argument("--instance-uuid", action="extend", nargs="+",
                   help="consumer UUIDs (repeatable; asking again returns the same claim)")
    p.add_argument("--migration-uuid", help="move the one --instance-uuid, holding its source under this UUID "
                                            "until 'gantt migrations confirm|revert'")
    p.add_argument("--size", type=int, metavar="GB", help="a volume namespace: the volume's size in GiB (default 1;"
                                                        " --instance-uuid is its volume id)")
    p.add_argument("--dry-run", action="store_true", help="rank candidates, claim nothing")
    p.add_argument("--limit", type=int, default=10, help="candidates shown by --dry-run (default %(default)s)")
    p.set_defaults(func=cmd_select)


HOST_ACTIONS = ["list", "show", "create", "set", "disable", "enable", "delete"]
# openstackclient's nouns are singular ("openstack host list", "aggregate show"): the same commands answer to them
ALIASES = {"host": "hosts", "aggregate": "aggregates", "allocation": "allocations", "migration": "migrations"}


def _add_hosts(sub: Any) -> None:
    p = sub.add_parser("hosts", aliases=["host"],
                       help="list, show, create, set, disable, enable or delete compute hosts",
                       description="create sends a host report (the host is up until service_down_time passes "
                                   "without another); set, disable and enable change the host's record without "
                                   "counting as a report, and keep what they do not name (Nova's 'openstack "
                                   "compute service set --disable --disable-reason'). A disabled host keeps its "
                                   "allocations; ComputeFilter removes it from decisions.")
    _client_options(p)
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
    p.add_argument("--uuid", type=_uuid, help="create: the node's uuid, its resource provider's in Placement (default: "
                                         "a new one; Nova's compute node uuid to match a Nova cloud)")
    p.add_argument("--disable", action="store_true", help="create: register the host disabled")
    p.add_argument("--reason", help="disable (or create --disable): why, shown in 'gantt hosts show'")
    p.add_argument("--yes", action="store_true", help="delete: also when allocations are booked there (its parts "
                                                     "of them are removed)")
    p.add_argument("--limit", type=int, default=50, help="list: at most this many nodes (default %(default)s; 0: "
                                                          "all)")
    p.add_argument("--marker", help="list: start after this node (host, or host/node), as the caption says")
    p.set_defaults(func=cmd_hosts)


def _add_aggregates(sub: Any) -> None:
    p = sub.add_parser("aggregates", aliases=["aggregate"],
                       help="list, show, create, set, add-host, remove-host or delete aggregates",
                       description="set changes only what it names (name, properties, zone; --hosts replaces "
                                   "the member list); add-host and remove-host change members one by one")
    _client_options(p)
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


def _add_allocations(sub: Any) -> None:
    p = sub.add_parser("allocations", aliases=["allocation"], help="list, show or release allocations")
    _client_options(p)
    p.add_argument("action", nargs="?", choices=["list", "show", "release"], default="list",
                   help="what to do (default list)")
    p.add_argument("consumer", nargs="?", help="the consumer (instance or migration UUID), for show and release")
    p.add_argument("--limit", type=int, default=50, help="list: at most this many (default %(default)s; 0: all)")
    p.add_argument("--marker", help="list: start after this consumer, as the caption says")
    p.set_defaults(func=cmd_allocations)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="gantt", description="Gantt: a standalone cloud scheduler.", epilog=EXIT_STATUS)
    parser.add_argument("--version", action="version", version=f"gantt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _add_serve(sub)
    _add_hosts(sub)
    _add_aggregates(sub)
    _add_select(sub)
    _add_capacity(sub)
    _add_allocations(sub)

    p = sub.add_parser("migrations", aliases=["migration"],
                       help="list moves in progress, confirm or revert one (select --migration-uuid)")
    _client_options(p)
    p.add_argument("action", nargs="?", choices=["list", "confirm", "revert"], default="list",
                   help="list (default): the moves whose source is still held; confirm: drop the source; "
                        "revert: back to it")
    p.add_argument("migration", nargs="?", help="the migration UUID the move was made under (confirm, revert)")
    p.set_defaults(func=cmd_migrations)

    p = sub.add_parser("audit", help="check a store: nothing over capacity, no allocation on a missing node")
    p.add_argument("--store", help="store URL (default: the config's [gantt] store, as gantt serve reads it)")
    p.add_argument("--config", help="config file (env GANTT_CONFIG): its store, allocation ratio defaults; the "
                                    "namespaces it declares are audited too, each by its kind's rules")
    p.add_argument("-f", "--format", choices=["table", "json"], default=None,
                   help="output format: table (default) or json (one object: each namespace's figures and "
                        "violations)")
    p.add_argument("--json", action="store_const", dest="format", const="json", help="the same as -f json")
    p.add_argument("--namespace", type=_namespace, default=None,
                   help="audit this namespace only (compute, or one the config declares)")
    p.set_defaults(func=cmd_audit)

    # bench and simulate are parsed by _passthrough; these entries document them in --help.
    p = sub.add_parser("bench", help="run a benchmark (bench/engine.py, bench/http_api.py, bench/cluster.py)")
    p.add_argument("which", choices=BENCHMARKS, help="which benchmark")
    p.add_argument("args", nargs=argparse.REMAINDER, help="passed to the benchmark")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("simulate", help="run the simulator (gantt.sim.cli)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="passed to the simulator")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("nova-scheduler", help="run as Nova's nova-scheduler service (where nova is installed)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="nova-scheduler's own: --config-file /etc/nova/nova.conf …")
    p.set_defaults(func=cmd_nova_scheduler)

    p = sub.add_parser("demo", help="start a service on a temporary store, register hosts, place a burst")
    p.add_argument("--hosts", type=int, default=300, help="hosts to register (default %(default)s)")
    p.add_argument("--requests", type=int, default=1000, help="requests to place (default %(default)s)")
    p.add_argument("--concurrency", type=int, default=32, help="requests in flight at once (default %(default)s)")
    p.add_argument("--store", choices=["sqlite", "memory"], default="sqlite",
                   help="store kind (default %(default)s)")
    p.add_argument("--stay", action="store_true",
                   help="afterwards keep the service and its live view (/ui) up until Ctrl-C")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("completion", help="print a shell completion script (bash or zsh)",
                       description="Load it with: source <(gantt completion bash), or for zsh: "
                                   "source <(gantt completion zsh)")
    p.add_argument("shell", choices=["bash", "zsh"], help="the shell")
    p.set_defaults(func=cmd_completion)
    return parser


_NEEDS = {("hosts", "show"): "name", ("hosts", "delete"): "name", ("hosts", "create"): "name",
          ("hosts", "set"): "name", ("hosts", "disable"): "name", ("hosts", "enable"): "name",
          ("aggregates", "set"): "id", ("aggregates", "create"): "id", ("aggregates", "show"): "id",
          ("aggregates", "add-host"): "host", ("aggregates", "remove-host"): "host",
          ("aggregates", "delete"): "id", ("allocations", "show"): "consumer",
          ("allocations", "release"): "consumer", ("migrations", "confirm"): "migration",
          ("migrations", "revert"): "migration"}

_HOST_CAPACITY = ("vcpus", "memory_mb", "disk_gb", "cpu_ratio", "ram_ratio", "disk_ratio", "inventory", "trait",
                  "hypervisor_type")
_LIST_ONLY = ("sort_column", "limit", "marker")
# Options that mean something for some actions only: given to another, they would do nothing, so they are refused.
_ONLY: dict[str, dict[str, tuple[str, ...]]] = {
    "hosts": {**{o: ("create", "set") for o in _HOST_CAPACITY}, "disable": ("create",), "uuid": ("create",),
              "reason": ("create", "disable"), "yes": ("delete",), "marker": ("list",), "limit": ("list",),
              "sort_column": ("list",), "node": ("show", "create", "set", "disable", "enable", "delete")},
    "aggregates": {"name": ("create", "set"), "hosts": ("create", "set"), "property": ("create", "set"),
                   "zone": ("create", "set"), "sort_column": ("list",)},
    "allocations": {"limit": ("list",), "marker": ("list",), "sort_column": ("list",)},
    "migrations": {"sort_column": ("list",)},
}
_SELECT_SPEC_OPTIONS = ("vcpus", "memory_mb", "root_gb", "extra_spec", "resource", "required_trait",
                        "forbidden_trait", "hint", "az", "project", "user", "num_instances", "instance_uuid",
                        "migration_uuid", "size")


def _unused(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    """An option given where it has no effect (house rule: do what it means or refuse it)."""
    defaults = _defaults(parser, args.command)
    only = _ONLY.get(args.command, {})
    for dest, actions in only.items():
        if getattr(args, dest, None) != defaults.get(dest) and args.action not in actions:
            return f"{args.command} {args.action}: --{dest.replace('_', '-')} is for {' and '.join(actions)} only"
    if args.command == "hosts" and args.action == "create" and args.reason and not args.disable:
        return "hosts create: --reason goes with --disable"
    if args.command == "hosts" and args.name and args.action == "list":
        return "hosts list takes no NAME (did you mean 'hosts show NAME'?)"
    if args.command == "migrations" and args.action == "list" and args.migration:
        return "migrations list takes no MIGRATION"
    if args.command == "aggregates" and args.host and args.action not in ("add-host", "remove-host"):
        return f"aggregates {args.action} takes no HOST (add-host and remove-host do)"
    if args.command == "select":
        if args.spec and any(getattr(args, d) != defaults.get(d) for d in _SELECT_SPEC_OPTIONS):
            return "select: --spec gives the whole request; the request options cannot be added to it"
        if args.limit != defaults.get("limit") and not args.dry_run:
            return "select: --limit is for --dry-run only"
    if getattr(args, "action", None) not in (None, "list") and args.command != "select" \
            and getattr(args, "format", None) == "csv":
        return f"{args.command} {args.action}: -f csv is for lists"
    return None


def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser | None:
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            sub: argparse.ArgumentParser = action.choices[command]
            return sub
    return None


def _defaults(parser: argparse.ArgumentParser, command: str) -> dict[str, Any]:
    sub = _subparser(parser, command)
    return {a.dest: a.default for a in sub._actions} if sub is not None else {}


def _passthrough(argv: list[str]) -> argparse.Namespace | None:
    """bench, simulate and nova-scheduler hand every argument after their name to what they run, --help too."""
    if argv and argv[0] == "simulate":
        return argparse.Namespace(command="simulate", func=cmd_simulate, args=argv[1:])
    if argv and argv[0] == "nova-scheduler":  # oslo.config parses the rest, as nova-scheduler's does
        return argparse.Namespace(command="nova-scheduler", func=cmd_nova_scheduler, args=argv[1:])
    if len(argv) > 1 and argv[0] == "bench" and argv[1] in BENCHMARKS:
        return argparse.Namespace(command="bench", func=cmd_bench, which=argv[1], args=argv[2:])
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    Parser.json_errors = json_requested(argv)
    args = _passthrough(argv) or parser.parse_args(argv)
    args.command = ALIASES.get(args.command, args.command)
    command_parser = _subparser(parser, args.command) or parser  # its usage, not the whole command's
    needed = _NEEDS.get((args.command, getattr(args, "action", None)))
    if needed and not getattr(args, needed):
        command_parser.error(f"{args.command} {args.action} needs {needed.upper()}")
    unused = _unused(parser, args)
    if unused:
        command_parser.error(unused)
    from gantt.client import Unreachable

    json_errors = getattr(args, "format", None) == "json"
    try:
        status: int = args.func(args)
        return status
    except Unreachable as exc:
        hint = "is `gantt serve` running? --url / GANTT_URL"
        if json_errors:
            write_json_error(503, "Service unreachable", f"cannot reach Gantt at {exc.message} ({hint})")
        else:
            err_console.print(f"[bold red]cannot reach Gantt[/] at {escape(exc.message)} ({hint})", soft_wrap=True)
        return NO_ANSWER
    except GanttError as exc:
        return _report_error(exc, args)
    except (UsageError, OutputError) as exc:
        command_parser.error(str(exc))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
