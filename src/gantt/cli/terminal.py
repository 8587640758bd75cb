"""How every ``gantt`` command speaks: its two consoles, its exit statuses, the sentence a change prints, and an
error's report (a NoValidHost with its filters' table).

Commands reach the consoles as ``terminal.console`` and ``terminal.err_console``, never imported by name, so that
one replacement (a test's wider console) reaches every command.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gantt.cli.output import Column, emit_one, print_renderables, write_json_error
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


class UsageError(Exception):
    """Bad usage found after parsing (exit 2, as argparse's own errors)."""


def fmt_number(value: float) -> str:
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
        captions.append(f"nearest {miss.resource_class}: {fmt_number(miss.best_free)} free of {miss.requested} asked"
                        f"{where} (short by {fmt_number(miss.short_by)})")
    if explanation.down:
        captions.append(f"{explanation.down} node(s) down: no report for > {explanation.service_down_time:g} s")
    return Group(table, *(Text(line) for line in captions))


def done(args: argparse.Namespace, message: str, **result: Any) -> int:
    """What a command that changes something prints: a sentence, or (-f json|yaml) the result as an object."""
    fmt = getattr(args, "format", None) or "table"
    if fmt in ("json", "yaml"):
        columns = [Column(name) for name in result]
        emit_one(console, columns, result, args)
    else:
        console.print(escape(message), soft_wrap=True)  # one line per message, whatever the width
    return 0


def report_error(error: GanttError, args: argparse.Namespace | None = None) -> int:
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

