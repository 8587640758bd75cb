"""gantt.nova.translate against Nova 34's real objects: generated RequestSpecs built as ``nova.objects`` in a venv
with nova==34.0.0 (tests/nova/venv.py), translated, decoded into Gantt's RequestSpec, and compared field by field
with what Nova's own scheduler code reads from the same object (ResourceRequest.from_request_spec for resources and
traits, get_scheduler_hint, the Destination's aggregates, ImageMetaProps). Selections go the other way into real
``nova.objects.Selection`` objects and through their primitives."""

from __future__ import annotations

import random
import uuid
from functools import cache
from pathlib import Path
from typing import Any

from tests.nova.venv import python_or_skip
from tests.venvs import run_json

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
CELL = "6a3ba9b8-4c1b-4d6e-9a40-3c2a0b1f0e11"
N_SPECS = 300


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


EXTRA_SPECS = [
    ("resources:CUSTOM_FOO", "2"), ("resources1:CUSTOM_BAR", "1"), ("resources_X:CUSTOM_BAZ", "3"),
    ("trait:HW_CPU_X86_AVX2", "required"), ("trait:HW_CPU_X86_SSE", "forbidden"),
    ("trait1:CUSTOM_T", "required"), ("hw:cpu_policy", "dedicated"), ("hw:cpu_policy", "shared"),
    ("aggregate_instance_extra_specs:ssd", "true"), ("resources:DISK_GB", "5"), ("resources:VCPU", "3"),
    ("resources:MEMORY_MB", "0"), ("group_policy", "none"), ("hw:mem_page_size", "large"),
    ("quota:cpu_shares", "100"),
]
IMAGE_PROPS = [
    ("hw_architecture", "x86_64"), ("architecture", "aarch64"), ("img_hv_type", "kvm"), ("hw_vm_mode", "hvm"),
    ("os_distro", "ubuntu"), ("hw_disk_bus", "virtio"), ("hw_vif_multiqueue_enabled", "true"),
    ("trait:CUSTOM_IMG", "required"), ("trait:HW_CPU_X86_SSE2", "required"), ("img_hv_requested_version", ">=6.0"),
    ("hw_rng_model", "virtio"), ("hw_watchdog_action", "reset"),
]
HINTS = {"same_host": 2, "different_host": 1, "query": '[">=","$free_ram_mb",1024]', "build_near_host_ip": "10.0.0.1",
         "cidr": "/24", "target_cell": "cell1", "group": None}
UNSUPPORTED = ["same_subtree", "requested_resources", "cross_cell", "other_cell", "port_id"]


def _port_pci_requests(rng: random.Random) -> list[dict[str, Any]]:
    """SR-IOV ports' PCI requests as Nova's neutron API makes them (nova.network.neutron.create_resource_requests):
    one device, a spec by physical network (None for none), remote-managed, maybe a device type and trust."""
    out = []
    for _ in range(rng.randint(1, 2)):
        spec = {"physical_network": rng.choice(["physnet1", None]), "remote_managed": rng.choice(["False", "True"])}
        if rng.random() < 0.5:
            spec["dev_type"] = rng.choice(["type-VF", "type-PF", "vdpa"])
        if rng.random() < 0.3:
            spec["trusted"] = rng.choice(["True", "False"])
        out.append({"request_id": _uuid(rng), "spec": spec,
                    "numa_policy": rng.choice([None, "legacy", "preferred", "required", "socket"])})
    return out


