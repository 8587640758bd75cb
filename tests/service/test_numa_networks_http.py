"""RequestSpec ``network_metadata`` through a real ``gantt serve``: a NUMA guest lands on the cell its physnet is
on, a guest whose networks its cells cannot serve is a NoValidHost with nothing claimed, and a malformed field is
a 400 naming it with nothing written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gantt.client import SchedulerClient
from gantt.model import NoValidHost
from tests.service.server import ServerProcess
from tests.test_numa_networks import AFFINE, guest


@pytest.fixture(scope="module")
def numa_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir: Path = tmp_path_factory.mktemp("numa-networks")
    config = {"filter_scheduler": {"enabled_filters": ["NUMATopologyFilter"]},
              "DEFAULT": {"service_down_time": 86400}, "gantt": {"seed": 7}}
    with ServerProcess(f"sqlite:///{workdir}/gantt.sqlite", config=config, workdir=workdir) as process:
        yield process


def test_network_metadata_through_the_api(numa_server: ServerProcess) -> None:
    with numa_server.client() as client:
        _check(client, numa_server.url)


def _check(client: SchedulerClient, url: str) -> None:
    client.update_resource_stats("h", AFFINE)
    [[chosen]] = client.select_destinations(guest("vm-foo", 1, ["foo"]))
    assert chosen.host == "h"
    with pytest.raises(NoValidHost):
        client.select_destinations(guest("vm-split", 1, ["foo", "bar"]))
    before = client.health().revision
    with httpx.Client(base_url=url, timeout=10) as http:
        for bad, field in ((["foo"], "$.network_metadata"), ({"physnets": "foo"}, "$.network_metadata.physnets"),
                           ({"physnets": [], "tunneled": "yes"}, "$.network_metadata.tunneled"),
                           ({"physnets": [], "other": 1}, "$.network_metadata")):
            spec = {**guest("vm-bad", 1, []), "network_metadata": bad}
            answer = http.post("/v1/select_destinations", json=spec)
            assert answer.status_code == 400, answer.text
            assert answer.json()["field"] == field, answer.json()
    assert client.health().revision == before  # nothing claimed, nothing written
    listed = {a.consumer_uuid for a in client.allocations()}
    assert "vm-foo" in listed and not {"vm-split", "vm-bad"} & listed
