"""A flavor's PCI requests as the caller made them (``RequestSpec.pci_requests`` entries naming an ``alias``): Nova's
API makes them from ``[pci] alias`` at boot (or at a resize to a new flavor), keeps them with the instance, and a
move asks for those, whatever ``[pci] alias`` says by then (Nova's PciPassthroughFilter reads the RequestSpec's
``pci_requests``). Given them, Gantt takes them as they are and derives nothing from the flavor's extra spec again.
Against Nova's own objects: tests/nova/test_translate.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gantt.model import InvalidRequest
from tests.conftest import make_scheduler, passing, request

# [pci] alias today: "gpu" names another device than when the instance booted, "old" is gone
TODAY = [json.dumps({"name": "gpu", "vendor_id": "10de", "product_id": "1db4"})]
FLAVOR = {"pci_passthrough:alias": "gpu:1"}


def pool(vendor: str, product: str, count: int = 1) -> dict[str, Any]:
    return {"vendor_id": vendor, "product_id": product, "numa_node": None, "count": count, "dev_type": "type-PCI"}


def kept(alias: str, vendor: str, product: str, count: int = 1) -> dict[str, Any]:
    """The request Nova's API made of ``alias`` when the instance booted (InstancePCIRequest, kept)."""
    return {"alias": alias, "count": count, "numa_policy": "legacy", "request_id": f"req-{alias}",
            "spec": [{"vendor_id": vendor, "product_id": product}]}


def _scheduler() -> Any:
    return make_scheduler({"booted-kind": {"pci_stats": [pool("8086", "1520")]},
                           "todays-kind": {"pci_stats": [pool("10de", "1db4")]}},
                          filters=["PciPassthroughFilter"], pci={"alias": TODAY})


def test_the_requests_made_at_boot_are_taken_not_todays_alias() -> None:
    s = _scheduler()
    assert passing(s, request(extra_specs=FLAVOR)) == {"todays-kind"}  # a boot now: today's alias
    move = request(extra_specs=FLAVOR, pci_requests=[kept("gpu", "8086", "1520")])
    assert passing(s, move) == {"booted-kind"}
    [[chosen, *_]] = s.select_destinations({**move, "instance_uuids": ["vm"]})
    assert chosen.host == "booted-kind"
    assert [dict(t.pool)["vendor_id"] for t in s.table.allocation("vm").pci] == ["8086"]


def test_an_alias_gone_from_the_config_since_boot_still_moves() -> None:
    s = _scheduler()
    with pytest.raises(InvalidRequest, match="PCI alias old is not defined"):
        s.select_destinations(request(extra_specs={"pci_passthrough:alias": "old:1"}))
    assert passing(s, request(extra_specs={"pci_passthrough:alias": "old:1"},
                              pci_requests=[kept("old", "8086", "1520")])) == {"booted-kind"}


def test_the_kept_requests_come_in_the_callers_order_ports_among_them() -> None:
    """A port's request beside the flavor's: both taken, in Nova's order (the flavor's first)."""
    s = make_scheduler({"both": {"pci_stats": [pool("8086", "1520"), {**pool("15b3", "101e"),
                                                                     "physical_network": "physnet1"}]},
                        "gpu-only": {"pci_stats": [pool("8086", "1520", 2)]}},
                       filters=["PciPassthroughFilter"], pci={"alias": TODAY})
    port = {"spec": [{"physical_network": "physnet1"}], "request_id": "port-1"}
    assert passing(s, request(extra_specs=FLAVOR, pci_requests=[kept("gpu", "8086", "1520"), port])) == {"both"}


def test_an_alias_asked_for_no_device_is_kept_as_nova_keeps_it_and_a_port_must_ask_for_one() -> None:
    s = _scheduler()
    # "gpu:0": Nova's request of no device still needs a pool its spec matches (tests/parity/test_pci_alias_parity)
    none = request(extra_specs={"pci_passthrough:alias": "gpu:0"}, pci_requests=[kept("gpu", "8086", "1520", 0)])
    assert passing(s, none) == {"booted-kind"}
    with pytest.raises(InvalidRequest) as err:
        s.select_destinations(request(pci_requests=[{"spec": [{"physical_network": "p"}], "count": 0}]))
    assert err.value.field == "$.pci_requests[0].count"
