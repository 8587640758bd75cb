"""``gantt audit``: read a store as ``gantt serve`` would open it and check every namespace by its kind's rules
(a compute one by its resource classes, a volume one by Cinder's capacity rules): nothing over capacity, no
allocation on a missing node."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any

import msgspec
from rich.markup import escape

from gantt.cli import terminal
from gantt.cli.options import namespace_name
from gantt.cli.output import write_json_error
from gantt.cli.terminal import REFUSED, STORE_UNUSABLE, USAGE
from gantt.model import GanttError


def cmd_audit(args: argparse.Namespace) -> int:
    """Audit the store's default namespace and every namespace the config declares (or only ``--namespace``):
    a compute namespace by its resource classes, a volume one by Cinder's capacity rules (volume.replica.audit)."""
    from gantt.config import DEFAULT_NAMESPACE, load_config
    from gantt.model import StoreUnavailable
    from gantt.replication.audit import audit
    from gantt.store.urls import open_store
    from gantt.volume.replica import audit as audit_volume

    as_json = args.format == "json"

    def fail(status: int, title: str, message: str) -> int:
        if as_json:
            write_json_error(503 if status == STORE_UNUSABLE else 400, title, message)
        else:
            terminal.err_console.print(f"gantt audit: {message}", markup=False, soft_wrap=True)
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
            reading: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
            if not as_json:
                reading = terminal.console.status(f"reading {store_description(store_url)}")
            with reading, open_store(store_url, create=False, namespace=name) as store:
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
            terminal.console.print(f"[green]audit ok[/]: {escape(summary)}: nothing over capacity", soft_wrap=True)
            continue
        for problem in problems:
            terminal.console.print(f"[red]violation[/]: {escape(label + problem)}", soft_wrap=True)
        terminal.console.print(f"[bold red]{len(problems)} violation(s)[/] in {escape(summary)}", soft_wrap=True)
    if as_json:
        body = {"store": store_description(store_url), "ok": not total, "violations": total, "namespaces": results}
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(body)).decode() + "\n")
    return REFUSED if total else 0


def store_description(url: str) -> str:
    """A store URL as a person checks it: a SQLite URL with the absolute path of its file (``sqlite:///rel`` is
    relative to the working directory, ``sqlite:////abs`` absolute, as SQLAlchemy reads them)."""
    from gantt.service.server import describe_store

    return describe_store(url)


def add_audit(sub: Any) -> None:
    p = sub.add_parser("audit", help="check a store: nothing over capacity, no allocation on a missing node")
    p.add_argument("--store", help="store URL (default: the config's [gantt] store, as gantt serve reads it)")
    p.add_argument("--config", help="config file (env GANTT_CONFIG): its store, allocation ratio defaults; the "
                                    "namespaces it declares are audited too, each by its kind's rules")
    p.add_argument("-f", "--format", choices=["table", "json"], default=None,
                   help="output format: table (default) or json (one object: each namespace's figures and "
                        "violations)")
    p.add_argument("--json", action="store_const", dest="format", const="json", help="the same as -f json")
    p.add_argument("--namespace", type=namespace_name, default=None,
                   help="audit this namespace only (compute, or one the config declares)")
    p.set_defaults(func=cmd_audit)
