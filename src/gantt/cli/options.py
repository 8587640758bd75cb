"""What the client commands share on their command line: the service's address, token and namespace options,
the argument types, ``KEY=VALUE`` pairs and scheduler hints, and the client they open."""

from __future__ import annotations

import argparse
import os
import uuid as uuidlib
from collections.abc import Sequence
from typing import Any

from gantt.cli.output import add_output_options
from gantt.cli.terminal import UsageError


def open_client(args: argparse.Namespace) -> Any:
    from gantt.client import SchedulerClient

    return SchedulerClient(args.url, token=args.token, namespace=getattr(args, "namespace", None))


def client_options(parser: argparse.ArgumentParser, *, lister: bool = True) -> None:
    parser.add_argument("--url", default=os.environ.get("GANTT_URL", "http://127.0.0.1:8780"),
                        help="service URL (env GANTT_URL; default %(default)s)")
    parser.add_argument("--token", default=os.environ.get("GANTT_TOKEN"), help="bearer token (env GANTT_TOKEN)")
    parser.add_argument("--namespace", type=namespace_name, default=os.environ.get("GANTT_NAMESPACE") or None,
                        help="the namespace to talk to (env GANTT_NAMESPACE; default compute, the service's "
                             "default one)")
    add_output_options(parser, lister=lister)


def uuid_value(value: str) -> str:
    try:
        return str(uuidlib.UUID(value))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a UUID") from None


def namespace_name(value: str) -> str:
    from gantt.model.namespaces import check_name

    try:
        return check_name(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def pairs(items: Sequence[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} must be KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def hints(items: Sequence[str]) -> dict[str, str | list[str]]:
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

