"""``gantt allocations`` and ``gantt migrations``: what is booked (list, show, release; a volume namespace's
volumes) and the moves in progress (list, confirm, revert)."""

from __future__ import annotations

import argparse
from typing import Any

from rich.markup import escape

from gantt.cli import terminal, volume
from gantt.cli.options import client_options, open_client
from gantt.cli.output import Column, Listing, emit_list, emit_one, page
from gantt.cli.terminal import done

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
    with open_client(args) as client:
        if args.action == "list" and volume.is_volume(client, args):
            return _list_volumes(client, args)
        if args.action == "release":
            revision = client.release(args.consumer)
            return done(args, f"released {args.consumer} (revision {revision})", consumer_uuid=args.consumer,
                        revision=revision)
        if args.action == "show":
            allocation = client.allocation(args.consumer)
            emit_one(terminal.console, ALLOCATION_COLUMNS, _allocation_record(allocation), args,
                     title=f"allocation {args.consumer}")
            return 0
        allocations = client.allocations(limit=args.limit + 1 if args.limit else None, marker=args.marker)
    more = bool(args.limit) and len(allocations) > args.limit
    allocations = allocations[: args.limit] if args.limit else allocations
    caption = f"first {args.limit} shown: --marker {allocations[-1].consumer_uuid} for the next ones" if more \
        else None
    emit_list(terminal.console, Listing(ALLOCATION_COLUMNS, [_allocation_record(a) for a in allocations],
                                        title=f"{len(allocations)} allocations", caption=caption), args)
    return 0


def _list_volumes(client: Any, args: argparse.Namespace) -> int:
    """A volume namespace's allocations, paged on this side (the volume face lists whole); show and release are
    the compute face's calls."""
    held = client.allocations()
    records, caption = page([_allocation_record(a) for a in held], args, lambda r: r["consumer_uuid"])
    emit_list(terminal.console, Listing(ALLOCATION_COLUMNS, records, title=f"{len(records)} volumes",
                                        caption=caption), args)
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
    title = f"{len(records)} moves in progress (confirm or revert each)"
    emit_list(terminal.console, Listing(MIGRATION_COLUMNS, records, title=title), args)
    return 0


def cmd_migrations(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        if volume.is_volume(client, args):
            volume.refuse("migrations", args.namespace)
        if args.action == "list":
            return _list_migrations(client, args)
        allocation = (client.confirm_move if args.action == "confirm" else client.revert_move)(args.migration)
    if (args.format or "table") != "table":
        emit_one(terminal.console, ALLOCATION_COLUMNS, _allocation_record(allocation), args)
        return 0
    resources = ", ".join(f"{k}={v}" for k, v in allocation.resources.items())
    where = f"{escape(allocation.host)}/{escape(allocation.nodename)} ({resources})"
    if args.action == "confirm":
        terminal.console.print(f"confirmed {escape(args.migration)}: dropped the source of "
                               f"{escape(allocation.instance_uuid or '')} on {where}", soft_wrap=True)
    else:
        terminal.console.print(f"reverted {escape(args.migration)}: {escape(allocation.consumer_uuid)} back on "
                               f"{where}", soft_wrap=True)
    return 0


def add_allocations(sub: Any) -> None:
    p = sub.add_parser("allocations", aliases=["allocation"], help="list, show or release allocations")
    client_options(p)
    p.add_argument("action", nargs="?", choices=["list", "show", "release"], default="list",
                   help="what to do (default list)")
    p.add_argument("consumer", nargs="?", help="the consumer (instance or migration UUID), for show and release")
    p.add_argument("--limit", type=int, default=50, help="list: at most this many (default %(default)s; 0: all)")
    p.add_argument("--marker", help="list: start after this consumer, as the caption says")
    p.set_defaults(func=cmd_allocations)


def add_migrations(sub: Any) -> None:
    p = sub.add_parser("migrations", aliases=["migration"],
                       help="list moves in progress, confirm or revert one (select --migration-uuid)")
    client_options(p)
    p.add_argument("action", nargs="?", choices=["list", "confirm", "revert"], default="list",
                   help="list (default): the moves whose source is still held; confirm: drop the source; "
                        "revert: back to it")
    p.add_argument("migration", nargs="?", help="the migration UUID the move was made under (confirm, revert)")
    p.set_defaults(func=cmd_migrations)