def generate_spec(rng: random.Random, i: int) -> dict[str, Any]:
    numa_image = rng.random() < 0.1
    vcpus, memory = (4, 2048) if numa_image else (rng.choice([1, 2, 4, 8]), rng.choice([512, 1024, 4096]))
    extra = dict(rng.sample(EXTRA_SPECS, rng.randint(0, 5)))
    if numa_image or "hw:cpu_policy" in extra:
        extra.pop("resources:VCPU", None)  # Nova refuses resources:VCPU beside a CPU policy
    if not numa_image and rng.random() < 0.15:
        extra["hw:numa_nodes"] = "2"
        vcpus, memory = 4, 4096
    if not numa_image and not {"hw:cpu_policy", "resources:VCPU"} & set(extra) and i % 7 == 3:  # (rng untouched)
        extra["resources:PCPU"] = str(vcpus)  # Nova's explicit form of a dedicated policy
    props = dict(rng.sample(IMAGE_PROPS, rng.randint(0, 5)))
    if numa_image:
        props.update({"hw_numa_nodes": "2", "hw_numa_cpus.0": "0,1", "hw_numa_cpus.1": "2,3",
                      "hw_numa_mem.0": "1024", "hw_numa_mem.1": "1024"})
    n = rng.choice([1, 1, 1, 2, 3])
    uuids = [_uuid(rng) for _ in range(n)]
    case: dict[str, Any] = {
        "flavor": {"name": f"f{i}", "id": i, "vcpus": vcpus, "memory_mb": memory, "root_gb": rng.choice([0, 1, 20]),
                   "ephemeral_gb": rng.choice([0, 0, 5]), "swap": rng.choice([0, 0, 512, 1000, 2048]),
                   "extra_specs": extra},
        "image": ({"id": _uuid(rng), "name": "img", "disk_format": rng.choice(["qcow2", "raw"]),
                   "properties": props} if rng.random() < 0.9 else None),
        "project_id": f"p{rng.randint(1, 3)}", "user_id": f"u{rng.randint(1, 3)}",
        "num_instances": n, "instance_uuids": uuids, "is_bfv": rng.random() < 0.3,
        "cell_uuid": CELL,
    }
    if rng.random() < 0.7:
        case["rpc_instance_uuids"] = uuids
    if rng.random() < 0.3:
        case["availability_zone"] = rng.choice(["az1", "az2"])
    for name in ("ignore_hosts", "force_hosts", "force_nodes"):
        if rng.random() < 0.15:
            case[name] = [f"host{rng.randint(1, 9)}"]
    hints: dict[str, list[str]] = {}
    for name in rng.sample(sorted(HINTS), rng.randint(0, 3)):
        value = HINTS[name]
        hints[name] = ([_uuid(rng) for _ in range(value)] if isinstance(value, int)
                       else [_uuid(rng)] if value is None else [value])
    case["scheduler_hints"] = hints
    if rng.random() < 0.3:
        policy = rng.choice(["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"])
        case["instance_group"] = {
            "uuid": _uuid(rng), "name": "g", "policy": policy,
            "members": [_uuid(rng) for _ in range(rng.randint(0, 3))],
            "hosts": [f"host{rng.randint(1, 9)}" for _ in range(rng.randint(0, 2))],
            "rules": {"max_server_per_host": str(rng.randint(1, 3))} if policy == "anti-affinity" and
            rng.random() < 0.5 else {}}
    if rng.random() < 0.3:
        dest: dict[str, Any] = {}
        if rng.random() < 0.5:
            dest["host"] = f"host{rng.randint(1, 9)}"
            if rng.random() < 0.5:
                dest["node"] = dest["host"]
        if rng.random() < 0.4:
            dest["aggregates"] = rng.sample([f"{_uuid(rng)},{_uuid(rng)}", _uuid(rng)], rng.randint(1, 2))
        if rng.random() < 0.3:
            dest["forbidden_aggregates"] = [_uuid(rng) for _ in range(rng.randint(1, 2))]
        if rng.random() < 0.3:
            dest["cell"] = CELL
        case["requested_destination"] = dest
    if rng.random() < 0.3:
        case["request_level_params"] = {
            "root_required": rng.sample(["HW_CPU_X86_AVX", "COMPUTE_VOLUME_MULTI_ATTACH"], rng.randint(0, 2)),
            "root_forbidden": rng.sample(["COMPUTE_STATUS_DISABLED"], rng.randint(0, 1))}
    if rng.random() < 0.2 and not numa_image and not any(k.startswith(("hw:", "resources:PCPU")) for k in extra):
        case["network_metadata"] = {"physnets": ["physnet1"], "tunneled": rng.random() < 0.5}  # unread without NUMA
    numa = numa_image or {"hw:numa_nodes", "hw:cpu_policy", "hw:mem_page_size"} & set(extra)
    if numa and i % 3 == 1:  # NUMA affinity of networks (rng untouched)
        case["network_metadata"] = {"physnets": ["physnet1", "physnet2"][:1 + i % 2], "tunneled": i % 4 == 1}
    if rng.random() < 0.5:  # Nova's API sets it on nearly every boot: networks by id, or none/auto
        case["requested_networks"] = rng.choice([[{"network_id": _uuid(rng)}], [{"network_id": "none"}],
                                                 [{"network_id": "auto"}], []])
    if rng.random() < 0.15:  # translated since Gantt takes the ports' PCI requests
        case["port_pci_requests"] = _port_pci_requests(rng)
    if i % 5 == 2:  # translated since Gantt places request groups on child providers (its own rng: the rest stays)
        case["requested_resources"] = _outside_groups(random.Random(i))
    if i % 6 == 4:  # the flavor's PCI aliases, as Nova's API made them at boot (its own rng: the rest stays)
        case["boot_alias"] = _boot_alias(random.Random(i), case["flavor"]["extra_specs"])
    if rng.random() < 0.25:
        _make_unsupported(rng, case, rng.choice(UNSUPPORTED))
    elif rng.random() < 0.15:  # the manager asks Neutron about ports given by id (gantt.nova.prefilters)
        case["requested_networks"] = [{"port_id": _uuid(rng)}, {"network_id": _uuid(rng)}]
        case["ports_asked"] = True
    return case


