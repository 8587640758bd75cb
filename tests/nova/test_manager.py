"""Gantt's nova-scheduler manager (gantt.nova.manager) served by Nova 34's own service framework and asked by Nova's
own ``SchedulerAPI`` client, over a real RabbitMQ broker (Debian's rabbitmq-server, tests/nova/rabbit.py) and over
oslo.messaging's in-process ``fake://`` transport, on Nova's real databases (SQLite files made by Nova's migrations,
rows written through ``nova.objects``). The scenarios run in the nova+gantt venv (tests/nova/rpc_driver.py), once per
transport; Nova's own HostManager filtering and weighing and Placement's allocation candidates raise there, so
every answer is Gantt's."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.nova import rabbit
from tests.nova.venv import python_or_skip
from tests.venvs import run_json

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
SCENARIOS = ["boot_with_alternates", "versions", "no_valid_host", "unsupported", "aggregates", "instance_info",
             "two_schedulers", "new_compute", "updated_node", "periodic_read", "incremental_read", "host_fields",
             "move", "same_host_resize", "rebuild", "seed_instances", "unreachable_cell", "configuration",
             "evacuate", "max_attempts",
             "separate_processes", "request_filters"]


# The real broker wherever it can run (CI must have it: tests/nova/rabbit.py fails the run without it); oslo.messaging's
# in-process fake:// transport only where it cannot. Nova's functional tests (tests/nova/test_functional_ratchet.py)
# drive the manager over fake:// anyway, so running every scenario on both would pay Nova's start twice for little.
TRANSPORT = "rabbit" if rabbit.server() is not None or os.environ.get("CI") == "true" else "fake"


@pytest.fixture(scope="module", params=[TRANSPORT])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    python = python_or_skip()
    tmp = tmp_path_factory.mktemp(f"nova-{request.param}")
    if request.param == "fake":
        out = _drive(python, tmp, "fake:/")
        out["transport"] = "fake"
        return out
    with rabbit.broker(tmp / "rabbit") as broker:
        out = _drive(python, tmp, broker.url)
    out["transport"] = "rabbit"
    return out


def _drive(python: Path, tmp: Path, url: str) -> dict[str, Any]:
    work = tmp / "nova"
    work.mkdir()
    out: dict[str, Any] = run_json(python, HERE / "rpc_driver.py",
                                   {"src": str(SRC), "tmp": str(work), "transport_url": url, "scenarios": SCENARIOS},
                                   timeout=600)
    # the decision was never Nova's: its filtering, weighing and Placement's candidates were not called
    assert out["nova_calls"] == {}
    return out


def _run_scenario(tmp_path: Path, name: str) -> dict[str, Any]:
    """One scenario alone, in a Nova world of its own (over fake://), for one that cannot share the module's: its
    result, and Nova's decision path never called."""
    python = python_or_skip()
    work = tmp_path / "nova"
    work.mkdir()
    out = run_json(python, HERE / "rpc_driver.py", {"src": str(SRC), "tmp": str(work), "transport_url": "fake:/",
                                                    "scenarios": [name]}, timeout=600)
    assert out["nova_calls"] == {}
    return _scenario(out, name)


def _scenario(run: dict[str, Any], name: str) -> dict[str, Any]:
    result: dict[str, Any] = run["scenarios"][name]
    assert "error" not in result or not isinstance(result["error"], str), result["error"]
    return result


def _refusal(answer: dict[str, Any]) -> str:
    """The NoValidHost Nova's client raised (over a broker, the ``_Remote`` subclass Nova's conductor catches)."""
    assert "error" in answer, answer
    assert "NoValidHost" in answer["error"]["classes"], answer["error"]
    message: str = answer["error"]["message"]
    assert message.startswith("No valid host was found."), message
    return message


def _explained(answer: dict[str, Any]) -> str:
    """A NoValidHost for want of a host: Nova's own words in the message (a tenant reads it), Gantt's explanation
    in the details (the traceback Nova's conductor keeps as the fault's admin-only details)."""
    assert _refusal(answer) in ("No valid host was found. ",
                                "No valid host was found. There are not enough hosts available."), answer
    details: str = answer["error"]["details"]
    return details


def test_boot_with_alternates(run: dict[str, Any]) -> None:
    got = _scenario(run, "boot_with_alternates")
    by_uuid = {u: h for h, u in got["nodes"].items()}
    answer = got["answer"]["selections"]
    assert len(answer) == 2
    chosen = [choices[0]["host"] for choices in answer]
    assert len(set(chosen)) == 2  # two instances, two hosts' worth of claims
    for choices in answer:
        # the claimed host, then max_attempts - 1 = 2 alternates, none another instance's host (replaced, as in
        # Nova's _get_alternate_hosts, by the next host: 4 hosts leave exactly 2), the same for every instance
        assert len(choices) == 3
        assert not {c["host"] for c in choices[1:]} & set(chosen)
        assert [c["host"] for c in choices[1:]] == [c["host"] for c in answer[0][1:]]
        assert len({c["host"] for c in choices}) == len(choices)
        for sel in choices:
            assert by_uuid[sel["uuid"]] == sel["host"] == sel["nodename"]
            assert sel["cell_uuid"] == got["cell"]
            assert sel["availability_zone"] == "nova"
            assert sel["allocation_request_version"] == "1.36"
            assert sel["allocation_request"] == {
                "allocations": {sel["uuid"]: {"resources": {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10}}},
                "mappings": {"": [sel["uuid"]]}}
    # the claims are in Gantt's store, keyed by the instances
    assert got["allocations"] == sorted(got["instances"])
    # asked again: the same claims, and alternates too (Nova filters and weighs anew)
    repeat = got["repeat"]["selections"]
    assert [choices[0]["host"] for choices in repeat] == chosen
    assert [sorted(c["host"] for c in choices[1:]) for choices in repeat] == [sorted(set(by_uuid.values()) -
                                                                               set(chosen))] * 2


def test_every_rpc_version_and_unknown_ones_refused(run: dict[str, Any]) -> None:
    got = _scenario(run, "versions")
    for version in ("4.0", "4.3", "4.4"):
        [legacy] = got[version]["legacy"]  # no return_objects: Nova's host dicts
        assert set(legacy) == {"host", "nodename", "limits"}
        assert legacy["host"] in {"v1", "v2", "v3"}
    [[selection]] = got["4.5"]["selections"]  # return_alternates False: no alternates
    assert selection["host"] in {"v1", "v2", "v3"}
    for version in ("4.6", "5.0"):
        error = got[version]["error"]
        # oslo.messaging's own refusal: raised as is in process, a RemoteError naming it across a broker
        assert error["type"] == "UnsupportedVersion" or (
            error["type"] == "RemoteError" and "UnsupportedVersion" in error["message"]), error
        assert f"does not support RPC version {version}" in error["message"]


def test_no_valid_host_in_novas_words_and_gantts_explanation_in_the_details(run: dict[str, Any]) -> None:
    """The fault's message (any tenant reads it) is Nova's scheduler's: empty when Placement would have no
    candidate, "There are not enough hosts available." past it; Gantt's explanation is in the traceback the
    conductor keeps as the fault's admin-only details."""
    got = _scenario(run, "no_valid_host")
    assert _refusal(got) == "No valid host was found. "
    assert "VCPU" in got["error"]["details"] and "64" in got["error"]["details"]
    assert _refusal(got["ignored"]) == "No valid host was found. "  # ignore_hosts is not Placement's: still none
    assert got["member"]["selections"][0][0]["host"] == "small"
    assert _refusal(got["group"]) == "No valid host was found. There are not enough hosts available."
    assert "ServerGroupAntiAffinityFilter" in got["group"]["error"]["details"]


def test_unsupported_field_is_a_no_valid_host_naming_it(run: dict[str, Any]) -> None:
    got = _scenario(run, "unsupported")
    message = _refusal(got)
    assert "request_level_params.same_subtree" in message
    assert got["allocations"] == 0  # nothing claimed


def test_aggregates_loaded_at_start_and_kept_by_the_fanout(run: dict[str, Any]) -> None:
    got = _scenario(run, "aggregates")
    assert got["loaded"] == ["early"]
    assert got["fanout_seen"] and got["fast_hosts"] == [["a3"]]
    [[sel]] = got["in_zone"]["selections"]
    assert (sel["host"], sel["availability_zone"]) == ("a3", "az-f")
    [[sel]] = got["in_early_zone"]["selections"]
    assert (sel["host"], sel["availability_zone"]) == ("a1", "az-e")
    assert got["deleted_seen"]
    assert "AvailabilityZoneFilter" in _explained(got["zone_gone"])


def test_instance_info_casts(run: dict[str, Any]) -> None:
    got = _scenario(run, "instance_info")
    assert got["synced"] and got["updated"] and got["deleted"]
    [[sel]] = got["different_host"]["selections"]
    assert sel["host"] == "i2"
    [[sel]] = got["same_host"]["selections"]
    assert sel["host"] == "i1"


def test_two_schedulers_on_one_store_never_double_book(run: dict[str, Any]) -> None:
    got = _scenario(run, "two_schedulers")
    # 8 requests at once, through two schedulers, for 3 one-slot hosts: 3 placed, each on its own host
    assert sorted(got["placed"]) == sorted(got["hosts"])
    assert len(got["refused"]) == 5
    for error in got["refused"]:
        assert "NoValidHost" in error["classes"]


def test_cells_read_before_a_decision(run: dict[str, Any]) -> None:
    got = _scenario(run, "new_compute")
    [[sel]] = got["new"]["selections"]
    assert sel["host"] == "n2"  # created after the scheduler started; only it has 8 VCPUs
    assert "ComputeFilter removed 1" in _explained(got["disabled"])
    assert "ComputeFilter removed 1" in _explained(got["forced_down"])
    # a deleted compute node leaves Gantt at the next decision
    assert got["hosts"] == ["n2"]
    assert got["after_delete"]["selections"][0][0]["host"] == "n2"


def test_a_node_updated_in_place_is_read_alone(run: dict[str, Any]) -> None:
    got = _scenario(run, "updated_node")
    assert "VCPU" in _explained(got["before"])
    [[sel]] = got["after"]["selections"]
    assert sel["host"] == "u2"  # its new size, seen by the decision right after the row changed
    # by reading the one node that changed (Gantt's decision at 10,000 nodes must not re-read them all)
    assert (got["full_reads"], got["partial_reads"], got["written"]) == (0, 1, 1)


def test_periodic_read(run: dict[str, Any]) -> None:
    got = _scenario(run, "periodic_read")
    assert got["seen"] and got["passes_grew"]
    assert got["written"] == 2  # one report per node that changed; the later reads are heartbeats
    assert not got["reader_alive_after_stop"] and got["reads_after_stop"] == 0


def test_periodic_pass_reads_only_changed_nodes(run: dict[str, Any]) -> None:
    got = _scenario(run, "incremental_read")
    # nothing changed: no node read (1,000 nodes took 4-6 s a pass to read in full), none written
    assert got["quiet"] == {"full": 0, "nodes_read": 0, "written": 0}
    # one node updated in place: that node alone read and written
    assert got["one_changed"] == {"full": 0, "nodes_read": 1, "written": 1}
    assert got["one_changed_vcpus"] == 16
    # a row whose updated_at is not newer than the latest read (another node's, then its own) is still read
    assert got["tie_other_node_vcpus"] == 6 and got["tie_other_node"]["full"] == 0
    assert got["tie_same_node_vcpus"] == 7 and got["tie_same_node"]["full"] == 0
    # ... and one written with a time 20 s older than the latest read (a lagging clock, a late commit)
    assert got["late_writer_vcpus"] == 5 and got["late_writer"]["full"] == 0
    later = got["later_passes"]
    assert all(p["full"] == 0 for p in later)
    # the services' heartbeats read no node; i1's service that stopped reporting went down by time alone: its node
    # read and written once
    assert sum(p["written"] for p in later) == 1 and later[-1]["nodes_read"] == 0
    assert got["forced_down"] == {"i1": True, "i2": False, "i3": False}
    # heartbeaten without being read, every node is still up in Gantt past its service_down_time (6 s)
    assert got["up"] == {"i1": True, "i2": True, "i3": True}
    # (i4, whose service row is gone, is left out by every read, and made no pass a full one)
    assert got["safety_net"] == [0, 1]


def test_host_report_has_every_field_nova_filters_read(run: dict[str, Any]) -> None:
    stats = _scenario(run, "host_fields")["stats"]
    for name, value in {"vcpus": 8, "memory_mb": 8192, "local_gb": 100, "disk_available_least": 100,
                        "hypervisor_type": "QEMU", "hypervisor_version": 8002000, "hypervisor_hostname": "f1",
                        "host_ip": "10.0.0.1", "supported_instances": [["x86_64", "kvm", "hvm"]],
                        "cpu_allocation_ratio": 1.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
                        "num_instances": 3, "num_io_ops": 2, "failed_builds": 1}.items():
        assert stats[name] == value, name
    assert stats["stats"]["custom"] == "x"
    assert stats["cpu_info"] == '{"arch": "x86_64", "features": ["avx2"]}'
    assert stats["metrics"] == [{"name": "cpu.percent", "value": 0.5, "source": "libvirt",
                                 "timestamp": "2026-11-28T00:00:00.000000"}]
    [cell] = stats["numa_topology"]["cells"]
    assert (cell["cpuset"], cell["pcpuset"], cell["memory"]) == ([0, 1], [2, 3], 4096)
    assert stats["pci_stats"] == [{"vendor_id": "8086", "product_id": "1520", "numa_node": 0, "count": 4,
                                   "dev_type": "type-VF", "physical_network": "p"}]


def test_gantt_nova_scheduler_processes_share_one_store(run: dict[str, Any]) -> None:
    """`gantt nova-scheduler --config-file nova.conf`, twice, as a deployment runs it: both serve Nova's client
    through the broker, never book a one-slot host twice, and stop cleanly on SIGTERM."""
    got = _scenario(run, "separate_processes")
    if run["transport"] == "fake":
        assert got == {"skipped": "needs a broker"}  # fake:// reaches no other process
        return
    assert got["started"], got["logs"]
    assert sorted(got["placed"]) == sorted(got["hosts"]), got["logs"]
    assert len(got["refused"]) == 3
    assert got["exit"] == [0, 0], got["logs"]


def test_repeat_and_move(run: dict[str, Any]) -> None:
    got = _scenario(run, "move")
    source = got["source"]
    # asked again for the same boot: the same claim, nothing booked twice
    assert got["repeat"]["selections"][0][0]["host"] == source
    # a move: a new host, the instance booked there and its source kept under the migration (design §6)
    [[dest]] = got["move"]["selections"]
    assert dest["host"] != source
    assert got["allocations"] == {got["instance"]: dest["host"], got["migration"]: source}
    # delete_instance_info from the source leaves the instance's claim on its destination
    assert got["after_source_left"] == got["allocations"]
    # from the host it runs on (the instance deleted): its claim is released
    assert got["deleted"]
    assert got["after_delete"] == {got["migration"]: source}


def test_an_evacuation_books_the_destination_beside_the_source(run: dict[str, Any]) -> None:
    """As Nova's scheduler: one allocation of the instance on the source and the destination, which the source's
    compute trims when it comes back up (or the destination's, when the rebuild fails there); the migration holds
    nothing. Regression: the source was held under the migration, which no compute drops."""
    got = _scenario(run, "evacuate")
    assert got["boot"]["selections"][0][0]["host"] == "e1"
    [[dest]] = got["evacuate"]["selections"]
    flavor = {"VCPU": 1, "MEMORY_MB": 256, "DISK_GB": 1}
    assert dest["host"] == "e2"
    # the Selection's allocation request is the destination's, as Nova's (its claim doubles it up)
    assert dest["allocation_request"]["allocations"] == {dest["uuid"]: {"resources": flavor}}
    assert got["repeat"] == got["evacuate"]
    assert got["allocations"] == {got["instance"]: [["e2", flavor], ["e1", flavor]]}


def test_max_attempts_is_read_at_each_request(run: dict[str, Any]) -> None:
    got = _scenario(run, "max_attempts")
    assert [len(choices) for choices in got["default"]["selections"]] == [3]
    assert [len(choices) for choices in got["five"]["selections"]] == [5]


def test_same_host_resize(run: dict[str, Any]) -> None:
    """nova-api decides whether a move may stay on its host (ignore_hosts): Gantt never excludes it on its own."""
    got = _scenario(run, "same_host_resize")
    instance, migration = got["instance"], got["migration"]
    assert got["boot"]["selections"][0][0]["host"] == "sh1"
    # 2 held by the migration + 3 asked > 4: refused, nothing changed
    assert "VCPU" in _explained(got["too_big"])
    assert got["after_too_big"] == {instance: "sh1"}
    [[dest]] = got["resize"]["selections"]
    assert dest["host"] == "sh1"
    assert got["allocations"] == {instance: ["sh1", 2], migration: ["sh1", 2]}
    # the confirm's cast from the host the instance still runs on keeps its claim; a deletion's releases it
    assert got["after_confirm"] == {instance: "sh1"}
    assert got["deleted"]


def test_rebuild_checks_the_instances_host_and_claims_nothing(run: dict[str, Any]) -> None:
    got = _scenario(run, "rebuild")
    assert got["boot"]["selections"][0][0]["host"] == "r1"
    # as Nova's _legacy_find_hosts answers it: the one host, no allocation request, no alternates
    [[sel]] = got["good"]["selections"]
    assert sel["host"] == "r1" and sel["nodename"] == "r1"
    assert sel["allocation_request"] is None and sel["allocation_request_version"] is None
    assert "ImagePropertiesFilter" in _explained(got["bad"])
    assert got["unchanged"]


def test_instance_lists_are_seeded_from_the_cells_at_a_first_start(run: dict[str, Any]) -> None:
    got = _scenario(run, "seed_instances")
    assert got["lists"] == {"p1": sorted([got["a"], got["b"]]), "p2": [got["c"]], "p3": []}
    [[sel]] = got["same_host"]["selections"]
    assert sel["host"] == "p2"  # SameHostFilter reads the seeded list
    assert got["second"] == [got["a"]]


def test_an_unreachable_cell_leaves_the_others_schedulable(run: dict[str, Any]) -> None:
    got = _scenario(run, "unreachable_cell")
    [[sel]] = got["answer"]["selections"]
    assert sel["host"] == "ok1"
    assert got["seconds"] < 30  # refused at once, not after a cell timeout per request


def test_request_filters_that_ask_neutron_and_the_cells(run: dict[str, Any]) -> None:
    """OWNER_NOVA is required while every nova-compute reports it (not once an older one joins); a port Neutron
    says is remote-managed requires COMPUTE_REMOTE_MANAGED_PORTS; a port given by id is no longer refused; a
    Neutron that cannot be asked is a NoValidHost saying so."""
    got = _scenario(run, "request_filters")

    def host(name: str) -> str:
        [[sel]] = got[name]["selections"]
        return str(sel["host"])

    assert "TraitsFilter" in _explained(got["owner_required"])  # only "bare" left, without OWNER_NOVA
    assert host("owner_not_required") == "bare"
    assert host("remote_managed") == "remote"
    assert host("plain_port") == "owned"
    assert "remote-managed" in _refusal(got["neutron_down"]) and "Neutron is unreachable" in got["neutron_down"][
        "error"]["message"]


def test_on_etcd_two_schedulers_never_double_book_and_a_store_down_is_refused(tmp_path: Path) -> None:
    """The same race with the schedulers' replicas on an etcd store (schedulers on several machines); then the store
    goes down (its one member killed): a NoValidHost saying so, in bounded time, never a hung conductor."""
    from tests.etcd.cluster import LocalCluster, require_etcd

    require_etcd()
    python = python_or_skip()
    work = tmp_path / "nova"
    work.mkdir()
    with LocalCluster(tmp_path / "etcd", size=1) as cluster:
        out = run_json(python, HERE / "rpc_driver.py",
                       {"src": str(SRC), "tmp": str(work), "transport_url": "fake:/",
                        "scenarios": ["two_schedulers", "store_down"], "store": cluster.url("/nova-two"),
                        "store_pid": cluster.members[0].proc.pid}, timeout=600)
    assert out["nova_calls"] == {}
    got = _scenario(out, "two_schedulers")
    assert sorted(got["placed"]) == sorted(got["hosts"])
    assert len(got["refused"]) == 5
    got = _scenario(out, "store_down")
    [[sel]] = got["before"]["selections"]
    assert sel["host"] == "d1"
    message = _refusal(got["down"])
    assert "etcd" in message and "unavailable" in message
    assert got["seconds"] < 30


def test_broker_restart(tmp_path: Path) -> None:
    """RabbitMQ restarts between two requests (same node, same port): the scheduler and Nova's client reconnect,
    and the next request is answered."""
    python = python_or_skip()
    work = tmp_path / "nova"
    work.mkdir()
    handshake = tmp_path / "handshake"
    handshake.mkdir()
    with rabbit.broker(tmp_path / "rabbit") as broker:
        failures: list[BaseException] = []

        def restart() -> None:
            try:
                deadline = time.monotonic() + 300
                while not (handshake / "ready").exists():
                    if time.monotonic() > deadline:
                        return
                    time.sleep(0.2)
                broker.stop()
                broker.start()
                broker.wait_for_consumer("scheduler")  # the scheduler has reconnected and declared its queue
            except BaseException as exc:  # the driver times out waiting; this says why
                failures.append(exc)
            finally:
                (handshake / "go").touch()

        thread = threading.Thread(target=restart)
        thread.start()
        try:
            out = run_json(python, HERE / "rpc_driver.py",
                           {"src": str(SRC), "tmp": str(work), "transport_url": broker.url,
                            "scenarios": ["broker_restart"], "handshake": str(handshake)}, timeout=600)
        finally:
            (handshake / "ready").touch()  # the thread stops waiting whatever the driver did
            thread.join()
    assert not failures, failures
    got = _scenario(out, "broker_restart")
    assert got["before"]["selections"][0][0]["host"] == "r1"
    assert "selections" in got["after"], got["after"]
    assert got["after"]["selections"][0][0]["host"] == "r1", got["after"]


def test_options_come_from_nova_conf(run: dict[str, Any]) -> None:
    got = _scenario(run, "configuration")
    assert got["read"] == [3, 5, ["a1"], True]
    field, message = got["refused"]
    assert field == "$.filter_scheduler" and "image_props_weight_multiplier" in message


def test_two_cells_requested_cell_and_alternates_from_the_chosen_hosts_cell(tmp_path: Path) -> None:
    """Two cells whose hosts interleave by free RAM (b1 > a1 > a2 > b2 > b3 > a3): a boot's alternates are the
    chosen host's cell's, filled to max_attempts - 1 as Nova's _get_alternate_hosts walks on down the weighed list;
    a requested cell leaves only its hosts (and Nova's ignore_hosts still holds); an unknown cell and a
    cross-cell move are refused by name."""
    got = _run_scenario(tmp_path, "two_cells")
    cells = got["cells"]

    def hosts(answer: dict[str, Any], cell: str) -> list[str]:
        [choices] = answer["selections"]
        assert {s["cell_uuid"] for s in choices} == {cells[cell]}, choices
        return [s["host"] for s in choices]

    assert hosts(got["boot"], "b") == ["b1", "b2", "b3"]
    assert hosts(got["in_a"], "a") == ["a2", "a3"]  # a1 ignored by the request itself
    # b1 holds the boot now (an io op, which IoOpsWeigher counts against it): only the order may change
    assert sorted(hosts(got["in_b"], "b")) == ["b1", "b2", "b3"]
    assert "requested_destination.cell" in _refusal(got["unknown"])
    assert "requested_destination.allow_cross_cell_move" in _refusal(got["cross"])


def test_tenant_aggregate_switches_turned_on_after_start_apply_to_the_next_request(tmp_path: Path) -> None:
    """Nova reads [scheduler] limit_tenants_to_placement_aggregate / placement_aggregate_required_for_tenants at
    each request (its TenantAggregateFilterTest turns them on after the scheduler started): so does Gantt's
    manager, and a mask cached while they were off never answers once they are on."""
    got = _run_scenario(tmp_path, "tenant_aggregates")
    assert got["off"] == ["t1", "t1", "t2", "t2"]
    assert got["on"] == ["t1"] * 4
    assert got["no_aggregate"] == ["t2", "t2"]  # t1 holds six instances' worth more: RAMWeigher spreads to t2
    _refusal(got["required"])
    assert got["off_again"] == ["t2", "t2"]
    assert "query_placement_for_routed_network_aggregates" in _refusal(got["routed"])


def test_filter_and_weigher_options_set_after_start_apply_to_the_next_request(tmp_path: Path) -> None:
    """Nova's filters and weighers read their [filter_scheduler] options at each request (a functional test's
    self.flags after the scheduler started): so does Gantt's manager; one it cannot honour is refused by name at
    each request while it is set; enabled_filters, which Nova reads when it builds its HostManager, is not
    followed (Nova would not follow it either)."""
    got = _run_scenario(tmp_path, "per_request_options")
    assert got["spread"] == "o1"  # the most free RAM (o4, larger, is disabled)
    assert got["stacked"] == "o3"  # ram_weight_multiplier -1: the least
    for refused in got["refused"]:
        assert "image_props_weight_multiplier" in _refusal(refused)
    assert got["honoured_again"] == "o3"
    assert got["filters_kept"] == "o1"  # ComputeFilter still runs: o4 stays out
