"""A real ``gantt serve`` per store kind (memory and SQLite), reached through its Placement face over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.service.server import ServerProcess

CONFIG: dict[str, Any] = {"DEFAULT": {"service_down_time": 86400}, "gantt": {"seed": 7}}
LATEST = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}


@pytest.fixture(scope="module", params=["memory", "sqlite"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("placement")
    store = "memory://" if request.param == "memory" else f"sqlite:///{workdir}/gantt.sqlite"
    with ServerProcess(store, config=CONFIG, workdir=workdir) as process:
        yield process


@pytest.fixture
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url + "/placement", headers=LATEST, timeout=10.0) as client:
        yield client


@pytest.fixture
def v1(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10.0) as client:
        yield client
