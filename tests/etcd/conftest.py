"""Fixtures for the etcd store tests: a throwaway 3-member etcd cluster on loopback, one per test module.

Every test gets its own key prefix (``store_url``), so tests sharing a module's cluster never see each other's
keys. Ports come from the kernel and data lives in pytest's per-worker tmp dirs, so ``pytest -n auto`` is safe.
Missing ``etcd`` binary: skipped with the reason, except under ``CI=true`` where it fails (CI must test etcd).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from gantt.store.etcd import EtcdStore
from tests.etcd.cluster import LocalCluster, require_etcd


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    require_etcd()
    with LocalCluster(tmp_path_factory.mktemp("etcd")) as c:
        yield c


@pytest.fixture
def healthy(cluster: LocalCluster) -> LocalCluster:
    """The module's cluster with every member running and a leader (a fault test may have left one down)."""
    for i in range(len(cluster.members)):
        cluster.start(i)
    cluster.wait_healthy(timeout=30)
    return cluster


@pytest.fixture
def store_url(healthy: LocalCluster) -> str:
    return healthy.url(f"/t-{uuid.uuid4().hex[:10]}")


@pytest.fixture
def store(store_url: str) -> Iterator[EtcdStore]:
    s = EtcdStore(store_url)
    try:
        yield s
    finally:
        s.close()
