"""Issue 34, item 7: one host, one name and one uuid, whether the ``gantt`` command or Placement (the real
``openstack`` client with osc-placement) made it, against a real ``gantt serve``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import run, widen
from tests.placement.osc import Osc
from tests.service.server import ServerProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Osc]]:
    workdir: Path = tmp_path_factory.mktemp("cli-placement")
    config = {"DEFAULT": {"service_down_time": 86400}}
    with ServerProcess(f"sqlite:///{workdir}/gantt.sqlite", config=config, workdir=workdir) as served:
        yield served.url, Osc(served.url + "/placement", token="admin", version="1.39")


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    widen(monkeypatch)




def gantt(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> Any:
    status, out, err = run(capsys, *argv, "--url", url, "-f", "json")
    assert status == 0, err
    return json.loads(out)


def test_a_host_made_by_the_cli_is_a_provider(server: tuple[str, Osc], capsys: pytest.CaptureFixture[str]) -> None:
    url, osc = server
    made = gantt(capsys, url, "hosts", "create", "cli-made", "--vcpus", "4", "--memory-mb", "4096", "--disk-gb",
                 "40")
    shown = gantt(capsys, url, "hosts", "show", "cli-made")
    assert shown["uuid"] == made["uuid"] and shown["name"] == "cli-made"
    [provider] = osc("resource provider list", "--name", "cli-made", "-f", "json")
    assert provider["uuid"] == made["uuid"] and provider["name"] == "cli-made"
    inventory = {row["resource_class"]: row["total"]
                 for row in osc("resource provider inventory list", made["uuid"], "-f", "json")}
    assert inventory["VCPU"] == 4 and inventory["DISK_GB"] == 40

    given = str(uuid.uuid4())
    gantt(capsys, url, "hosts", "create", "cli-given", "--uuid", given, "--vcpus", "2", "--memory-mb", "1024",
          "--disk-gb", "10")
    assert osc("resource provider show", given, "-f", "json")["name"] == "cli-given"
    status, _, err = run(capsys, "hosts", "create", "cli-again", "--uuid", given, "--vcpus", "2", "--memory-mb",
                         "1024", "--disk-gb", "10", "--url", url)
    assert status == 1 and f"uuid {given} is node cli-given/cli-given's already" in err
    status, _, err = run(capsys, "hosts", "create", "cli-bad", "--uuid", "not-a-uuid", "--url", url)
    assert status == 2 and "'not-a-uuid' is not a UUID" in err
    status, _, err = run(capsys, "hosts", "set", "cli-given", "--uuid", given, "--url", url)
    assert status == 2 and "--uuid is for create only" in err
    for name in ("cli-made", "cli-given"):
        assert run(capsys, "hosts", "delete", name, "--url", url)[0] == 0


def test_a_provider_made_through_placement_shows_by_its_name(server: tuple[str, Osc],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    url, osc = server
    provider = str(uuid.uuid4())
    osc.script(["resource", "provider", "create", "osc-made", "--uuid", provider, "-f", "json"],
               ["resource", "provider", "inventory", "set", provider, "--resource", "VCPU=8",
                "--resource", "MEMORY_MB=8192", "--resource", "DISK_GB=80", "-f", "json"])
    rows = [r for r in gantt(capsys, url, "hosts") if r["uuid"] == provider]
    assert [(r["host"], r["nodename"]) for r in rows] == [("osc-made", "osc-made")]
    status, out, _ = run(capsys, "hosts", "--url", url, "-c", "host", "-c", "uuid")
    assert status == 0 and "osc-made" in out
    for handle in ("osc-made", provider):  # by its name, or its uuid
        shown = gantt(capsys, url, "hosts", "show", handle)
        assert shown["uuid"] == provider and shown["host"] == "osc-made" and shown["VCPU"]["total"] == 8
    status, _, err = run(capsys, "hosts", "create", "osc-made", "--vcpus", "1", "--memory-mb", "1", "--disk-gb",
                         "1", "--url", url)
    assert status == 1 and "exists already" in err
    assert run(capsys, "hosts", "disable", "osc-made", "--reason", "maintenance", "--url", url)[0] == 0
    assert gantt(capsys, url, "hosts", "show", "osc-made")["state"] == "disabled"
    assert run(capsys, "hosts", "delete", "osc-made", "--url", url)[0] == 0
    assert "No resource provider with uuid" in osc.fails("resource provider show", provider)