# [pci] alias when the instances booted, and now: a1 names another device since, a2 is gone. A move asks for the
# devices the instance has (the RequestSpec's pci_requests, which Nova's PciPassthroughFilter reads), not today's.
BOOT_ALIASES = ['{"name": "a1", "vendor_id": "8086", "product_id": "1520"}',
                '{"name": "a2", "vendor_id": "10de", "product_id": "1db4", "device_type": "type-PF", '
                '"numa_policy": "preferred"}']
TODAYS_ALIASES = ['{"name": "a1", "vendor_id": "15b3", "product_id": "101e"}']


def _boot_alias(rng: random.Random, extra_specs: dict[str, str]) -> dict[str, Any]:
    extra_specs["pci_passthrough:alias"] = rng.choice(["a1:1", "a1:2,a2:1", "a2:1", "a1:0"])
    return {"entries": BOOT_ALIASES, "today": TODAYS_ALIASES}


def _outside_groups(rng: random.Random) -> list[dict[str, Any]]:
    """requested_resources as Nova's API makes them: a QoS port's bandwidth group (by port uuid, a physnet and vnic
    type trait), a Cyborg device profile's (device_profile_N, an FPGA and its trait), maybe in aggregates."""
    out: list[dict[str, Any]] = []
    for n in range(rng.randint(1, 2)):
        if rng.random() < 0.5:
            group: dict[str, Any] = {"requester_id": _uuid(rng),
                                     "resources": {"NET_BW_EGR_KILOBIT_PER_SEC": rng.choice([1000, 2000])},
                                     "required_traits": ["CUSTOM_PHYSNET_PHYSNET0", "CUSTOM_VNIC_TYPE_NORMAL"]}
        else:
            group = {"requester_id": f"device_profile_{n}", "resources": {"FPGA": rng.randint(1, 2)},
                     "required_traits": ["CUSTOM_FAKE_DEVICE"]}
        if rng.random() < 0.3:
            group["forbidden_traits"] = ["CUSTOM_BROKEN"]
        if rng.random() < 0.3:
            group["aggregates"] = [[_uuid(rng), _uuid(rng)]]
        out.append(group)
    return out


def _make_unsupported(rng: random.Random, case: dict[str, Any], kind: str) -> None:
    """Set one field Gantt cannot honour; ``expect`` is the field the refusal must name."""
    case["expect"] = {
        "same_subtree": "request_level_params.same_subtree", "requested_resources": "requested_resources",
        "cross_cell": "requested_destination.allow_cross_cell_move",
        "other_cell": "requested_destination.cell", "network_metadata": "network_metadata",
        "port_id": "requested_networks", "port_pci": None,
    }[kind]
    if kind == "same_subtree":
        case["request_level_params"] = {"same_subtree": [["_a", "_b"]]}
    elif kind == "requested_resources":
        # a group with no requester id (Nova's _add_request_group refuses it too): which group would it map?
        case["requested_resources"] = [{"requester_id": None, "resources": {"NET_BW_EGR_KILOBIT_PER_SEC": 1000}}]
    elif kind == "cross_cell":
        case.setdefault("requested_destination", {})["allow_cross_cell_move"] = True
    elif kind == "other_cell":
        case.setdefault("requested_destination", {})["cell"] = _uuid(rng)
    elif kind == "port_pci":
        case["port_pci_requests"] = _port_pci_requests(rng)
    elif kind == "port_id":
        case["requested_networks"] = [{"network_id": _uuid(rng)}, {"port_id": _uuid(rng)}]
    else:
        case["network_metadata"] = {"physnets": ["physnet1"], "tunneled": False}
        case["flavor"]["extra_specs"]["hw:numa_nodes"] = "1"
        for key in ("hw_numa_nodes", "hw_numa_cpus.0", "hw_numa_cpus.1", "hw_numa_mem.0", "hw_numa_mem.1"):
            (case["image"] or {}).get("properties", {}).pop(key, None)


