"""How the ``gantt`` command prints what it read, as openstackclient (cliff) does.

A command hands over records (one dict per item, raw values) and the columns they have; the options choose the
format (``-f table|json|yaml|value|csv``), the columns (``-c``, repeatable) and the order (``--sort-column``,
``--sort-ascending|--sort-descending``). json and yaml keep values whole (full precision, lists and objects);
table, value and csv show them for a person (floats rounded, lists joined). A table is never cut or wrapped when
stdout is not a terminal.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec
from rich.cells import cell_len
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table

from gantt.model import NotFound

FORMATS = ("table", "json", "yaml", "value", "csv")
SHOW_FORMATS = ("table", "json", "yaml", "value")  # one item: csv is for lists, as in cliff


def add_output_options(parser: argparse.ArgumentParser, *, lister: bool = True) -> None:
    """``-f``, ``-c``, ``--json`` and, on commands that list, ``--sort-column`` and its direction."""
    group = parser.add_argument_group("output formatters")
    formats = FORMATS if lister else SHOW_FORMATS
    group.add_argument("-f", "--format", choices=formats, default=None,
                       help=f"output format: {', '.join(formats)} (default table)")
    group.add_argument("--json", action="store_const", dest="format", const="json",
                       help="the same as -f json (kept for scripts written before -f)")
    group.add_argument("-c", "--column", action="append", default=[], metavar="COLUMN",
                       help="show this column (repeat for more; default: table the usual ones, json and yaml "
                            "every one)")
    if lister:
        group.add_argument("--sort-column", action="append", default=[], metavar="COLUMN",
                           help="sort by this column (repeat for more keys)")
        order = group.add_mutually_exclusive_group()
        order.add_argument("--sort-ascending", dest="sort_descending", action="store_false", default=False,
                           help="sort ascending (the default)")
        order.add_argument("--sort-descending", dest="sort_descending", action="store_true",
                           help="sort descending")


@dataclass(frozen=True)
class Column:
    """One column: its name (what ``-c`` and json keys use), whether the table shows it by default, and how
    a person sees its value (json and yaml get the raw value)."""

    name: str
    default: bool = True
    show: Callable[[Any], str] | None = None
    style: Callable[[Any], str | None] | None = None  # rich style of the cell, table only
    right: bool = False


@dataclass
class Listing:
    columns: Sequence[Column]
    records: Sequence[Mapping[str, Any]]
    title: str | None = None
    caption: str | None = None
    extras: list[Any] = field(default_factory=list)  # further rich renderables after a table (explanations)


def show_value(value: Any) -> str:
    """A raw value as a person reads it in a cell: floats rounded, lists joined, mappings as k=v."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, float):
        if value == int(value) and abs(value) < 1e15:
            return f"{value:.0f}"
        return f"{value:.4f}".rstrip("0").rstrip(".") if abs(value) >= 1e-4 else f"{value:.3g}"
    if isinstance(value, list | tuple):
        return ", ".join(show_value(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={show_value(v)}" for k, v in value.items())
    return str(value)


def page(records: list[dict[str, Any]], args: argparse.Namespace,
         key: Callable[[dict[str, Any]], str]) -> tuple[list[dict[str, Any]], str | None]:
    """--limit and --marker over a list the service gives whole (the volume face takes no paging parameters):
    the page, and the caption that says how to ask for the next one."""
    if args.marker:
        keys = [key(r) for r in records]
        if args.marker not in keys:
            raise NotFound(f"marker {args.marker!r} is not in the list", field="marker")
        records = records[keys.index(args.marker) + 1:]
    if args.limit and len(records) > args.limit:
        records = records[: args.limit]
        return records, f"first {args.limit} shown: --marker {key(records[-1])} for the next ones"
    return records, None


class OutputError(Exception):
    """A column the command does not have (usage: exit 2)."""


def _chosen(listing: Listing, args: argparse.Namespace, fmt: str) -> list[Column]:
    by_name = {c.name: c for c in listing.columns}
    wanted = getattr(args, "column", None) or []
    unknown = [name for name in wanted + list(getattr(args, "sort_column", None) or []) if name not in by_name]
    if unknown:
        raise OutputError(f"no column {', '.join(map(repr, unknown))}; the columns are: "
                          f"{', '.join(by_name)}")
    if wanted:
        return [by_name[name] for name in dict.fromkeys(wanted)]
    if fmt in ("json", "yaml"):
        return list(listing.columns)
    return [c for c in listing.columns if c.default]


def _sort_key(value: Any) -> tuple[int, Any]:
    # None sorts last; numbers and strings each among their own kind.
    if value is None:
        return (2, 0)
    if isinstance(value, bool | int | float):
        return (0, value)
    return (1, show_value(value))


def _sorted(listing: Listing, args: argparse.Namespace) -> Sequence[Mapping[str, Any]]:
    keys = getattr(args, "sort_column", None) or []
    records = listing.records
    if keys:
        records = sorted(records, key=lambda r: [_sort_key(r.get(k)) for k in keys],
                         reverse=bool(getattr(args, "sort_descending", False)))
    return records


def _to_builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)


def emit_list(console: Console, listing: Listing, args: argparse.Namespace) -> None:
    fmt = getattr(args, "format", None) or "table"
    columns = _chosen(listing, args, fmt)
    records = _sorted(listing, args)
    out = sys.stdout
    if fmt == "json":
        rows = [{c.name: _to_builtins(r.get(c.name)) for c in columns} for r in records]
        out.write(msgspec.json.format(msgspec.json.encode(rows)).decode() + "\n")
    elif fmt == "yaml":
        _write_yaml([{c.name: _to_builtins(r.get(c.name)) for c in columns} for r in records])
    elif fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
        writer.writerow([c.name for c in columns])
        for r in records:
            writer.writerow([_cell(c, r.get(c.name)) for c in columns])
        out.write(buffer.getvalue())
    elif fmt == "value":
        for r in records:
            out.write(" ".join(_cell(c, r.get(c.name)) for c in columns) + "\n")
    else:
        table = Table(title=listing.title, title_justify="left", caption=listing.caption)
        for c in columns:
            table.add_column(c.name, justify="right" if c.right else "left")
        for r in records:
            table.add_row(*(_styled(c, r.get(c.name)) for c in columns))
        print_renderables(console, table, *listing.extras)


def emit_one(console: Console, columns: Sequence[Column], record: Mapping[str, Any], args: argparse.Namespace,
             title: str | None = None) -> None:
    """One item: field/value pairs (table), or an object (json, yaml), or the values one per line (value)."""
    fmt = getattr(args, "format", None) or "table"
    chosen = _chosen(Listing(columns, [record]), args, fmt)
    if fmt == "json":
        value = {c.name: _to_builtins(record.get(c.name)) for c in chosen}
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(value)).decode() + "\n")
    elif fmt == "yaml":
        _write_yaml({c.name: _to_builtins(record.get(c.name)) for c in chosen})
    elif fmt == "value":
        for c in chosen:
            sys.stdout.write(_cell(c, record.get(c.name)) + "\n")
    else:
        table = Table(title=title, title_justify="left")
        table.add_column("field")
        table.add_column("value")
        for c in chosen:
            table.add_row(c.name, _styled(c, record.get(c.name)))
        print_renderables(console, table)


