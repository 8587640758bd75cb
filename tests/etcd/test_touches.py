"""Touches on etcd: a host sending only identical reports stays up on a replica reading the other end of the watch."""

from __future__ import annotations

from gantt.store.etcd import EtcdStore
from tests.store.test_touches import liveness_through_two_replicas


def test_identical_reports_keep_a_host_up_on_the_other_replica(store_url: str) -> None:
    with EtcdStore(store_url) as first, EtcdStore(store_url) as second:
        liveness_through_two_replicas(first, second)