def _node(rng: random.Random, n: int) -> dict[str, Any]:
    sel: dict[str, Any] = {"host": f"host{n}", "nodename": f"node{n}", "uuid": str(uuid.UUID(int=n + 1, version=4)),
                           "allocation": {"VCPU": rng.randint(1, 4), "MEMORY_MB": 512, "DISK_GB": rng.randint(0, 9)}}
    if rng.random() < 0.5:
        sel["availability_zone"] = "az1"
    if rng.random() < 0.3:
        sel["limits"] = {"numa_topology": {"cpu_allocation_ratio": 4.0, "ram_allocation_ratio": 1.5},
                         "VCPU": 64.0}
    if n % 3 == 0:  # a request group on a child provider of the node (rng untouched)
        device = str(uuid.UUID(int=1000 + n, version=4))
        sel["providers"] = {device: {"FPGA": 1}}
        sel["mappings"] = {"device_profile_0": [device]}
    elif n % 3 == 1:  # a flavor class only the node's child provider holds: the unnumbered group "" there too
        child = str(uuid.UUID(int=2000 + n, version=4))
        sel["providers"] = {child: {"CUSTOM_MAGIC": 1}}
        sel["mappings"] = {"": [child]}
    return sel


def generate_answer(rng: random.Random) -> dict[str, Any]:
    instances = rng.randint(1, 3)
    hosts = rng.sample(range(12), min(12, instances + rng.randint(0, 6)))
    answer = []
    for i in range(instances):
        alts = [h for h in hosts if h != hosts[i]]
        # Gantt's alternates may name a host another instance claimed: Nova never offers those
        answer.append([_node(rng, hosts[i]), *(_node(rng, h) for h in rng.sample(alts, min(len(alts), 4)))])
    cells = CELL if rng.random() < 0.7 else {f"host{h}": (CELL if h % 3 else str(uuid.UUID(int=99, version=4)))
                                              for h in range(12)}
    return {"answer": answer, "return_objects": rng.random() < 0.8, "return_alternates": rng.random() < 0.7,
            "max_attempts": rng.randint(1, 4), "cell_uuid": cells, "groups": rng.choice([[""], ["", "1"]])}


@cache
def _run() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    rng = random.Random(3304)
    specs = [generate_spec(rng, i) for i in range(N_SPECS)]
    answers = [generate_answer(rng) for _ in range(60)]
    result = run_json(python_or_skip(), HERE / "driver.py", {"src": str(SRC), "specs": specs, "answers": answers},
                      timeout=120)
    return specs, answers, result


def test_every_generated_spec_decodes_and_reads_as_nova_reads_it() -> None:
    specs, _, result = _run()
    translated = refused = 0
    for case, got in zip(specs, result["specs"], strict=True):
        if "expect" in case:
            continue
        assert "unsupported" not in got, (case, got)
        if "refused" in got:  # as Placement refuses the query Nova makes of it (Nova: no valid host)
            assert _placement_refuses(case["flavor"]["extra_specs"]), (case, got)
            refused += 1
            continue
        translated += 1
        for name, (gantt_reads, nova_reads) in got["pairs"].items():
            assert gantt_reads == nova_reads, (name, case, got["translated"])
    assert translated > N_SPECS // 2 and refused > 0, (translated, refused)


def _placement_refuses(extra_specs: dict[str, str]) -> bool:
    """Whether Placement 1.36 refuses the flavor's groups: several numbered groups without a group_policy, or a
    numbered group with traits and no resources (outside same_subtree, which a flavor cannot name)."""
    asked: dict[str, bool] = {}
    for key, value in extra_specs.items():
        prefix, _, _ = key.partition(":")
        for stem in ("resources", "trait"):
            if prefix.startswith(stem) and prefix != stem:
                suffix = prefix[len(stem):]
                asked[suffix] = asked.get(suffix, False) or (stem == "resources" and int(value) > 0)
    return not all(asked.values()) or (len(asked) > 1 and "group_policy" not in extra_specs)


