"""A real ``gantt serve`` per store kind (memory, SQLite and etcd), reached through its Placement face over HTTP.

etcd: one throwaway single-member cluster on loopback per test process (tests/etcd/cluster.py), each server under
a key prefix of its own. One member is enough for the contract: the Placement face sees the store's interface, and
the multi-member behaviour (elections, member loss) is tests/etcd's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.etcd.cluster import LocalCluster, require_etcd
from tests.service.server import ServerProcess

CONFIG: dict[str, Any] = {"DEFAULT": {"service_down_time": 86400}, "gantt": {"seed": 7}}
LATEST = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}
STORES = ["memory", "sqlite", "etcd"]


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    require_etcd()
    with LocalCluster(tmp_path_factory.mktemp("etcd"), size=1) as cluster:
        yield cluster


def store_url(kind: str, workdir: Path, request: pytest.FixtureRequest) -> str:
    """A fresh, empty store of that kind (``request`` gives etcd's cluster, started on first use)."""
    if kind == "memory":
        return "memory://"
    if kind == "sqlite":
        return f"sqlite:///{workdir}/gantt.sqlite"
    cluster: LocalCluster = request.getfixturevalue("etcd")
    return cluster.url(f"/placement-{uuid.uuid4().hex[:10]}")


@pytest.fixture(scope="module", params=STORES)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("placement")
    with ServerProcess(store_url(request.param, workdir, request), config=CONFIG, workdir=workdir) as process:
        yield process


@pytest.fixture
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url + "/placement", headers=LATEST, timeout=10.0) as client:
        yield client


@pytest.fixture
def v1(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10.0) as client:
        yield client
