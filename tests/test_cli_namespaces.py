"""``--namespace`` on the client commands: the same command reads and writes another namespace's hosts."""

from __future__ import annotations

import pytest
from rich.console import Console

from gantt import cli
from gantt.cli.server_process import ServerProcess
from gantt.client import SchedulerClient
from tests.namespaces import CONFIG


def test_namespace_option_talks_to_that_namespace(capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "console", Console(width=250))
    monkeypatch.setattr(cli, "err_console", Console(width=250, stderr=True))
    monkeypatch.delenv("GANTT_NAMESPACE", raising=False)
    with ServerProcess("memory://", config=CONFIG) as server:
        SchedulerClient(server.url).update_resource_stats("in-compute", {"vcpus": 4, "memory_mb": 1024,
                                                                         "local_gb": 10})
        SchedulerClient(server.url, namespace="blue").update_resource_stats("in-blue", {"vcpus": 4, "memory_mb": 1024,
                                                                                       "local_gb": 10})
        assert cli.main(["hosts", "--url", server.url, "--namespace", "blue"]) == 0
        out = capsys.readouterr().out
        assert "in-blue" in out and "in-compute" not in out
        assert cli.main(["hosts", "--url", server.url]) == 0
        out = capsys.readouterr().out
        assert "in-compute" in out and "in-blue" not in out
        assert cli.main(["hosts", "--url", server.url, "--namespace", "green"]) == 1
        assert "'green'" in capsys.readouterr().err
        with pytest.raises(SystemExit):
            cli.main(["hosts", "--url", server.url, "--namespace", "Bad Name"])
