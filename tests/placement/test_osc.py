"""Issue 13: a real client. The ``openstack`` command (python-openstackclient with osc-placement, from PyPI, in its
own venv: tests/placement/osc.py) against a real ``gantt serve`` on SQLite, without Keystone, at microversion 1.39
and at older ones; every answer read back from the command's ``-f json`` output.

The client starts in about a second: commands whose outputs are only read back run through one process's
interactive shell (``Osc.script``); the ones whose exit status or argv options matter run alone."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.placement.osc import Osc
from tests.service.server import ServerProcess

CONFIG: dict[str, Any] = {"DEFAULT": {"service_down_time": 86400}}


@pytest.fixture(scope="module")
def osc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Osc]:
    """No token configured: any token is taken, read as Placement's noauth2 reads it (``admin``: an admin)."""
    workdir = tmp_path_factory.mktemp("osc")
    with ServerProcess(f"sqlite:///{workdir}/gantt.sqlite", config=CONFIG, workdir=workdir) as server:
        yield Osc(server.url + "/placement", token="admin", version="1.39")


def new_uuid() -> str:
    return str(uuid.uuid4())


def tag() -> str:
    """A name part no other test of the module uses (they share one server)."""
    return uuid.uuid4().hex[:8].upper()


def amounts(text: str) -> dict[str, int]:
    """``VCPU=2,MEMORY_MB=1024`` as a dict (Placement's order of classes is a dict's, not a promise)."""
    return {k: int(v) for k, v in (pair.split("=") for pair in text.split(","))} if text else {}


def used_capacity(text: str) -> dict[str, tuple[int, int]]:
    """``VCPU=0/32,MEMORY_MB=0/4096`` (the candidates' summaries) as a dict of (used, capacity)."""
    pairs = (pair.split("=") for pair in text.split(","))
    return {k: (int(v.split("/")[0]), int(v.split("/")[1])) for k, v in pairs}


def test_resource_providers(osc: Osc) -> None:
    root, child, name = new_uuid(), new_uuid(), f"osc-{tag()}"
    made, kid, in_tree, renamed, shown, by_name = osc.script(
        ["resource", "provider", "create", name, "--uuid", root, "-f", "json"],
        ["resource", "provider", "create", f"{name}-numa0", "--uuid", child, "--parent-provider", root, "-f", "json"],
        ["resource", "provider", "list", "--in-tree", child, "-f", "json"],
        ["resource", "provider", "set", root, "--name", f"{name}-renamed", "-f", "json"],
        ["resource", "provider", "show", root, "-f", "json"],
        ["resource", "provider", "list", "--name", f"{name}-renamed", "-f", "json"])
    assert made == {"uuid": root, "name": name, "generation": 0, "root_provider_uuid": root,
                    "parent_provider_uuid": None}
    assert kid == {"uuid": child, "name": f"{name}-numa0", "generation": 0, "root_provider_uuid": root,
                   "parent_provider_uuid": root}
    assert sorted(in_tree, key=lambda p: p["name"]) == [made, kid]
    assert renamed == shown == {**made, "name": f"{name}-renamed"}
    assert by_name == [renamed]
    # An older microversion: the client's columns follow it (no tree before 1.14).
    assert osc.at("1.13")("resource provider show", root, "-f", "json") == {"uuid": root, "name": f"{name}-renamed",
                                                                            "generation": 0}
    assert osc.fails("resource provider delete", root) == \
        f"Unable to delete parent resource provider {root}: It has child resource providers. (HTTP 409)"
    osc.script(["resource", "provider", "delete", child], ["resource", "provider", "delete", root])
    assert osc.fails("resource provider show", root, "-f", "json") == \
        f"No resource provider with uuid {root} found (HTTP 404)"