def test_the_flavors_pci_requests_are_those_nova_made_at_boot_not_todays_alias() -> None:
    """Nova keeps the instance's PCI requests (RequestSpec.pci_requests, made by its API from [pci] alias at boot)
    and its PciPassthroughFilter reads those for a move, even after the operator changed [pci] alias: Gantt takes
    the same requests (the pairs above compare them with Nova's), never derives them again from today's aliases
    (a1 names another device today, a2 is gone; Gantt's Config here defines no alias at all)."""
    specs, _, result = _run()
    seen = 0
    for case, got in zip(specs, result["specs"], strict=True):
        if "boot_alias" not in case or "expect" in case:
            continue
        seen += 1
        wanted = [entry["alias"] for entry in got["translated"]["pci_requests"] if "alias" in entry]
        assert wanted == [part.split(":")[0] for part in case["flavor"]["extra_specs"]["pci_passthrough:alias"]
                          .split(",")], got["translated"]
        for entry in got["translated"]["pci_requests"]:
            if entry.get("alias") == "a1":
                assert entry["spec"] == [{"vendor_id": "8086", "product_id": "1520"}]  # as at boot
    assert seen >= 20


def test_a_port_given_by_id_is_translated_once_the_caller_asks_neutron_about_it() -> None:
    specs, _, result = _run()
    asked = [got for case, got in zip(specs, result["specs"], strict=True) if case.get("ports_asked")]
    assert len(asked) >= 10 and all("unsupported" not in got for got in asked)


def test_numa_guests_networks_and_dedicated_guests_fallback_are_translated() -> None:
    """network_metadata reaches what Nova's NUMATopologyFilter reads, and a dedicated guest asks Nova's VCPU
    fallback query too (the pairs compared above): both must be exercised, not only absent."""
    specs, _, result = _run()
    translated = [got for case, got in zip(specs, result["specs"], strict=True)
                  if "expect" not in case and "refused" not in got]
    assert sum(got["pairs"]["network_metadata"][0] is not None for got in translated) >= 10
    assert sum(got["pairs"]["pcpu_fallback"][0] is not None for got in translated) >= 10


