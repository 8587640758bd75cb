"""``gantt nova-scheduler``: run as Nova's nova-scheduler service, in an environment where nova is installed.
gantt.nova imports nova, which core Gantt never does, so the import waits until the command runs."""

from __future__ import annotations

import argparse
from typing import Any

from rich.markup import escape

from gantt.cli import terminal


def add_nova_scheduler(sub: Any) -> None:
    p = sub.add_parser("nova-scheduler", help="run as Nova's nova-scheduler service (where nova is installed)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="nova-scheduler's own: --config-file /etc/nova/nova.conf …")
    p.set_defaults(func=cmd_nova_scheduler)


def cmd_nova_scheduler(args: argparse.Namespace) -> int:
    try:  # Nova's environment only
        from gantt.nova.cmd import main as nova_scheduler
    except ImportError as exc:
        terminal.err_console.print(escape(
            f"gantt nova-scheduler: nova is not installed in this environment ({exc}); install Gantt into Nova's "
            "environment: pip install 'gantt[nova]'"), soft_wrap=True)
        return terminal.USAGE
    status: int = nova_scheduler(["gantt nova-scheduler", *args.args])
    return status
