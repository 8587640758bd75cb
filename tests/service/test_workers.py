"""``gantt serve --workers N``: N processes on one store, each with its own replica fed by the change feed."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import host_stats
from tests.service.server import ServerProcess


def test_workers_share_one_store(tmp_path: Path) -> None:
    pytest.importorskip("gantt.store.sqlite")
    config = {"filter_scheduler": {"enabled_filters": ["ComputeFilter"]}}
    with ServerProcess(f"sqlite:///{tmp_path}/w.sqlite", config=config, workers=2, workdir=tmp_path) as server:
        pids: set[int] = set()
        deadline = time.monotonic() + 30
        while len(pids) < 2 and time.monotonic() < deadline:
            pids.add(httpx.get(f"{server.url}/health").json()["pid"])  # a new connection each time
        assert len(pids) == 2, "both workers answer"
        with server.client() as client:
            client.update_resource_stats("shared-host", host_stats(vcpus=2))
        streak = 0
        deadline = time.monotonic() + 30
        while streak < 10 and time.monotonic() < deadline:  # new connections land on either worker
            streak = streak + 1 if httpx.get(f"{server.url}/v1/hosts/shared-host").status_code == 200 else 0
        assert streak == 10
        # every worker's replica learnt the host from the store's feed, and claims cannot double-book across them
        placed = 0
        for i in range(6):
            response = httpx.post(f"{server.url}/v1/select_destinations",
                                  json={"flavor": {"vcpus": 1, "memory_mb": 1, "root_gb": 1},
                                        "instance_uuids": [f"vm-{i}"]})
            placed += response.status_code == 200
        assert placed == 2
        assert server.stop() == 0
