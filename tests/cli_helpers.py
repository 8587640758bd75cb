"""What the command-line tests share: ``gantt``'s own entry point run in process, with its output captured on a
console wide enough that nothing is wrapped or elided, and a real service with a few hosts to talk to."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from gantt import cli
from gantt.cli import terminal
from tests.service.server import ServerProcess


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``gantt ARGV``: its exit status (argparse's usage errors included), stdout and stderr."""
    try:
        status = cli.main(list(argv))
    except SystemExit as exc:
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def widen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich wraps and elides to the terminal width; captured output has none, so give it room (and no namespace
    from the environment)."""
    monkeypatch.setattr(terminal, "console", Console(width=250))
    monkeypatch.setattr(terminal, "err_console", Console(width=250, stderr=True))
    monkeypatch.delenv("GANTT_NAMESPACE", raising=False)


@contextlib.contextmanager
def serving(workdir: Path, hosts: list[tuple[str, Any]], config: dict[str, Any] | None = None) -> Iterator[str]:
    """A real ``gantt serve`` on memory with ``hosts`` reported; its URL."""
    config = config or {"filter_scheduler": {"enabled_filters": ["ComputeFilter"]},
                        "DEFAULT": {"service_down_time": 86400}}
    with ServerProcess("memory://", config=config, workdir=workdir) as server:
        if hosts:
            with server.client() as client:
                client.update_resource_stats_many(hosts)
        yield server.url
