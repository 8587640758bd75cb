"""``gantt select`` and ``gantt capacity``: ask the scheduler where a request goes (claimed, or ranked with its
weights by ``--dry-run``) and how many more of a flavor fit, where, and what taking hosts away costs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import msgspec
from rich.markup import escape
from rich.table import Table

from gantt.cli import terminal, volume
from gantt.cli.options import client_options, hints, open_client, pairs
from gantt.cli.output import Column, Listing, emit_list, emit_one, show_value
from gantt.cli.terminal import UsageError, explanation_table
from gantt.model import NoValidHost


def _spec(args: argparse.Namespace) -> dict[str, Any]:
    if args.spec:
        text = sys.stdin.read() if args.spec == "-" else Path(args.spec).read_text()
        spec: dict[str, Any] = msgspec.json.decode(text)
        return spec
    spec = {"num_instances": args.num_instances}
    if args.vcpus or args.memory_mb or args.root_gb or args.extra_spec or not args.resource:
        spec["flavor"] = {"name": args.flavor, "vcpus": args.vcpus, "memory_mb": args.memory_mb,
                          "root_gb": args.root_gb, "extra_specs": pairs(args.extra_spec, "--extra-spec")}
    if args.resource:
        try:
            spec["resources"] = {k: int(v) for k, v in pairs(args.resource, "--resource").items()}
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
        spec["scheduler_hints"] = hints(args.hint)
    return spec


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
    title = f"candidates (dry run, nothing claimed): {len(records)} shown, {passed} pass"
    emit_list(terminal.console, Listing(columns, records, title=title,
                                        extras=[explanation_table(result.explanation, "filters")]), args)
    return 0


SELECTION_COLUMNS = [Column("consumer_uuid"), Column("host"), Column("nodename"), Column("availability_zone"),
                     Column("allocation"), Column("alternates"), Column("weight", default=False, show=_rounded)]


def cmd_select(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        if volume.is_volume(client, args):
            return volume.select(client, args, _spec(args) if args.spec else None)
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
    emit_list(terminal.console, Listing(SELECTION_COLUMNS, records, title="placed"), args)
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
    with open_client(args) as client:
        answer = client.capacity(_capacity_question(args))
    if args.format in ("json", "yaml"):
        emit_one(terminal.console, [Column("requests"), Column("displaced")], msgspec.structs.asdict(answer), args)
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
        terminal.console.print(escape(title), soft_wrap=True)  # a sentence, not cut to the table's width
    emit_list(terminal.console, Listing(CAPACITY_COLUMNS, records, title="the nodes with the most room",
                                        extras=extras), args)
    return 0


def add_capacity(sub: Any) -> None:
    p = sub.add_parser("capacity", help="how many more instances of a flavor fit, where, and what hosts take with "
                                        "them (claims nothing)",
                       description="Counted by the service's own filters: the same count claims one at a time "
                                   "would reach. --without-* take hosts away first (a rack or a zone lost).")
    client_options(p)
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


def add_select(sub: Any) -> None:
    p = sub.add_parser("select", help="place a request (or --dry-run: rank candidates with their weights)",
                       description="The request is a flavor of --vcpus, --memory-mb and --root-gb (defaults shown "
                                   "below: --flavor only names it), plus resources, traits and hints; or a whole "
                                   "RequestSpec with --spec.")
    client_options(p)
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

