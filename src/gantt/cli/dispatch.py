"""The ``gantt`` command line: its parser (one ``add_*`` per command, in the order ``--help`` lists them), the
checks made once it has parsed (an action's needed argument, an option that would do nothing), and ``main``,
which runs the command and turns what it raised into an exit status (see terminal.EXIT_STATUS).

A new command is a module with a ``cmd_*`` function and an ``add_*`` that registers it: one line in COMMANDS.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from rich.markup import escape

from gantt.base.version import __version__
from gantt.cli import allocations, audit, hosts, launch, nova, scheduling, terminal
from gantt.cli.output import OutputError, json_requested, write_json_error
from gantt.cli.terminal import EXIT_STATUS, NO_ANSWER, UsageError, report_error
from gantt.model import GanttError


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is a JSON object on stdout when the command line asks for JSON."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        if Parser.json_errors:
            write_json_error(2, "Bad usage", message, usage=self.format_usage().strip())
            raise SystemExit(2)
        super().error(message)


def add_completion(sub: Any) -> None:
    p = sub.add_parser("completion", help="print a shell completion script (bash or zsh)",
                       description="Load it with: source <(gantt completion bash), or for zsh: "
                                   "source <(gantt completion zsh)")
    p.add_argument("shell", choices=["bash", "zsh"], help="the shell")
    p.set_defaults(func=cmd_completion)


def cmd_completion(args: argparse.Namespace) -> int:
    from gantt.cli.completion import bash_script, zsh_script

    script = (bash_script if args.shell == "bash" else zsh_script)(build_parser())
    sys.stdout.write(script)
    return 0


COMMANDS: tuple[Callable[[Any], None], ...] = (
    launch.add_serve, hosts.add_hosts, hosts.add_aggregates, scheduling.add_select, scheduling.add_capacity,
    allocations.add_allocations, allocations.add_migrations, audit.add_audit, launch.add_bench, launch.add_simulate,
    nova.add_nova_scheduler, launch.add_demo, add_completion)
# openstackclient's nouns are singular ("openstack host list", "aggregate show"): the same commands answer to them
ALIASES = {"host": "hosts", "aggregate": "aggregates", "allocation": "allocations", "migration": "migrations"}


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="gantt", description="Gantt: a standalone cloud scheduler.", epilog=EXIT_STATUS)
    parser.add_argument("--version", action="version", version=f"gantt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return parser


# (command, action): the argument that action cannot do without
_NEEDS: dict[tuple[str, str | None], str] = {
    ("hosts", "show"): "name", ("hosts", "delete"): "name", ("hosts", "create"): "name", ("hosts", "set"): "name",
    ("hosts", "disable"): "name", ("hosts", "enable"): "name", ("aggregates", "set"): "id",
    ("aggregates", "create"): "id", ("aggregates", "show"): "id", ("aggregates", "add-host"): "host",
    ("aggregates", "remove-host"): "host", ("aggregates", "delete"): "id", ("allocations", "show"): "consumer",
    ("allocations", "release"): "consumer", ("migrations", "confirm"): "migration",
    ("migrations", "revert"): "migration"}

_HOST_CAPACITY = ("vcpus", "memory_mb", "disk_gb", "cpu_ratio", "ram_ratio", "disk_ratio", "inventory", "trait",
                  "hypervisor_type")
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
        return argparse.Namespace(command="simulate", func=launch.cmd_simulate, args=argv[1:])
    if argv and argv[0] == "nova-scheduler":  # oslo.config parses the rest, as nova-scheduler's does
        return argparse.Namespace(command="nova-scheduler", func=nova.cmd_nova_scheduler, args=argv[1:])
    if len(argv) > 1 and argv[0] == "bench" and argv[1] in launch.BENCHMARKS:
        return argparse.Namespace(command="bench", func=launch.cmd_bench, which=argv[1], args=argv[2:])
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
            terminal.err_console.print(f"[bold red]cannot reach Gantt[/] at {escape(exc.message)} ({hint})",
                                       soft_wrap=True)
        return NO_ANSWER
    except GanttError as exc:
        return report_error(exc, args)
    except (UsageError, OutputError) as exc:
        command_parser.error(str(exc))
    except KeyboardInterrupt:
        return 130

