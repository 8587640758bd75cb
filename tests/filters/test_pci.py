"""PCI passthrough: pci_stats in host reports, [pci] alias, PciPassthroughFilter and PCIWeigher.

Nova agreement on random clouds is the parity suite's (tests/parity/pci_cases.py); here: the shapes and errors,
the rules one at a time, and that the state behind the filter follows reports, removals and a store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gantt import Scheduler
from gantt.compute.pci import PciRequest, freeze_pools, supports
from gantt.config import Config, load_config
from gantt.config.pci import parse_aliases
from gantt.model import HostStats, InvalidRequest, decode
from gantt.replication.replica import Replica
from gantt.store import open_store
from tests.conftest import host_stats, make_scheduler, passing, request

VF = {"name": "vf", "vendor_id": "8086", "product_id": "1520"}
GPU = {"name": "gpu", "vendor_id": "10de", "product_id": "1db4"}
PF = {"name": "pf", "vendor_id": "8086", "product_id": "1521", "device_type": "type-PF"}
ALIASES = [json.dumps(a) for a in (VF, GPU, PF)]


def pool(vendor: str = "8086", product: str = "1520", count: int = 1, **tags: Any) -> dict[str, Any]:
    return {"vendor_id": vendor, "product_id": product, "numa_node": 0, "count": count, **tags}


def primitive(*pools: dict[str, Any]) -> dict[str, Any]:
    fields = ("vendor_id", "product_id", "numa_node", "count")
    return {"nova_object.name": "PciDevicePoolList", "nova_object.namespace": "nova", "nova_object.version": "1.1",
            "nova_object.data": {"objects": [
                {"nova_object.name": "PciDevicePool", "nova_object.namespace": "nova", "nova_object.version": "1.1",
                 "nova_object.data": {**{k: p[k] for k in fields}, "tags": {k: v for k, v in p.items()
                                                                              if k not in fields}}}
                for p in pools]}}


def cloud(hosts: dict[str, Any], **sections: Any) -> Scheduler:
    return make_scheduler({name: {"pci_stats": pools} if pools is not None else {} for name, pools in hosts.items()},
                          filters=["PciPassthroughFilter"], pci={"alias": ALIASES}, **sections)


def alias(value: str) -> dict[str, Any]:
    return request(extra_specs={"pci_passthrough:alias": value})


# ------------------------------------------------------------------------------------------- host reports


def test_both_shapes_of_pci_stats_are_accepted_and_kept_as_the_plain_list() -> None:
    flat = decode({"pci_stats": [pool(dev_type="type-VF", physical_network="net1")]}, HostStats)
    nested = decode({"pci_stats": primitive(pool(dev_type="type-VF", physical_network="net1"))}, HostStats)
    assert flat.pci_stats == nested.pci_stats == [pool(dev_type="type-VF", physical_network="net1")]
    legacy = decode({"pci_stats": [{"vendor_id": "8086", "product_id": "1520", "count": 2}]}, HostStats)
    assert legacy.pci_stats == [{"vendor_id": "8086", "product_id": "1520", "count": 2, "numa_node": None}]


@pytest.mark.parametrize(("pci_stats", "where"), [
    ([{"vendor_id": "8086", "count": 1}], "$.stats.pci_stats[0].product_id"),
    ([pool(count=-1)], "$.stats.pci_stats[0].count"),
    ([pool(), pool(count="2")], "$.stats.pci_stats[1].count"),
    ([pool(numa_node=-3)], "$.stats.pci_stats[0].numa_node"),
    ([pool(trusted=True)], "$.stats.pci_stats[0]"),
    ([pool(trusted=3)], "$.stats.pci_stats[0].trusted"),
    ([pool(vendor=8086)], "$.stats.pci_stats[0].vendor_id"),
    ([1], "$.stats.pci_stats[0]"),
    ({"objects": []}, "$.stats.pci_stats"),
    (primitive(pool(count="x")), "$.stats.pci_stats.nova_object.data.objects[0].nova_object.data.count"),
    (primitive(pool(count=1, count_tag="x")) | {"nova_object.name": "PciDevice"}, "$.stats.pci_stats"),
])
def test_a_bad_pool_is_refused_naming_the_field_and_changes_nothing(pci_stats: Any, where: str) -> None:
    sched = cloud({"h0": [pool()]})
    with pytest.raises(InvalidRequest) as err:
        sched.update_resource_stats("h0", host_stats(vcpus=2, pci_stats=pci_stats))
    assert err.value.field is not None and err.value.field.startswith(where), err.value
    assert sched.table.inventories(0)["VCPU"]["total"] == 16  # the report was not half applied


def test_a_tag_may_not_overwrite_a_pool_field() -> None:
    bad = primitive(pool())
    bad["nova_object.data"]["objects"][0]["nova_object.data"]["tags"] = {"count": "9"}
    with pytest.raises(InvalidRequest, match="must not name count"):
        decode({"pci_stats": bad}, HostStats)


def test_pools_follow_reports_removals_and_a_store(tmp_path: Path) -> None:
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": ["PciPassthroughFilter"]},
                               "pci": {"alias": ALIASES}, "gantt": {"seed": 1}})
    store = open_store(f"sqlite:///{tmp_path}/g.sqlite")
    a = Replica(store, config).start(follow=False)
    for i in range(4):
        a.update_resource_stats(f"h{i}", host_stats(pci_stats=primitive(pool(count=i))))
    assert {c.host for c in a.candidates(alias("vf:2"))} == {"h2", "h3"}
    a.update_resource_stats("h3", host_stats(pci_stats=[]))  # its devices are gone
    a.delete_host("h0")  # a removal moves the last row: its pools must move with it
    assert {c.host for c in a.candidates(alias("vf:2"))} == {"h2"}
    b = Replica(open_store(f"sqlite:///{tmp_path}/g.sqlite"), config).start(follow=False)
    assert {c.host for c in b.candidates(alias("vf:2"))} == {"h2"}
    assert {c.host for c in b.candidates(alias("vf:1"))} == {"h1", "h2"}


# ---------------------------------------------------------------------------------------------- aliases


@pytest.mark.parametrize(("entries", "message"), [
    (["{not json"], "not JSON"),
    (['{"vendor_id": "8086", "product_id": "1520"}'], "name must be given"),
    (['{"name": "a", "vendor_id": "8086"}'], "must give vendor_id and product_id"),
    (['{"name": "a", "vendor_id": "80861", "product_id": "1520"}'], "four hexadecimal digits"),
    (['{"name": "a", "vendor_id": "8086", "product_id": "1520", "device_type": "vdpa"}'], "device_type"),
    (['{"name": "a", "vendor_id": "8086", "product_id": "1520", "numa_policy": "always"}'], "numa_policy"),
    (['{"name": "a", "vendor_id": "8086", "product_id": "1520", "colour": "red"}'], "unknown key 'colour'"),
    (['{"name": "a", "resource_class": "CUSTOM_A"}'], "must give vendor_id and product_id$"),
    (['{"name": "a", "vendor_id": "8086", "product_id": "1520", "traits": ["A"]}'], "traits must be a string"),
    (['{"name": "a", "vendor_id": "8086", "product_id": "1520", "live_migratable": "maybe"}'], "live_migratable"),
    ([json.dumps(VF), json.dumps({**VF, "numa_policy": "required"})], "NUMA policy mismatch"),
    ([json.dumps(PF), json.dumps({**PF, "device_type": "type-VF"})], "Device type mismatch"),
    ([json.dumps(GPU), json.dumps(GPU)], "each definition must give device_type"),
])
def test_a_bad_alias_is_refused_at_start(entries: list[str], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        Config.from_dict({"pci": {"alias": entries}})


@pytest.mark.parametrize(("entries", "message"), [
    (['{"name": "a", "traits": "A"}'], "must give vendor_id and product_id or resource_class"),
    ([json.dumps({**VF, "device_type": "type-VF"}), json.dumps({**VF, "device_type": "type-VF"})],
     "several definitions of one alias"),
])
def test_with_pci_in_placement_an_alias_names_a_class_or_ids_and_has_one_spec(entries: list[str],
                                                                              message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        Config.from_dict({"pci": {"alias": entries}, "filter_scheduler": {"pci_in_placement": True}})
    rc_only = '{"name": "gpu", "resource_class": "gpu", "traits": "HW_GPU_API_VULKAN,purple"}'
    aliases = Config.from_dict({"pci": {"alias": [rc_only]},
                                "filter_scheduler": {"pci_in_placement": True}}).pci.aliases
    # kept raw in the spec, as Nova keeps them: the pools ignore them, Placement's groups normalize them
    assert aliases["gpu"].specs == ({"resource_class": "gpu", "traits": "HW_GPU_API_VULKAN,purple"},)


def test_nova_conf_gives_one_alias_per_line(tmp_path: Path) -> None:
    path = tmp_path / "nova.conf"
    typed = {**VF, "device_type": "type-VF"}
    path.write_text("[pci]\n"
                    f"alias = {json.dumps(typed)}\n"
                    f"alias = '{json.dumps({**typed, 'product_id': '1522'})}'\n"
                    'alias = {"name": "gpu",\n'
                    '  "vendor_id": "10de", "product_id": "1db4"}\n'
                    'device_spec = {"vendor_id": "8086"}\n')
    aliases = load_config(path).pci.aliases
    assert [s["product_id"] for s in aliases["vf"].specs] == ["1520", "1522"]
    assert aliases["gpu"].specs == ({"vendor_id": "10de", "product_id": "1db4"},)
    assert aliases["vf"].numa_policy == "legacy"


def test_the_old_default_section_name_of_the_option_is_read(tmp_path: Path) -> None:
    path = tmp_path / "nova.conf"
    path.write_text(f"[DEFAULT]\npci_alias = {json.dumps(GPU)}\npci_alias = {json.dumps({**VF, 'name': 'x'})}\n")
    assert sorted(load_config(path).pci.aliases) == ["gpu", "x"]
    path.write_text(f"[DEFAULT]\npci_alias = {json.dumps(GPU)}\n[pci]\nalias = {json.dumps(VF)}\n")
    with pytest.raises(InvalidRequest, match="old name"):
        load_config(path)


@pytest.mark.parametrize(("value", "message"), [
    ("nope:1", "PCI alias nope is not defined"),
    ("vf", "'alias:count'"),
    ("vf:-1", "'alias:count'"),
    ("vf:1,", "'alias:count'"),
    ("vf:1:2", "'alias:count'"),
])
def test_a_request_naming_an_unknown_alias_or_malformed_is_refused(value: str, message: str) -> None:
    sched = cloud({"h0": [pool()]})
    with pytest.raises(InvalidRequest, match=message) as err:
        sched.select_destinations(alias(value))
    assert err.value.field == "$.flavor.extra_specs.pci_passthrough:alias"
    assert not sched.table.allocations()


# ------------------------------------------------------------------------------------------------ filter


def test_counts_are_summed_over_pools_and_hosts_without_devices_fail() -> None:
    sched = cloud({"none": None, "empty": [], "one": [pool()], "split": [pool(), pool(count=1, numa_node=1)],
                   "gpu": [pool("10de", "1db4", 4)]})
    assert passing(sched, alias("vf:2")) == {"split"}
    assert passing(sched, alias("vf:1")) == {"one", "split"}
    assert passing(sched, alias("vf:1, gpu:1")) == set()
    assert passing(sched, request()) == {"none", "empty", "one", "split", "gpu"}  # no request: no constraint


def test_ids_compare_without_regard_to_case() -> None:
    sched = cloud({"upper": [pool("10DE", "1DB4", 1)]})
    assert passing(sched, alias("gpu:1")) == {"upper"}


def test_a_request_for_zero_devices_still_needs_a_matching_pool() -> None:
    sched = cloud({"zero": [pool(count=0)], "other": [pool("10de", "1db4", 3)]})
    assert passing(sched, alias("vf:0")) == {"zero"}


def test_pfs_vdpa_and_remote_managed_devices_serve_only_who_asks_for_them() -> None:
    sched = cloud({"pf": [pool(product="1521", dev_type="type-PF")], "pf-vf": [pool(dev_type="type-PF")],
                   "vdpa": [pool(dev_type="vdpa")], "remote": [pool(remote_managed="yes")],
                   "local": [pool(remote_managed="false")]})
    assert passing(sched, alias("pf:1")) == {"pf"}
    assert passing(sched, alias("vf:1")) == {"local"}  # its spec names no type: never a PF, vDPA or remote one


def test_live_migratable_devices_when_the_alias_states_it() -> None:
    entries = [json.dumps({**GPU, "name": "lm", "live_migratable": "yes"}),
               json.dumps({**GPU, "name": "fixed", "live_migratable": "0"})]
    sched = make_scheduler({name: {"pci_stats": p} for name, p in {
        "lm": [pool("10de", "1db4", live_migratable="true")], "fixed": [pool("10de", "1db4", live_migratable="false")],
        "unknown": [pool("10de", "1db4")]}.items()}, filters=["PciPassthroughFilter"], pci={"alias": entries})
    assert passing(sched, alias("lm:1")) == {"lm"}
    assert passing(sched, alias("fixed:1")) == {"fixed"}


def test_requests_consume_greedily_in_novas_pool_order() -> None:
    """Nova takes devices pool by pool, fewest keys first, and a later request sees only what is left: with
    'either:2' taking the tagless pool first, 'b:1' still finds the tagged one; the other way round it fails."""
    either = {"name": "either", "vendor_id": "8086", "product_id": "1520", "device_type": "type-VF"}
    entries = [json.dumps(either), json.dumps({**either, "product_id": "1521"}),
               json.dumps({"name": "b", "vendor_id": "8086", "product_id": "1521"})]
    aliases = parse_aliases(entries)

    def req(name: str, count: int) -> PciRequest:
        return PciRequest(name, count, aliases[name].specs, "legacy")

    short = pool(product="1520", count=2, dev_type="type-VF")
    tagged = pool(product="1521", count=2, dev_type="type-VF", physical_network="net1")
    assert supports(freeze_pools([tagged, short]), [req("either", 2), req("b", 1)])  # short first: b left
    assert not supports(freeze_pools([tagged, short]), [req("either", 4), req("b", 1)])
    longer = pool(product="1520", count=2, dev_type="type-VF", physical_network="net1", trusted="true")
    assert not supports(freeze_pools([longer, tagged]), [req("either", 2), req("b", 1)])  # tagged goes first


def test_hosts_with_the_same_pools_are_checked_once() -> None:
    sched = cloud({f"h{i}": [pool(count=2)] for i in range(50)} | {"x": [pool(count=1)]})
    assert len(passing(sched, alias("vf:2"))) == 50
    assert len(sched.table.factor("pci_pools").values) == 3  # none, two devices, one device


# ----------------------------------------------------------------------------------------------- weigher


def test_pci_weigher_keeps_pci_hosts_for_pci_requests() -> None:
    sched = make_scheduler({"plain": {}, "few": {"pci_stats": [pool(count=1)]},
                            "many": {"pci_stats": [pool(count=8)]}},
                           filters=["PciPassthroughFilter"], weighers=["PCIWeigher"], pci={"alias": ALIASES})
    assert next(c.host for c in sched.candidates(request())) == "plain"
    assert next(c.host for c in sched.candidates(alias("vf:1"))) == "few"
    negative = make_scheduler({"plain": {}, "many": {"pci_stats": [pool(count=8)]}}, weighers=["PCIWeigher"],
                              filter_scheduler={"pci_weight_multiplier": 0.0})
    assert {c.weight for c in negative.candidates(request())} == {0.0}
