"""``gantt audit`` on a store with namespaces: each namespace audited by its kind's rules, a volume one by
Cinder's capacity rules (a thin pool's over-subscription, a thick pool's reserve), claims since a pool's last
report counted on top of it, allocations on unknown pools found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from gantt import cli
from gantt.cli import terminal
from gantt.model import Allocation, HostReport
from gantt.store.base import Batch
from gantt.store.urls import open_store
from gantt.volume import PoolReport
from tests.conftest import host_stats

CONFIG = """
[namespace.vol]
kind = "volume"
"""
REPORTED = 1000.0


def _pool(pool: str, **caps: Any) -> HostReport:
    return PoolReport(host="node1@lvm", pool_name=pool, capabilities=caps, reported_at=REPORTED).to_record()


def _volume(volume: str, pool: str, size: int, *, claimed_at: float, host: str = "node1@lvm") -> Allocation:
    return Allocation(volume, host, pool, {"VOLUME_GB": size}, created_at=claimed_at)


def _store(tmp_path: Path, volumes: list[Allocation]) -> str:
    url = f"sqlite:///{tmp_path}/audit.sqlite"
    with open_store(url) as store:  # the default namespace: one node, within its capacity
        store.commit(Batch(reports=[HostReport.of("h0", host_stats(vcpus=4))]))
        store.commit(Batch(allocations=[Allocation("vm-1", "h0", "h0", {"VCPU": 2})]))
    with open_store(url, namespace="vol") as store:
        # thin: 100 GB, 10 % reserved, over-subscribed 2:1 -> at most 180 GB provisioned; 150 reported
        # thick: 100 GB with 10 GB free, 5 % reserved -> 5 GB left to claim
        store.commit(Batch(reports=[
            _pool("thin", total_capacity_gb=100, free_capacity_gb=60, provisioned_capacity_gb=150,
                  allocated_capacity_gb=150, reserved_percentage=10, max_over_subscription_ratio=2.0,
                  thin_provisioning_support=True),
            _pool("thick", total_capacity_gb=100, free_capacity_gb=10, provisioned_capacity_gb=90,
                  allocated_capacity_gb=90, reserved_percentage=5, thick_provisioning_support=True),
        ]))
        # Volumes the pools' reports already count (claimed before them): nothing on top.
        store.commit(Batch(allocations=[_volume("old-thin", "thin", 500, claimed_at=REPORTED - 1),
                                        _volume("old-thick", "thick", 500, claimed_at=REPORTED - 1)]))
        if volumes:
            store.commit(Batch(allocations=volumes))
    return url


def _audit(tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str, *extra: str) -> tuple[int, str]:
    config = tmp_path / "gantt.toml"
    config.write_text(CONFIG)
    status = cli.main(["audit", "--store", url, "--config", str(config), *extra])
    out, err = capsys.readouterr()
    return status, out + err


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(terminal, "console", Console(width=400))
    monkeypatch.setattr(terminal, "err_console", Console(width=400, stderr=True))


def test_volume_namespace_within_cinders_limits_is_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _store(tmp_path, [_volume("v1", "thin", 30, claimed_at=REPORTED + 1),  # 180 of 180
                            _volume("v2", "thick", 5, claimed_at=REPORTED + 1)])  # 0 GB left past the reserve
    status, out = _audit(tmp_path, capsys, url)
    assert status == 0, out
    assert "namespace compute (compute)" in out and "namespace vol (volume): 2 pools, 4 volumes" in out
    status, out = _audit(tmp_path, capsys, url, "--namespace", "vol")
    assert status == 0 and "namespace vol" in out and "compute" not in out, out


def test_thin_pool_past_its_over_subscription(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _store(tmp_path, [_volume("v1", "thin", 31, claimed_at=REPORTED + 1)])
    status, out = _audit(tmp_path, capsys, url, "--namespace", "vol")
    assert status == 1 and "pool node1@lvm#thin: provisioned 181 GB > 180 GB" in out, out
    assert "31 GB of them since the pool's last report" in out and "thick" not in out


def test_thick_pool_past_its_reserve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _store(tmp_path, [_volume("v1", "thick", 6, claimed_at=REPORTED + 1)])
    status, out = _audit(tmp_path, capsys, url)
    assert status == 1 and "pool node1@lvm#thick: free -1 GB once the reserve is kept" in out, out
    assert "1 violation(s) in namespace vol" in out and "audit ok[/]" not in out


def test_allocation_on_an_unknown_pool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _store(tmp_path, [_volume("lost", "gone", 1, claimed_at=REPORTED + 1),
                            _volume("empty", "thin", 0, claimed_at=REPORTED + 1)])
    status, out = _audit(tmp_path, capsys, url, "--namespace", "vol")
    assert status == 1, out
    assert "allocation lost on unknown pool node1@lvm#gone" in out
    assert "allocation empty holds {'VOLUME_GB': 0}" in out


def test_compute_namespace_still_audited_and_unknown_namespace_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _store(tmp_path, [])
    with open_store(url) as store:
        store.commit(Batch(allocations=[Allocation("vm-2", "h0", "h0", {"VCPU": 3})]))
    status, out = _audit(tmp_path, capsys, url)
    assert status == 1 and "namespace compute (compute): h0/h0 VCPU: used 5 > capacity 4" in out, out
    assert "audit ok" in out  # the volume namespace is fine
    status, out = _audit(tmp_path, capsys, url, "--namespace", "vol")
    assert status == 0, out
    status, out = _audit(tmp_path, capsys, url, "--namespace", "nope")
    assert status == 2 and "'nope' is not in the config" in out
