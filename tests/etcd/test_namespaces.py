"""Namespaces on etcd: two in one ``gantt serve`` (one cluster, one prefix) never leak into each other."""

from __future__ import annotations

from pathlib import Path

from tests.namespaces import check_feeds, check_isolation
from tests.service.test_volume_namespace import check_two_schedulers


def test_two_namespaces_in_one_service_are_isolated(store_url: str) -> None:
    check_isolation(store_url)


def test_each_namespace_has_its_own_feed(store_url: str) -> None:
    check_feeds(store_url)


def test_two_schedulers_never_overfill_a_thin_pool_on_etcd(store_url: str, tmp_path: Path) -> None:
    check_two_schedulers(store_url, tmp_path)