def _cell(column: Column, value: Any) -> str:
    return column.show(value) if column.show is not None else show_value(value)


def _styled(column: Column, value: Any) -> str:
    text = escape(_cell(column, value))
    style = column.style(value) if column.style is not None else None
    return f"[{style}]{text}[/]" if style and text else text


def print_renderables(console: Console, *renderables: Any) -> None:
    if console.is_terminal:
        for renderable in renderables:
            console.print(renderable)
        return
    # Piped or redirected: a script reads every character, so no column is cut, elided or wrapped.
    wide = Console(file=console.file, width=1_000_000, no_color=console.no_color, color_system=None,
                   force_terminal=False, soft_wrap=False)
    for renderable in renderables:
        for part in renderable.renderables if isinstance(renderable, Group) else (renderable,):
            if isinstance(part, Table):
                for column in part.columns:
                    column.no_wrap = True
                    column.overflow = "ignore"
                # a title (or caption) wraps at the table's width: a narrow table (-c host) would cut it in lines
                texts = [str(t) for t in (part.title, part.caption) if t]
                if texts:
                    part.min_width = max(part.min_width or 0, *(cell_len(t) for t in texts))
        wide.print(renderable)


def _write_yaml(value: Any) -> None:
    import yaml

    sys.stdout.write(yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False))


def json_requested(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON: errors then go to stdout as JSON, usage errors included."""
    for i, arg in enumerate(argv):
        if arg == "--json" or arg in ("-fjson", "--format=json"):
            return True
        if arg in ("-f", "--format") and i + 1 < len(argv) and argv[i + 1] == "json":
            return True
    return False


def write_json_error(status: int, title: str, detail: str, **more: Any) -> None:
    """An error as an object on stdout, shaped as the API's problem (RFC 9457) so that one parser reads both."""
    body = {"error": {"status": status, "title": title, "detail": detail,
                      **{k: _to_builtins(v) for k, v in more.items() if v is not None}}}
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(body)).decode() + "\n")