def test_inventories(osc: Osc) -> None:
    rp = new_uuid()
    defaults = {"min_unit": 1, "max_unit": 2147483647, "reserved": 0, "step_size": 1, "allocation_ratio": 1.0}
    _, put, listed, vcpu, amended, disk, _, left = osc.script(
        ["resource", "provider", "create", f"osc-{tag()}", "--uuid", rp, "-f", "json"],
        ["resource", "provider", "inventory", "set", rp, "--resource", "VCPU=16", "--resource",
         "VCPU:allocation_ratio=4.0", "--resource", "MEMORY_MB=32768", "--resource", "MEMORY_MB:reserved=512",
         "-f", "json"],
        ["resource", "provider", "inventory", "list", rp, "-f", "json"],
        ["resource", "provider", "inventory", "show", rp, "VCPU", "-f", "json"],
        ["resource", "provider", "inventory", "set", rp, "--amend", "--resource", "DISK_GB=200", "-f", "json"],
        ["resource", "provider", "inventory", "class", "set", rp, "DISK_GB", "--total", "100", "--max_unit", "50",
         "-f", "json"],
        ["resource", "provider", "inventory", "delete", rp, "--resource-class", "MEMORY_MB"],
        ["resource", "provider", "inventory", "list", rp, "-f", "json"])
    vcpu_row = {**defaults, "resource_class": "VCPU", "total": 16, "allocation_ratio": 4.0}
    memory_row = {**defaults, "resource_class": "MEMORY_MB", "total": 32768, "reserved": 512}
    assert sorted(put, key=lambda r: r["resource_class"]) == [memory_row, vcpu_row]
    assert sorted(listed, key=lambda r: r["resource_class"]) == [{**memory_row, "used": 0}, {**vcpu_row, "used": 0}]
    assert vcpu == {k: v for k, v in vcpu_row.items() if k != "resource_class"} | {"used": 0}
    assert {r["resource_class"]: r["total"] for r in amended} == {"VCPU": 16, "MEMORY_MB": 32768, "DISK_GB": 200}
    assert disk == {**defaults, "total": 100, "max_unit": 50}
    assert sorted(left, key=lambda r: r["resource_class"]) == [
        {**defaults, "resource_class": "DISK_GB", "total": 100, "max_unit": 50, "used": 0}, {**vcpu_row, "used": 0}]
    assert osc.fails("resource provider inventory show", rp, "MEMORY_MB", "-f", "json") == \
        f"No inventory of class MEMORY_MB for {rp} (HTTP 404)"


def test_resource_classes_and_traits(osc: Osc) -> None:
    rc, trait = f"CUSTOM_OSC_{tag()}", f"CUSTOM_OSC_{tag()}"
    _, classes, shown, _, _, traits, one, _, after = osc.script(
        ["resource", "class", "create", rc],
        ["resource", "class", "list", "-f", "json"],
        ["resource", "class", "show", rc, "-f", "json"],
        ["resource", "class", "delete", rc],
        ["trait", "create", trait],
        ["trait", "list", "--name", "startswith:CUSTOM_OSC_", "-f", "json"],
        ["trait", "show", trait, "-f", "json"],
        ["trait", "delete", trait],
        ["trait", "list", "--name", f"startswith:{trait}", "-f", "json"])
    names = [c["name"] for c in classes]
    assert {"VCPU", "MEMORY_MB", "DISK_GB", rc} <= set(names) and len(names) == len(set(names))
    assert shown == {"name": rc} and one == {"name": trait}
    assert {"name": trait} in traits and all(t["name"].startswith("CUSTOM_OSC_") for t in traits)
    assert after == []
    assert osc.fails("resource class show", rc, "-f", "json") == f"No such resource class {rc}. (HTTP 404)"
    # A schema refusal reaches the user whole (the client shows the detail's last line), as from Placement.
    assert osc.fails("resource class create", "NOT_CUSTOM") == (
        "JSON does not validate: 'NOT_CUSTOM' does not match '^CUSTOM_[A-Z0-9_]+$'  "
        "Failed validating 'pattern' in schema['properties']['name'] (HTTP 400)")


