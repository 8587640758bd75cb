"""The ``gantt`` command: run the service, talk to it, audit a store, run benchmarks, the simulator, the demo.

Client commands take ``--url`` (GANTT_URL, default http://127.0.0.1:8780) and ``--token`` (GANTT_TOKEN).
Exit status: 0 ok, 1 the service said no (NoValidHost, not found, audit violations…), 2 bad usage or config,
3 the store cannot be used (no such file, not a Gantt store, damaged, read-only, unreachable).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gantt import __version__
from gantt.model import Explanation, GanttError, NoValidHost

console = Console()
err_console = Console(stderr=True)
STORE_UNUSABLE = 3


# ------------------------------------------------------------------------------------------ helpers


def _client(args: argparse.Namespace) -> Any:
    from gantt.client import SchedulerClient

    return SchedulerClient(args.url, token=args.token)


def _pairs(items: Sequence[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"gantt: {what} must be KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def _print_json(value: Any) -> None:
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(value)).decode() + "\n")


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"


def explanation_table(explanation: Explanation, title: str = "No valid host") -> Table:
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
        where = f" on {miss.host}" + (f"/{miss.nodename}" if miss.nodename and miss.nodename != miss.host else "") \
            if miss.host else ""
        captions.append(f"nearest {miss.resource_class}: {_fmt(miss.best_free)} free of {miss.requested} asked"
                        f"{where} (short by {_fmt(miss.short_by)})")
    if captions:
        table.caption = "; ".join(captions)
        table.caption_justify = "left"
    return table


def _report_error(error: GanttError) -> int:
    if isinstance(error, NoValidHost) and error.explanation is not None:
        err_console.print(explanation_table(error.explanation))
        return 1
    where = f" (field {error.field})" if error.field else ""
    err_console.print(f"[bold red]{error.title}[/]: {error.message}{where}")
    return 1


# --------------------------------------------------------------------------------------------- serve


def cmd_serve(args: argparse.Namespace) -> int:
    from gantt.config import load_config
    from gantt.scheduler import Scheduler
    from gantt.service.server import ServeError, ServeOptions, serve

    config_path = args.config or os.environ.get("GANTT_CONFIG") or None
    try:
        config = load_config(config_path)
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
        err_console.print(f"gantt serve: cannot bind {options.host}:{options.port}: {exc}", markup=False)
        return 2


# --------------------------------------------------------------------------------------------- hosts


def _inv(host: Any, rc: str) -> str:
    inv = host.inventories.get(rc)
    if inv is None:
        return "-"
    return f"{_fmt(inv.capacity - inv.free)}/{_fmt(inv.capacity)}"


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.0f} h ago"


def _delete_host(client: Any, args: argparse.Namespace) -> int:
    """Deleting a node releases what is booked on it: say so, and do it only when asked twice (``--yes``)."""
    from gantt.model import Conflict, InvalidRequest

    try:
        nodes = [client.host(args.name, args.node)]  # one read, not the whole cloud's listing
    except InvalidRequest:  # a host with several nodes and none named: every node goes
        nodes = [h for h in client.hosts() if h.host == args.name]
    held = [c for h in nodes for c in h.allocations]
    what = f"{args.name}{'/' + args.node if args.node else ''}"
    if held and not args.yes:
        raise Conflict(f"{what} holds {len(held)} allocation(s) ({', '.join(held[:5])}{', …' if len(held) > 5 else ''})"
                       ": deleting it releases them; add --yes to do so", field="host")
    revision = client.delete_host(args.name, args.node)
    released = f", released {len(held)} allocation(s)" if held else ""
    console.print(f"deleted {what}{released} (revision {revision})")
    return 0


def cmd_hosts(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if args.action == "delete":
            return _delete_host(client, args)
        if args.action == "show":
            host = client.host(args.name, args.node)
            if args.json:
                _print_json(host)
                return 0
            table = Table(title=f"{host.host}/{host.nodename}", show_header=False, title_justify="left")
            for key in ("uuid", "availability_zone", "up", "disabled", "hypervisor_type", "host_ip",
                        "num_instances", "num_io_ops", "aggregates", "traits"):
                table.add_row(key, str(getattr(host, key)))
            table.add_row("last report", _ago(host.last_report_seconds_ago))
            for rc, inv in host.inventories.items():
                table.add_row(rc, f"used {_fmt(inv.reported_used)} + in flight {_fmt(inv.in_flight)}, "
                                  f"free {_fmt(inv.free)} of {_fmt(inv.capacity)} (ratio {inv.allocation_ratio:g})")
            table.add_row("allocations", str(len(host.allocations)))
            console.print(table)
            return 0
        hosts = client.hosts()
    if args.json:
        _print_json(hosts)
        return 0
    table = Table(title=f"{len(hosts)} compute nodes", title_justify="left")
    for column in ("host", "node", "zone", "up", "last report", "VCPU used/cap", "MEMORY_MB used/cap",
                   "DISK_GB used/cap", "allocations"):
        table.add_column(column, justify="right" if "/" in column or column in ("allocations", "last report")
                         else "left")
    for h in sorted(hosts, key=lambda h: (h.host, h.nodename))[: args.limit]:
        table.add_row(h.host, h.nodename if h.nodename != h.host else "", h.availability_zone or "",
                      "[green]up[/]" if h.up and not h.disabled else "[red]down[/]" if not h.up else "[yellow]off[/]",
                      _ago(h.last_report_seconds_ago), _inv(h, "VCPU"), _inv(h, "MEMORY_MB"), _inv(h, "DISK_GB"),
                      str(len(h.allocations)))
    if len(hosts) > args.limit:
        table.caption = f"first {args.limit} shown (--limit)"
    console.print(table)
    return 0


# ---------------------------------------------------------------------------------------- aggregates


def cmd_aggregates(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if args.action in ("create", "set", "add-host", "remove-host"):
            return _edit_aggregate(client, args)
        if args.action == "delete":
            revision = client.delete_aggregate(args.id)
            console.print(f"aggregate {args.id} deleted (revision {revision})")
            return 0
        aggregates = [client.aggregate(args.id)] if args.action == "show" else client.aggregates()
    if args.json:
        _print_json(aggregates[0] if args.action == "show" else aggregates)
        return 0
    table = Table(title=f"{len(aggregates)} aggregates", title_justify="left")
    for column in ("id", "name", "hosts", "metadata"):
        table.add_column(column)
    for agg in aggregates:
        hosts = ", ".join(agg.hosts) if args.action == "show" or len(agg.hosts) <= 4 else \
            ", ".join(agg.hosts[:4]) + f" … (+{len(agg.hosts) - 4})"
        table.add_row(agg.key, agg.name or "", hosts, ", ".join(f"{k}={v}" for k, v in sorted(agg.metadata.items())))
    console.print(table)
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
    console.print(f"aggregate {args.id} {done} (revision {revision})")
    return 0


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
            raise SystemExit("gantt: --resource amounts must be integers") from None
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
        spec["scheduler_hints"] = _pairs(args.hint, "--hint")
    return spec


def cmd_select(args: argparse.Namespace) -> int:
    spec = _spec(args)
    with _client(args) as client:
        if args.dry_run:
            result = client.candidates(spec, limit=args.limit)
            if args.json:
                _print_json(result)
                return 0
            weighers = sorted({name for c in result.candidates for name in c.weights})
            table = Table(title=f"candidates (dry run, nothing claimed): {len(result.candidates)} shown, "
                                f"{result.explanation.steps[-1].after if result.explanation.steps else 0} pass",
                          title_justify="left")
            for column in ("#", "host", "node", "zone", "weight", *weighers):
                table.add_column(column, justify="right" if column not in ("host", "node", "zone") else "left")
            for i, c in enumerate(result.candidates, 1):
                table.add_row(str(i), c.host, c.nodename if c.nodename != c.host else "", c.availability_zone or "",
                              f"{c.weight:.4f}", *(f"{c.weights.get(w, 0.0):.4f}" for w in weighers))
            console.print(table)
            console.print(explanation_table(result.explanation, "filters"))
            return 0 if result.candidates else 1
        answer = client.select_destinations(spec)
    if args.json:
        _print_json(answer)
        return 0
    table = Table(title="placed", title_justify="left")
    for column in ("consumer", "host", "node", "zone", "allocation", "alternates"):
        table.add_column(column)
    for selections in answer:
        first, alternates = selections[0], selections[1:]
        table.add_row(first.consumer_uuid or "", first.host, first.nodename, first.availability_zone or "",
                      ", ".join(f"{k}={v}" for k, v in first.allocation.items()),
                      ", ".join(a.host for a in alternates))
    console.print(table)
    return 0


# --------------------------------------------------------------------------------------- allocations


def cmd_allocations(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if args.action == "release":
            revision = client.release(args.consumer)
            console.print(f"released {args.consumer} (revision {revision})")
            return 0
        allocations = [client.allocation(args.consumer)] if args.action == "show" else client.allocations()
    if args.json:
        _print_json(allocations if args.action != "show" else allocations[0])
        return 0
    table = Table(title=f"{len(allocations)} allocations", title_justify="left")
    for column in ("consumer", "host", "node", "resources", "project", "confirmed"):
        table.add_column(column)
    for a in allocations[: args.limit]:
        table.add_row(a.consumer_uuid, a.host, a.nodename, ", ".join(f"{k}={v}" for k, v in a.resources.items()),
                      a.project_id or "", "yes" if a.confirmed else "no")
    console.print(table)
    return 0


def cmd_migrations(args: argparse.Namespace) -> int:
    with _client(args) as client:
        allocation = (client.confirm_move if args.action == "confirm" else client.revert_move)(args.migration)
    if args.json:
        _print_json(allocation)
        return 0
    resources = ", ".join(f"{k}={v}" for k, v in allocation.resources.items())
    where = f"{escape(allocation.host)}/{escape(allocation.nodename)} ({resources})"
    if args.action == "confirm":
        console.print(f"confirmed {escape(args.migration)}: dropped the source of "
                      f"{escape(allocation.instance_uuid or '')} on {where}")
    else:
        console.print(f"reverted {escape(args.migration)}: {escape(allocation.consumer_uuid)} back on {where}")
    return 0


# --------------------------------------------------------------------------------------------- audit


def cmd_audit(args: argparse.Namespace) -> int:
    from gantt.config import load_config
    from gantt.model import StoreUnavailable
    from gantt.replica import audit
    from gantt.store.base import open_store

    config = load_config(args.config or os.environ.get("GANTT_CONFIG") or None)
    try:
        with console.status(f"reading {args.store}"), open_store(args.store, create=False) as store:
            snapshot = store.snapshot()
            skipped = list(getattr(store, "skipped", ()))
    except (StoreUnavailable, ValueError) as exc:
        err_console.print(f"gantt audit: {exc}", markup=False, soft_wrap=True)
        return STORE_UNUSABLE
    problems = [f"unreadable row, skipped: {row}" for row in skipped] + audit(snapshot, config)
    summary = (f"{len(snapshot.hosts)} nodes, {len(snapshot.allocations)} allocations, "
               f"{len(snapshot.aggregates)} aggregates at revision {snapshot.revision}")
    if not problems:
        console.print(f"[green]audit ok[/]: {summary}: nothing over capacity")
        return 0
    for problem in problems:
        console.print(f"[red]violation[/]: {problem}")
    console.print(f"[bold red]{len(problems)} violation(s)[/] in {summary}")
    return 1


# ------------------------------------------------------------------------------------ bench, simulate


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


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
    candidates = [f"bench/{args.which}.py", f"bench.{args.which}", f"gantt.benchmarks.{args.which}"]
    entry = load_entry(candidates)
    if entry is None:
        err_console.print(f"gantt bench {args.which}: no benchmark found (looked for bench/{args.which}.py with a "
                          f"main(argv) function under {_repo_root()}); it may not be written yet")
        return 2
    return _run_entry(entry, args.args)


def cmd_simulate(args: argparse.Namespace) -> int:
    entry = load_entry(["gantt.sim.cli"])
    if entry is None:
        err_console.print("gantt simulate: the simulator's command line (gantt.sim.cli.main) is not available yet")
        return 2
    return _run_entry(entry, args.args)


def cmd_demo(args: argparse.Namespace) -> int:
    from gantt.demo import run_demo

    return run_demo(hosts=args.hosts, requests=args.requests, concurrency=args.concurrency, store=args.store)


# ---------------------------------------------------------------------------------------------- parser

BENCHMARKS = ["engine", "http", "cluster"]


def _client_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=os.environ.get("GANTT_URL", "http://127.0.0.1:8780"),
                        help="service URL (env GANTT_URL; default %(default)s)")
    parser.add_argument("--token", default=os.environ.get("GANTT_TOKEN"), help="bearer token (env GANTT_TOKEN)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


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
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    p.set_defaults(func=cmd_serve)


def _add_select(sub: Any) -> None:
    p = sub.add_parser("select", help="place a request (or --dry-run: rank candidates with their weights)")
    _client_options(p)
    p.add_argument("--spec", help="a RequestSpec as a JSON file ('-': stdin); overrides the options below")
    p.add_argument("--flavor", default="cli", help="flavor name, a label only (default %(default)s)")
    p.add_argument("--vcpus", type=int, default=1, help="flavor vCPUs (default %(default)s)")
    p.add_argument("--memory-mb", type=int, default=512, help="flavor RAM in MiB (default %(default)s)")
    p.add_argument("--root-gb", type=int, default=1, help="flavor root disk in GiB (default %(default)s)")
    p.add_argument("--extra-spec", nargs="*", metavar="KEY=VALUE", help="flavor extra specs")
    p.add_argument("--resource", nargs="*", metavar="RC=AMOUNT", help="resources beyond the flavor's, by class")
    p.add_argument("--required-trait", nargs="*", metavar="TRAIT", help="traits every chosen host must have")
    p.add_argument("--forbidden-trait", nargs="*", metavar="TRAIT", help="traits no chosen host may have")
    p.add_argument("--hint", nargs="*", metavar="KEY=VALUE", help="scheduler hints")
    p.add_argument("--az", help="availability zone")
    p.add_argument("--project", help="project (tenant) id, for tenant isolation and aggregate filters")
    p.add_argument("--user", help="user id")
    p.add_argument("--num-instances", type=int, default=1, help="instances to place at once (default %(default)s)")
    p.add_argument("--instance-uuid", nargs="*", help="consumer UUIDs (asking again returns the same claim)")
    p.add_argument("--migration-uuid", help="move the one --instance-uuid, holding its source under this UUID "
                                            "until 'gantt migrations confirm|revert'")
    p.add_argument("--dry-run", action="store_true", help="rank candidates, claim nothing")
    p.add_argument("--limit", type=int, default=10, help="candidates shown by --dry-run (default %(default)s)")
    p.set_defaults(func=cmd_select)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gantt", description="Gantt: a standalone cloud scheduler.")
    parser.add_argument("--version", action="version", version=f"gantt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _add_serve(sub)

    p = sub.add_parser("hosts", help="list, show or delete compute hosts")
    _client_options(p)
    p.add_argument("action", nargs="?", choices=["list", "show", "delete"], default="list")
    p.add_argument("name", nargs="?")
    p.add_argument("--node", help="one node of a host with several")
    p.add_argument("--yes", action="store_true", help="delete: also when allocations are booked there (released)")
    p.add_argument("--limit", type=int, default=50, help="rows shown by list (default %(default)s)")
    p.set_defaults(func=cmd_hosts)

    p = sub.add_parser("aggregates", help="list, show, create, set, add-host, remove-host or delete aggregates",
                       description="set changes only what it names (name, properties, zone; --hosts replaces "
                                   "the member list); add-host and remove-host change members one by one")
    _client_options(p)
    p.add_argument("action", nargs="?", default="list",
                   choices=["list", "show", "create", "set", "add-host", "remove-host", "delete"])
    p.add_argument("id", nargs="?", help="aggregate id (chosen by you: a name or a number)")
    p.add_argument("host", nargs="*", help="hosts, for add-host and remove-host")
    p.add_argument("--name", help="display name")
    p.add_argument("--hosts", nargs="*", help="the whole member list (replaces it)")
    p.add_argument("--property", "--metadata", dest="property", nargs="*", metavar="KEY=VALUE",
                   help="metadata to add or change (others are kept)")
    p.add_argument("--zone", help="shorthand for --property availability_zone=ZONE")
    p.set_defaults(func=cmd_aggregates)

    _add_select(sub)

    p = sub.add_parser("allocations", help="list, show or release allocations")
    _client_options(p)
    p.add_argument("action", nargs="?", choices=["list", "show", "release"], default="list")
    p.add_argument("consumer", nargs="?")
    p.add_argument("--limit", type=int, default=50)
    p.set_defaults(func=cmd_allocations)

    p = sub.add_parser("migrations", help="confirm or revert a move (select --migration-uuid)")
    _client_options(p)
    p.add_argument("action", choices=["confirm", "revert"])
    p.add_argument("migration")
    p.set_defaults(func=cmd_migrations)

    p = sub.add_parser("audit", help="check a store: nothing over capacity, no allocation on a missing node")
    p.add_argument("--store", required=True, help="store URL")
    p.add_argument("--config", help="config file (for allocation ratios defaults)")
    p.set_defaults(func=cmd_audit)

    # bench and simulate are parsed by _passthrough; these entries document them in --help.
    p = sub.add_parser("bench", help="run a benchmark (bench/engine.py, bench/http.py, bench/cluster.py)")
    p.add_argument("which", choices=BENCHMARKS)
    p.add_argument("args", nargs=argparse.REMAINDER, help="passed to the benchmark")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("simulate", help="run the simulator (gantt.sim.cli)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="passed to the simulator")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("demo", help="start a service on a temporary store, register hosts, place a burst")
    p.add_argument("--hosts", type=int, default=300)
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    p.set_defaults(func=cmd_demo)
    return parser


_NEEDS = {("hosts", "show"): "name", ("hosts", "delete"): "name", ("aggregates", "set"): "id",
          ("aggregates", "create"): "id", ("aggregates", "show"): "id", ("aggregates", "add-host"): "host",
          ("aggregates", "remove-host"): "host",
          ("aggregates", "delete"): "id", ("allocations", "show"): "consumer",
          ("allocations", "release"): "consumer"}


def _passthrough(argv: list[str]) -> argparse.Namespace | None:
    """bench/simulate hand every argument after their name to the module they run, --help included."""
    if argv and argv[0] == "simulate":
        return argparse.Namespace(command="simulate", func=cmd_simulate, args=argv[1:])
    if len(argv) > 1 and argv[0] == "bench" and argv[1] in BENCHMARKS:
        return argparse.Namespace(command="bench", func=cmd_bench, which=argv[1], args=argv[2:])
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = _passthrough(argv) or parser.parse_args(argv)
    needed = _NEEDS.get((args.command, getattr(args, "action", None)))
    if needed and not getattr(args, needed):
        parser.error(f"{args.command} {args.action} needs {needed.upper()}")
    from gantt.client import Unreachable

    try:
        status: int = args.func(args)
        return status
    except Unreachable as exc:
        err_console.print(f"[bold red]cannot reach Gantt[/] at {exc.message} (is `gantt serve` running? --url / "
                          "GANTT_URL)")
        return 1
    except GanttError as exc:
        return _report_error(exc)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
