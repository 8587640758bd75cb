"""A report that changes one thing about a node lands as if the node had only ever sent that report: the shortcuts
a usage-only report takes (capacity left standing, shapes compared rather than rewritten, capabilities interned
by value) must not skip a real change, and every change a static cache can see moves ``static_revision``."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pytest

from gantt.compute.state.columns import _ENCODER
from gantt.compute.state.table import HostTable
from gantt.model import Allocation, HostReport
from tests.conftest import host_stats

NOW = 1_000_000.0
FIRST = host_stats(vcpus_used=2, memory_mb_used=1024, local_gb_used=10, num_io_ops=1, num_instances=2,
                   disk_available_least=900, cpu_info={"arch": "x86_64", "maxphysaddr": {"bits": 46}},
                   stats={"k": 1}, traits=["HW_CPU_X86_AVX2"], service={"disabled": False},
                   host_ip="10.0.0.1")
INVENTORY = {"total": 64, "reserved": 4, "min_unit": 1, "max_unit": 16, "step_size": 1, "allocation_ratio": 2.0}

# (what changes, the second report's fields over FIRST, whether a static cache can see it)
CHANGES: list[tuple[str, dict[str, Any], bool]] = [
    ("usage only", {"vcpus_used": 5, "memory_mb_used": 2048, "local_gb_used": 20, "num_io_ops": 3}, False),
    ("nothing", {}, False),
    ("cpu ratio", {"cpu_allocation_ratio": 2.0}, True),
    ("ram ratio", {"ram_allocation_ratio": 1.5}, True),
    ("disk ratio", {"disk_allocation_ratio": 0.5}, True),
    ("vcpus total", {"vcpus": 32}, True),
    ("memory total", {"memory_mb": 32768}, True),
    ("disk least", {"disk_available_least": 5}, False),
    ("trait", {"traits": ["HW_CPU_X86_AVX2", "CUSTOM_NEW"]}, True),
    ("traits as a set", {"traits": ["HW_CPU_X86_AVX2", "HW_CPU_X86_AVX2"]}, False),
    ("service disabled", {"service": {"disabled": True, "disabled_reason": "maintenance"}}, True),
    ("service forced down", {"service": {"disabled": False, "forced_down": True}}, True),
    ("hypervisor version", {"hypervisor_version": 9000000}, True),
    ("hypervisor type", {"hypervisor_type": "lxc"}, True),
    ("cpu_info number type", {"cpu_info": {"arch": "x86_64", "maxphysaddr": {"bits": 46.0}}}, True),
    ("cpu_info key order", {"cpu_info": {"maxphysaddr": {"bits": 46}, "arch": "x86_64"}}, False),
    ("supported instances", {"supported_instances": [["x86_64", "qemu", "hvm"]]}, True),
    ("host stats", {"stats": {"k": 2}}, True),
    ("host ip", {"host_ip": "10.0.0.2"}, False),
]
# a report naming its inventories itself: each field of one class's shape in turn
INVENTORY_CHANGES: list[tuple[str, dict[str, Any], bool]] = [
    ("inventory usage", {"used": 7}, False),
    ("inventory total", {"total": 48}, True),
    ("inventory reserved", {"reserved": 8}, True),
    ("inventory min_unit", {"min_unit": 2}, True),
    ("inventory max_unit", {"max_unit": 8}, True),
    ("inventory step_size", {"step_size": 2}, True),
    ("inventory ratio", {"allocation_ratio": 3.0}, True),
]


def _report(fields: dict[str, Any]) -> HostReport:
    return msgspec.convert({"host": "h", "stats": fields}, HostReport)


def _table() -> HostTable:
    table = HostTable(clock=lambda: NOW, initial_rows=8)
    table.update(msgspec.convert({"host": "other", "stats": host_stats()}, HostReport), now=NOW)  # h is not row 0
    return table


def _claim(table: HostTable) -> None:
    """Something in flight on the node, which free figures must keep counting."""
    table.put_allocation(Allocation(consumer_uuid="c1", host="h", nodename="h", created_at=NOW,
                                    resources={"VCPU": 3, "MEMORY_MB": 512, "DISK_GB": 7, "CUSTOM_X": 1}))


def _node_state(table: HostTable) -> dict[str, Any]:
    """What the table holds about node ``h``, free of codes and revisions (which differ with history)."""
    columns = table._columns
    row = columns.row_of[("h", "h")]
    state: dict[str, Any] = {}
    for name, arr in columns.cols.items():
        if name not in ("caps_code", "traits_code", "usage_version"):
            state[name] = arr[row].item()
    for rc, j in columns.rc_index.items():
        for name, arr in columns.rc.items():
            state[f"{rc}.{name}"] = arr[row, j].item()
        state[f"{rc}.has"] = bool(columns.has_inventory[row, j])
    state["reports_usage"] = bool(columns.reports_usage[row])
    state["caps"] = _ENCODER.encode(columns.node_caps(row))
    state["traits"] = columns.node_traits(row)
    state["host_ip"] = columns.host_ips[row]
    state["disabled_reason"] = table._disabled_reasons.get(("h", "h"))
    return state


def _check(first: dict[str, Any], second: dict[str, Any], static: bool) -> None:
    updated = _table()
    updated.update(_report(first), now=NOW)
    _claim(updated)
    before = updated.static_revision
    updated.update(_report(second), now=NOW)
    fresh = _table()
    _claim(fresh)
    fresh.update(_report(second), now=NOW)
    got, want = _node_state(updated), _node_state(fresh)
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == want[key] or (got[key] != got[key] and want[key] != want[key]), key  # NaN == NaN
    assert (updated.static_revision != before) == static


@pytest.mark.parametrize(("change", "fields", "static"), CHANGES, ids=[c[0] for c in CHANGES])
def test_a_report_changing_one_thing_lands_as_a_fresh_one(change: str, fields: dict[str, Any],
                                                          static: bool) -> None:
    _check(FIRST, {**FIRST, **fields}, static)


@pytest.mark.parametrize(("change", "fields", "static"), INVENTORY_CHANGES, ids=[c[0] for c in INVENTORY_CHANGES])
def test_an_inventory_changing_one_field_lands_as_a_fresh_one(change: str, fields: dict[str, Any],
                                                              static: bool) -> None:
    first = {**FIRST, "inventories": {"VCPU": INVENTORY, "CUSTOM_X": {"total": 4}}}
    second = {**FIRST, "inventories": {"VCPU": {**INVENTORY, **fields}, "CUSTOM_X": {"total": 4}}}
    _check(first, second, static)


def test_a_ratio_named_without_its_total_moves_the_capacity() -> None:
    # a partial report: the inventory stays, its ratio changes, its capacity must follow
    updated = _table()
    updated.update(_report(FIRST), now=NOW)
    _claim(updated)
    before = updated.static_revision
    updated.update(_report({"cpu_allocation_ratio": 4.0, "vcpus_used": 1}), now=NOW)
    state = _node_state(updated)
    assert state["VCPU.capacity"] == 16 * 4.0
    assert state["VCPU.free"] == 16 * 4.0 - 1 - 3
    assert state["free_vcpus"] == 16 * 4.0 - 1 - 3
    assert updated.static_revision != before
    assert np.isfinite(state["free_disk_mb"])