def test_traits_aggregates_and_candidates(osc: Osc) -> None:
    """Two compute nodes and a disk pool shared with the first through an aggregate."""
    cn1, cn2, pool, agg, gold = new_uuid(), new_uuid(), new_uuid(), new_uuid(), f"CUSTOM_GOLD_{tag()}"
    outputs = osc.script(
        ["trait", "create", gold],
        *(["resource", "provider", "create", f"osc-{tag()}", "--uuid", rp, "-f", "json"] for rp in (cn1, cn2, pool)),
        # generations are known: 0 at creation, one more for each aggregates, inventories or traits write
        ["resource", "provider", "aggregate", "set", cn1, "--aggregate", agg, "--generation", "0", "-f", "json"],
        ["resource", "provider", "aggregate", "set", pool, "--aggregate", agg, "--generation", "0", "-f", "json"],
        *(["resource", "provider", "inventory", "set", cn, "--resource", "VCPU=8", "--resource", "MEMORY_MB=4096",
           "-f", "json"] for cn in (cn1, cn2)),
        ["resource", "provider", "inventory", "set", pool, "--resource", "DISK_GB=500", "-f", "json"],
        *(["resource", "provider", "trait", "set", cn, "--trait", gold, "--trait", "HW_CPU_X86_AVX2", "-f", "json"]
          for cn in (cn1, cn2)),
        ["resource", "provider", "trait", "set", pool, "--trait", "MISC_SHARES_VIA_AGGREGATE", "-f", "json"],
        ["resource", "provider", "trait", "list", cn1, "-f", "json"],
        ["resource", "provider", "aggregate", "list", pool, "-f", "json"],
        ["resource", "provider", "show", cn1, "-f", "json"])
    set_aggs, (traits, pool_aggs, shown) = outputs[4], outputs[-3:]
    assert set_aggs == pool_aggs == [{"uuid": agg}]
    assert sorted(t["name"] for t in traits) == sorted([gold, "HW_CPU_X86_AVX2"])
    assert shown["generation"] == 3

    # Compute and disk together: only cn1 reaches the pool. One row per provider of a candidate.
    rows = osc("allocation candidate list", "--resource", "VCPU=2", "--resource", "MEMORY_MB=1024", "--resource",
               "DISK_GB=50", "--required", gold, "-f", "json")
    assert {r["#"] for r in rows} == {1}
    by_rp = {r["resource provider"]: r for r in rows}
    assert set(by_rp) == {cn1, pool}
    assert amounts(by_rp[cn1]["allocation"]) == {"VCPU": 2, "MEMORY_MB": 1024}
    assert amounts(by_rp[pool]["allocation"]) == {"DISK_GB": 50}
    assert used_capacity(by_rp[cn1]["inventory used/capacity"]) == {"VCPU": (0, 8), "MEMORY_MB": (0, 4096)}
    assert sorted(by_rp[cn1]["traits"].split(",")) == sorted([gold, "HW_CPU_X86_AVX2"])
    assert by_rp[pool]["traits"] == "MISC_SHARES_VIA_AGGREGATE"

    limited, any_of, forbidden = osc.script(
        ["allocation", "candidate", "list", "--resource", "VCPU=2", "--required", gold, "--limit", "1", "-f", "json"],
        # a comma: any of these traits (1.39)
        ["allocation", "candidate", "list", "--resource", "VCPU=2", "--required", f"{gold},HW_CPU_X86_AVX512F",
         "-f", "json"],
        ["allocation", "candidate", "list", "--resource", "VCPU=2", "--required", gold, "--forbidden",
         "HW_CPU_X86_AVX2", "-f", "json"])
    assert len(limited) == 1 and limited[0]["resource provider"] in {cn1, cn2}
    assert {r["resource provider"] for r in any_of} == {cn1, cn2}
    assert forbidden == []

    # 1.10, the first with candidates: no traits column, no required traits (the client refuses them itself).
    old = osc.at("1.10")("allocation candidate list", "--resource", "VCPU=8", "-f", "json")
    ours = [r for r in old if r["resource provider"] in {cn1, cn2}]
    assert sorted(r["resource provider"] for r in ours) == sorted([cn1, cn2])
    assert all(set(r) == {"#", "allocation", "resource provider", "inventory used/capacity"} for r in ours)
    assert osc.fails("allocation candidate list", "--resource", "VCPU=1", "--required", f"CUSTOM_NONE_{tag()}") \
        .startswith("No such trait(s): CUSTOM_NONE_")