def test_bfv_drops_the_root_disk_as_nova_does() -> None:
    specs, _, result = _run()
    seen = 0
    for case, got in zip(specs, result["specs"], strict=True):
        if "expect" in case or "refused" in got or not case["is_bfv"] \
                or "resources:DISK_GB" in case["flavor"]["extra_specs"]:
            continue
        flavor = case["flavor"]
        swap_gb = -(-flavor["swap"] // 1024)
        assert got["pairs"]["resources"][0].get("DISK_GB", 0) == flavor["ephemeral_gb"] + swap_gb
        seen += flavor["root_gb"] > 0
    assert seen >= 10


def test_unsupported_fields_are_refused_by_name() -> None:
    specs, _, result = _run()
    kinds = set()
    for case, got in zip(specs, result["specs"], strict=True):
        if "expect" not in case:
            continue
        assert got.get("unsupported") == case["expect"], (case, got)
        assert case["expect"] in got["message"]
        kinds.add(case["expect"])
    assert len(kinds) == len(UNSUPPORTED)


def test_selections_become_nova_selections() -> None:
    _, answers, result = _run()
    for case, got in zip(answers, result["answers"], strict=True):
        answer = case["answer"]
        cell = case["cell_uuid"]

        def cell_of(host: str, cell: Any = cell) -> str:
            return cell if isinstance(cell, str) else cell[host]

        chosen = {(c[0]["host"], c[0]["nodename"]) for c in answer}
        if not case["return_objects"]:
            # Nova's legacy shape: the chosen host of each instance, no alternates
            assert [set(d) for d in got["legacy"]] == [{"host", "nodename", "limits"}] * len(answer)
            assert [d["host"] for d in got["legacy"]] == [c[0]["host"] for c in answer]
            continue
        rows = got["objects"]
        assert len(rows) == len(answer)
        for choices, row in zip(answer, rows, strict=True):
            alternates = case["max_attempts"] - 1 if case["return_alternates"] else 0
            expected = [choices[0], *[s for s in choices[1:] if cell_of(s["host"]) == cell_of(choices[0]["host"])
                                       and (s["host"], s["nodename"]) not in chosen][:alternates]]
            assert [s["host"] for s in row] == [s["host"] for s in expected]
            for sel, want in zip(row, expected, strict=True):
                assert sel["compute_node_uuid"] == want["uuid"]
                assert sel["nodename"] == want["nodename"]
                assert sel["cell_uuid"] == cell_of(want["host"])
                assert sel["availability_zone"] == want.get("availability_zone", "nova")
                assert sel["allocation_request"] == {
                    "allocations": {want["uuid"]: {"resources": want["allocation"]},
                                    **{p: {"resources": r} for p, r in want.get("providers", {}).items()}},
                    "mappings": {**{g: [want["uuid"]] for g in case["groups"]},
                                 **{g: [*([want["uuid"]] if g in case["groups"] else []), *us]
                                    for g, us in want.get("mappings", {}).items()}}}
                assert sel["allocation_request_version"] == "1.36"
                numa = (want.get("limits") or {}).get("numa_topology")
                assert (sel["numa_limits"] or None) == (numa and {**numa}), sel


def test_a_rebuild_check_is_translated_with_what_nova_reads_for_it() -> None:
    """A rebuild (``_nova_check_type: ['rebuild']``, one instance) is Gantt's rebuild check, not a refusal; and the
    fields only Placement, the request filters and the PCI/NUMA filters read (none of which a rebuild runs in
    Nova) are not refused then: a server with a port given by id, an SR-IOV port or a QoS port can be rebuilt."""
    rng = random.Random(3305)
    kinds = ["port_id", "port_pci", "requested_resources", "network_metadata"]
    specs = []
    while len(specs) < 40:
        i = len(specs)
        case = generate_spec(rng, i)
        if "expect" in case:  # refused for a field a rebuild reads too
            continue
        case["num_instances"] = 1
        case["instance_uuids"] = case["instance_uuids"][:1]
        case.pop("rpc_instance_uuids", None)
        case["scheduler_hints"]["_nova_check_type"] = ["rebuild"]
        case["force_hosts"] = ["host1"]
        if i < len(kinds) * 5 and kinds[i % len(kinds)] == "requested_resources":
            case["requested_resources"] = _outside_groups(rng)  # a QoS port's, a device profile's: not read
        elif i < len(kinds) * 5:
            _make_unsupported(rng, case, kinds[i % len(kinds)])
            case.pop("expect")
        specs.append(case)
    result = run_json(python_or_skip(), HERE / "driver.py", {"src": str(SRC), "specs": specs, "answers": []},
                      timeout=120)
    for case, got in zip(specs, result["specs"], strict=True):
        assert "unsupported" not in got, (case, got)
        assert got["translated"]["scheduler_hints"]["_nova_check_type"] == ["rebuild"]
        hints = got["pairs"]["hints"]
        assert hints[0]["_nova_check_type"] == hints[1]["_nova_check_type"] == "rebuild"


def test_a_requested_cell_leaves_only_its_hosts_as_candidates() -> None:
    """Several cells (``cells``: each cell's hosts): a requested destination's cell ignores every host of the
    others, beside the hosts Nova's RequestSpec already ignores (a move's source); a cell Gantt does not read is
    refused by name, and so is a cross-cell move whatever the cell."""
    other = str(uuid.UUID(int=77, version=4))
    cells = {CELL: ["host1", "host2"], other: ["host3", "host4", "host5"]}
    rng = random.Random(3306)
    specs = []
    for i in range(24):
        case = generate_spec(rng, i)
        case.pop("expect", None)
        for key in ("request_level_params", "requested_resources", "port_pci_requests", "network_metadata",
                    "requested_networks"):
            case.pop(key, None)  # only the destination may be refused here
        case["cell_uuid"] = None
        case["cells"] = cells
        case["ignore_hosts"] = ["host1"] if i % 2 else []
        dest = {"cell": [other, CELL, _uuid(rng)][i % 3]}
        if i % 8 == 7:
            dest["allow_cross_cell_move"] = True
        case["requested_destination"] = dest
        specs.append(case)
    result = run_json(python_or_skip(), HERE / "driver.py", {"src": str(SRC), "specs": specs, "answers": []},
                      timeout=120)
    for case, got in zip(specs, result["specs"], strict=True):
        dest = case["requested_destination"]
        if dest.get("allow_cross_cell_move"):
            assert got.get("unsupported") == "requested_destination.allow_cross_cell_move", got
        elif dest["cell"] not in cells:
            assert got.get("unsupported") == "requested_destination.cell", got
            assert dest["cell"] in got["message"]
        else:
            assert "unsupported" not in got, (case, got)
            others = sorted(h for c, hosts in cells.items() if c != dest["cell"] for h in hosts)
            assert got["translated"].get("ignore_hosts") == case["ignore_hosts"] + others