def test_allocations_and_usages(osc: Osc) -> None:
    """A consumer across a compute node and a pool: set at 1.12 (no consumer generation), replaced at 1.39 with
    a consumer type (the client reads the consumer generation first), unset class by class, deleted."""
    cn, pool, consumer, project, user = new_uuid(), new_uuid(), new_uuid(), new_uuid(), new_uuid()
    osc.script(
        *(["resource", "provider", "create", f"osc-{tag()}", "--uuid", rp, "-f", "json"] for rp in (cn, pool)),
        ["resource", "provider", "inventory", "set", cn, "--resource", "VCPU=8", "--resource", "MEMORY_MB=4096",
         "-f", "json"],
        ["resource", "provider", "inventory", "set", pool, "--resource", "DISK_GB=500", "-f", "json"])
    first = osc.at("1.12")("resource provider allocation set", consumer, "--allocation",
                           f"rp={cn},VCPU=2,MEMORY_MB=1024", "--allocation", f"rp={pool},DISK_GB=10",
                           "--project-id", project, "--user-id", user, "-f", "json")
    owner = {"project_id": project, "user_id": user}
    assert sorted(first, key=lambda r: r["resource_provider"] == pool) == [
        {"resource_provider": cn, "generation": 2, "resources": {"VCPU": 2, "MEMORY_MB": 1024}, **owner},
        {"resource_provider": pool, "generation": 2, "resources": {"DISK_GB": 10}, **owner}]
    shown, cn_usage, project_usage, user_usage, rows, candidates = osc.script(
        ["resource", "provider", "allocation", "show", consumer, "-f", "json"],
        ["resource", "provider", "usage", "show", cn, "-f", "json"],
        ["resource", "usage", "show", project, "-f", "json"],
        ["resource", "usage", "show", project, "--user-id", new_uuid(), "-f", "json"],
        ["resource", "provider", "inventory", "list", cn, "-f", "json"],
        ["allocation", "candidate", "list", "--resource", "VCPU=1", "-f", "json"])
    assert sorted(shown, key=lambda r: r["resource_provider"] == pool) == [{**row, "consumer_type": "unknown"}
                                                                           for row in first]
    assert {u["resource_class"]: u["usage"] for u in cn_usage} == {"VCPU": 2, "MEMORY_MB": 1024}
    # From 1.38 Placement counts a project's usages per consumer type: the client shows each type as one row.
    assert project_usage == [{"resource_class": "unknown",
                              "usage": {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10, "consumer_count": 1}}]
    assert user_usage == []
    assert {r["resource_class"]: r["used"] for r in rows} == {"VCPU": 2, "MEMORY_MB": 1024}
    ours = [r for r in candidates if r["resource provider"] == cn]
    assert len(ours) == 1 and used_capacity(ours[0]["inventory used/capacity"])["VCPU"] == (2, 8)

    replaced, unset, again, _, gone, cn_after, pool_after = osc.script(
        ["resource", "provider", "allocation", "set", consumer, "--allocation", f"rp={cn},VCPU=4",
         "--project-id", project, "--user-id", user, "--consumer-type", "INSTANCE", "-f", "json"],
        ["resource", "provider", "allocation", "unset", consumer, "--resource-class", "VCPU", "-f", "json"],
        ["resource", "provider", "allocation", "set", consumer, "--allocation", f"rp={pool},DISK_GB=20",
         "--project-id", project, "--user-id", user, "--consumer-type", "INSTANCE", "-f", "json"],
        ["resource", "provider", "allocation", "delete", consumer],
        ["resource", "provider", "allocation", "show", consumer, "-f", "json"],
        ["resource", "provider", "usage", "show", cn, "-f", "json"],
        ["resource", "provider", "usage", "show", pool, "-f", "json"])
    assert replaced == [{"resource_provider": cn, "generation": 3, "resources": {"VCPU": 4}, **owner,
                         "consumer_type": "INSTANCE"}]
    assert unset == []  # its last class gone, the consumer went with it
    # 3: losing its allocation to the replacement did not move the pool's generation (nor does it in Placement)
    assert again == [{"resource_provider": pool, "generation": 3, "resources": {"DISK_GB": 20}, **owner,
                      "consumer_type": "INSTANCE"}]
    assert gone == []
    assert {u["resource_class"]: u["usage"] for u in cn_after + pool_after} == {"VCPU": 0, "MEMORY_MB": 0,
                                                                                "DISK_GB": 0}
    assert osc.fails("resource provider allocation delete", consumer) == \
        f"No allocations for consumer '{consumer}' (HTTP 404)"


def test_gantts_token(tmp_path: Any) -> None:
    """With a token configured, the client passes it as Keystone's admin token; another token is refused with
    the 401 the client reports. Without one (the module's server), a token that carries no admin is refused by
    Placement's policy, as noauth2 refuses it."""
    with ServerProcess("memory://", config=CONFIG, workdir=tmp_path, token="s3cret") as server:
        right = Osc(server.url + "/placement", token="s3cret", version="1.39")
        assert right("resource provider create", "tokened", "-f", "json")["name"] == "tokened"
        assert Osc(right.endpoint, token="admin").fails("resource provider list") == \
            "The request you have made requires authentication. (HTTP 401)"


def test_a_token_without_admin_is_refused(osc: Osc) -> None:
    assert Osc(osc.endpoint, token="someone").fails("trait list") == \
        "Policy does not allow placement:traits:list to be performed. (HTTP 403)"
