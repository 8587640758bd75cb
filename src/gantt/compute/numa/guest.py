"""The guest NUMA topology a request asks for, as Nova decides it (``numa_get_constraints`` in
``nova/virt/hardware.py``): the guest's cells from ``hw:numa_nodes``, ``hw:numa_cpus.N`` / ``hw:numa_mem.N``, the
CPU policy (``shared``, ``dedicated``, ``mixed`` with ``hw:cpu_dedicated_mask`` or a realtime mask), the thread
policy, the page size and the emulator-threads policy, with the image properties that may set or must not
contradict them. None when the request asks for no NUMA topology; a request Nova's API would refuse (or that asks
for something Gantt does not model yet) raises InvalidRequest naming the key.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from gantt.model import InvalidRequest, RequestSpec

MEMPAGES_SMALL = -1
MEMPAGES_LARGE = -2
MEMPAGES_ANY = -3
SHARED, DEDICATED, MIXED = "shared", "dedicated", "mixed"
CPU_POLICIES = (DEDICATED, SHARED, MIXED)
PREFER, ISOLATE, REQUIRE = "prefer", "isolate", "require"
THREAD_POLICIES = (PREFER, ISOLATE, REQUIRE)
EMULATOR_POLICIES = ("share", "isolate")
NUMA_NODES_MAX = 128
MAX_CPU_RANGE = 65_536  # one range in a CPU list spans at most this many CPUs

# Extra specs and image properties that would shape the guest's NUMA topology in Nova but that Gantt does not
# model yet: refused, so that no request lands on a host that cannot honour it.
_NOT_MODELED_SPECS = {
    "hw:pmem": "virtual persistent memory (vPMEM) is not modeled",
    "hw:mem_encryption": "memory encryption (SEV/TDX) is not modeled",
    "hw:mem_encryption_model": "memory encryption (SEV/TDX) is not modeled",
}
_NOT_MODELED_PROPS = {
    "hw_mem_encryption": "memory encryption (SEV/TDX) is not modeled",
    "hw_mem_encryption_model": "memory encryption (SEV/TDX) is not modeled",
    "hw_numa_cpus": "give the guest CPUs per node as hw_numa_cpus.0, hw_numa_cpus.1, …",
    "hw_numa_mem": "give the guest memory per node as hw_numa_mem.0, hw_numa_mem.1, …",
}
_TRUE = ("1", "t", "true", "on", "y", "yes")
_BYTES = re.compile(r"(^[-+]?\d*\.?\d+)([KMGTPEZYRQ]i?)?(b|bit|B)$")
_PREFIX_EXPONENT = {p: i + 1 for i, p in enumerate("KMGTPEZYRQ")}

@dataclass(frozen=True, slots=True)
class GuestCell:
    """One guest NUMA cell: its shared vCPUs, its dedicated ones, memory (MiB) and the page size asked for."""

    id: int
    cpuset: frozenset[int]
    pcpuset: frozenset[int]
    memory: int
    pagesize: float | None  # a size in KiB, or MEMPAGES_*; None: no page size asked for


@dataclass(frozen=True, slots=True)
class GuestTopology:
    cells: tuple[GuestCell, ...]
    cpu_policy: str | None
    cpu_thread_policy: str | None
    emulator_threads_policy: str | None
    # What Nova's scheduler asks Placement for the hw: policies (``_translate_pinning_policies``): VCPU/PCPU
    # amounts replacing the flavor's VCPU, and HW_CPU_HYPERTHREADING required or forbidden.
    resources: tuple[tuple[str, int], ...] = ()
    hyperthreading: str | None = None

    @property
    def emulator_threads_isolated(self) -> bool:
        return self.emulator_threads_policy == "isolate"

    @property
    def pinned(self) -> bool:
        return self.cpu_policy in (DEDICATED, MIXED)

    @property
    def cpu_pinning_requested(self) -> bool:
        """Nova's ``ResourceRequest.cpu_pinning_requested``: a ``dedicated`` hw:cpu_policy (or hw_cpu_policy)
        translated to PCPU, not one implied by ``resources:PCPU`` nor a mixed policy."""
        return self.cpu_policy == DEDICATED and any(rc == "PCPU" for rc, _ in self.resources)


def _bad(message: str, where: str) -> InvalidRequest:
    return InvalidRequest(message, field=where)


def parse_cpu_spec(spec: str, where: str) -> set[int]:
    """A CPU list such as ``0-3,^2,8``: ranges, single CPUs, and exclusions (``^``) of either."""
    wanted: set[int] = set()
    unwanted: set[int] = set()
    for rule in spec.split(","):
        rule = rule.strip()
        if not rule:
            continue
        parts = rule.split("-", 1)
        try:
            if len(parts) > 1:
                exclude = parts[0].startswith("^")
                start, end = int((parts[0][1:] if exclude else parts[0]).strip()), int(parts[1].strip())
                if start > end or end - start > MAX_CPU_RANGE:
                    raise ValueError
                (unwanted if exclude else wanted).update(range(start, end + 1))
            elif rule.startswith("^"):
                unwanted.add(int(rule[1:].strip()))
            else:
                wanted.add(int(rule))
        except ValueError:
            raise _bad(f"{spec!r} is not a CPU list (such as 0-3,^2,8): bad part {rule!r}", where) from None
    return wanted - unwanted


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in _TRUE


def _page_size(value: str, where: str) -> float:
    if value == "any":
        return MEMPAGES_ANY
    if value == "large":
        return MEMPAGES_LARGE
    if value == "small":
        return MEMPAGES_SMALL
    if value.isdigit():
        return int(value)
    match = _BYTES.match(value)
    if match is None:
        raise _bad(f"{value!r} is not a page size: small, large, any, a size in KiB, or a size such as 2MB or "
                   "1GiB", where)
    magnitude = float(match.group(1))
    if match.group(3) in ("b", "bit"):
        magnitude /= 8
    if match.group(2):
        magnitude *= 1024 ** _PREFIX_EXPONENT[match.group(2)[0]]
    return math.ceil(magnitude) / 1024


class _Sources:
    """The flavor's extra specs and the image's properties, read with Nova's names (``hw:x`` / ``hw_x``)."""

    def __init__(self, spec: RequestSpec) -> None:
        flavor = spec.flavor
        self.specs: dict[str, str] = dict(flavor.extra_specs) if flavor is not None else {}
        self.props: dict[str, Any] = dict(spec.image.properties) if spec.image is not None else {}
        self.vcpus = flavor.vcpus if flavor is not None else 0
        self.memory_mb = flavor.memory_mb if flavor is not None else 0

    def both(self, key: str) -> tuple[Any, Any]:
        return self.specs.get(f"hw:{key}"), self.props.get(f"hw_{key}")

    def choice(self, key: str, allowed: tuple[str, ...]) -> tuple[str | None, str | None]:
        """``both(key)``, refusing a value outside ``allowed`` from either side, named where it was written."""
        flavor, image = self.both(key)
        if flavor and flavor not in allowed:
            raise _bad(f"hw:{key} must be one of {', '.join(allowed)}, not {flavor!r}", self.spec_where(f"hw:{key}"))
        if image and image not in allowed:
            raise _bad(f"hw_{key} must be one of {', '.join(allowed)}, not {image!r}", self.prop_where(f"hw_{key}"))
        # what is left of the image's value is one of ``allowed``, or nothing (a falsy JSON value)
        return flavor, image if isinstance(image, str) else None

    @staticmethod
    def spec_where(key: str) -> str:
        return f"$.flavor.extra_specs.{key}"

    @staticmethod
    def prop_where(key: str) -> str:
        return f"$.image.properties.{key}"


def _cpu_policy(src: _Sources) -> str | None:
    flavor, image = src.choice("cpu_policy", CPU_POLICIES)
    conflict = _bad("the image's hw_cpu_policy asks for more pinning than the flavor's hw:cpu_policy allows",
                    src.prop_where("hw_cpu_policy"))
    if flavor == DEDICATED:
        return flavor
    if flavor == MIXED:
        if image == DEDICATED:
            raise conflict
        return flavor
    if flavor == SHARED:
        if image in (MIXED, DEDICATED):
            raise conflict
        return flavor
    return image if image in CPU_POLICIES else None


def _thread_policy(src: _Sources) -> str | None:
    flavor, image = src.choice("cpu_thread_policy", THREAD_POLICIES)
    if flavor in (None, PREFER):
        return flavor or image
    if image and image != flavor:
        raise _bad("the image's hw_cpu_thread_policy conflicts with the flavor's hw:cpu_thread_policy",
                   src.prop_where("hw_cpu_thread_policy"))
    return flavor


def _emulator_policy(src: _Sources) -> str | None:
    policy = src.specs.get("hw:emulator_threads_policy")
    if not policy:
        return None
    if policy not in EMULATOR_POLICIES:
        raise _bad(f"hw:emulator_threads_policy must be share or isolate, not {policy!r}",
                   src.spec_where("hw:emulator_threads_policy"))
    return policy


def _cpu_mask(mask: str, vcpus: int, where: str) -> set[int]:
    return parse_cpu_spec(f"0-{vcpus - 1},{mask}" if mask.strip().startswith("^") else mask, where)


def _realtime_cpus(src: _Sources, emulator: str | None) -> set[int] | None:
    if not _bool(src.specs.get("hw:cpu_realtime", "")):
        return None
    flavor_mask, image_mask = src.both("cpu_realtime_mask")
    mask = image_mask or flavor_mask
    where = src.prop_where("hw_cpu_realtime_mask") if image_mask else src.spec_where("hw:cpu_realtime_mask")
    every = set(range(src.vcpus))
    realtime = _cpu_mask(str(mask), src.vcpus, where) if mask else set(every)
    if not realtime or (realtime == every and not emulator):
        raise _bad("hw:cpu_realtime needs a realtime mask that leaves at least one vCPU out (or an emulator "
                   "threads policy)", where)
    if not realtime <= every:
        raise _bad("the realtime mask names vCPUs the flavor does not have", where)
    return realtime


def _dedicated_mask(src: _Sources) -> set[int] | None:
    mask = src.specs.get("hw:cpu_dedicated_mask")
    if not mask:
        return None
    where = src.spec_where("hw:cpu_dedicated_mask")
    dedicated = _cpu_mask(mask, src.vcpus, where)
    every = set(range(src.vcpus))
    if not dedicated or not every - dedicated or not dedicated <= every:
        raise _bad("hw:cpu_dedicated_mask must name some but not all of the flavor's vCPUs, and no others", where)
    return dedicated


_VCPU_KEY = re.compile(r"resources([1-9][0-9]*)?:VCPU")
_PCPU_KEY = re.compile(r"resources([1-9][0-9]*)?:PCPU")
_HT_TRAIT = re.compile(r"trait([1-9][0-9]*)?:HW_CPU_HYPERTHREADING")


def _vcpu_pcpu_resources(src: _Sources) -> tuple[int, int]:
    vcpu = pcpu = 0
    for key, value in src.specs.items():
        for pattern, is_pcpu in ((_VCPU_KEY, False), (_PCPU_KEY, True)):
            if pattern.match(key):
                try:
                    amount = int(value)
                except ValueError:
                    continue  # the resource derivation refuses it, naming the key
                if is_pcpu:
                    pcpu += amount
                else:
                    vcpu += amount
    return vcpu, pcpu


def _hyperthreading_trait(src: _Sources) -> str | None:
    for key, value in src.specs.items():
        if _HT_TRAIT.match(key):
            return value
    if src.props.get("trait:HW_CPU_HYPERTHREADING") == "required":
        return "required"
    return None


def _node_count(src: _Sources) -> int | None:
    flavor, image = src.both("numa_nodes")
    if flavor and image:
        raise _bad("hw_numa_nodes may not be set by the image when the flavor sets hw:numa_nodes",
                   src.prop_where("hw_numa_nodes"))
    nodes = flavor or image
    where = src.spec_where("hw:numa_nodes") if flavor else src.prop_where("hw_numa_nodes")
    if nodes is None:
        return None
    try:
        count = int(nodes)
        if str(count) != str(nodes).strip() and not isinstance(nodes, int):
            raise ValueError
    except (TypeError, ValueError):
        raise _bad(f"the number of NUMA nodes must be an integer >= 1, not {nodes!r}", where) from None
    if count < 1 or count > NUMA_NODES_MAX:
        raise _bad(f"the number of NUMA nodes must be between 1 and {NUMA_NODES_MAX}, not {nodes!r}", where)
    return count


def _page_constraint(src: _Sources) -> float | None:
    flavor, image = src.both("mem_page_size")
    if not flavor and image:
        raise _bad("the image's hw_mem_page_size needs the flavor to allow it (hw:mem_page_size any or large)",
                   src.prop_where("hw_mem_page_size"))
    if not flavor:
        return None
    size = _page_size(str(flavor), src.spec_where("hw:mem_page_size"))
    if image and size in (MEMPAGES_ANY, MEMPAGES_LARGE):
        return _page_size(str(image), src.prop_where("hw_mem_page_size"))
    if image:
        raise _bad("the image's hw_mem_page_size needs the flavor to allow it (hw:mem_page_size any or large)",
                   src.prop_where("hw_mem_page_size"))
    return size


def _locked_memory(src: _Sources) -> None:
    flavor, image = src.both("locked_memory")
    if flavor is not None:
        locked = _bool(flavor)
        if image is not None and _bool(image) != locked:
            raise _bad("the image's hw_locked_memory conflicts with the flavor's hw:locked_memory",
                       src.prop_where("hw_locked_memory"))
    else:
        locked = _bool(image) if image is not None else False
    if locked and not any(src.both("mem_page_size")):
        raise _bad("locked memory needs a page size (hw:mem_page_size)",
                   src.spec_where("hw:locked_memory") if flavor is not None else src.prop_where("hw_locked_memory"))


def _per_node(src: _Sources, key: str, nodes_from: str) -> list[str] | None:
    """``hw:numa_cpus.0``, ``hw:numa_cpus.1``, … (or the image's ``hw_numa_cpus.N``) up to the first gap."""
    source = src.specs if nodes_from == "flavor" else src.props
    sep = ":" if nodes_from == "flavor" else "_"
    values = []
    for i in range(NUMA_NODES_MAX):
        name = f"hw{sep}{key}.{i}"
        if name not in source:
            break
        values.append(str(source[name]))
    return values or None


def _mappings(src: _Sources, key: str) -> tuple[list[str] | None, str]:
    flavor = _per_node(src, key, "flavor")
    image = _per_node(src, key, "image")
    if flavor is None:
        return image, src.prop_where(f"hw_{key}.0")
    if image is not None:
        raise _bad(f"hw_{key}.N may not be set by the image when the flavor sets hw:{key}.N",
                   src.prop_where(f"hw_{key}.0"))
    return flavor, src.spec_where(f"hw:{key}.0")


def instance_topology(spec: RequestSpec) -> GuestTopology | None:
    """The guest NUMA topology the request asks for (Nova's ``numa_get_constraints``), or None."""
    src = _Sources(spec)
    if not any(k.startswith(("hw:", "resources", "trait")) for k in src.specs) \
            and not any(k.startswith(("hw_", "trait:")) for k in src.props):
        return None  # the common case: nothing that could shape a guest topology, so none (and nothing to refuse)
    for key, why in _NOT_MODELED_SPECS.items():
        if key in src.specs:
            raise _bad(f"{key} cannot be honoured yet: {why}", src.spec_where(key))
    for key, why in _NOT_MODELED_PROPS.items():
        if key in src.props:
            raise _bad(f"{key} cannot be honoured yet: {why}", src.prop_where(key))
    cpu_policy = _cpu_policy(src)
    thread_policy = _thread_policy(src)
    emulator = _emulator_policy(src)
    realtime = _realtime_cpus(src, emulator)
    dedicated = _dedicated_mask(src)
    translated = _translated(src, cpu_policy, emulator, dedicated, realtime)
    hyperthreading = {ISOLATE: "forbidden", REQUIRE: "required"}.get(thread_policy or "")
    vcpu_res, pcpu_res = _vcpu_pcpu_resources(src)
    if cpu_policy and (vcpu_res or pcpu_res):
        raise _bad("resources:VCPU / resources:PCPU cannot be combined with hw:cpu_policy (or hw_cpu_policy)",
                   src.spec_where("hw:cpu_policy"))
    if vcpu_res and pcpu_res:
        raise _bad("resources:VCPU and resources:PCPU cannot both be given", src.spec_where("resources:PCPU"))
    if pcpu_res:
        wanted = src.vcpus + 1 if emulator == "isolate" else src.vcpus
        if pcpu_res != wanted:
            raise _bad(f"resources:PCPU must be exactly {wanted} (the flavor's vCPUs"
                       f"{' + 1 for the isolated emulator threads' if emulator == 'isolate' else ''})",
                       src.spec_where("resources:PCPU"))
        cpu_policy = DEDICATED
    if vcpu_res:
        cpu_policy = SHARED
    trait = _hyperthreading_trait(src)
    if thread_policy and trait:
        raise _bad("trait:HW_CPU_HYPERTHREADING cannot be combined with hw:cpu_thread_policy",
                   src.spec_where("hw:cpu_thread_policy"))
    if trait == "forbidden":
        thread_policy = ISOLATE
    elif trait == "required":
        thread_policy = REQUIRE
    if cpu_policy in (SHARED, None):
        if thread_policy:
            raise _bad("a CPU thread policy needs hw:cpu_policy dedicated or mixed",
                       src.spec_where("hw:cpu_thread_policy"))
        if emulator == "isolate":
            raise _bad("hw:emulator_threads_policy isolate needs hw:cpu_policy dedicated or mixed",
                       src.spec_where("hw:emulator_threads_policy"))
        if dedicated:
            raise _bad("hw:cpu_dedicated_mask needs hw:cpu_policy mixed", src.spec_where("hw:cpu_dedicated_mask"))
        if realtime:
            raise _bad("hw:cpu_realtime needs hw:cpu_policy dedicated or mixed", src.spec_where("hw:cpu_realtime"))
    elif cpu_policy == DEDICATED:
        if dedicated:
            raise _bad("hw:cpu_dedicated_mask needs hw:cpu_policy mixed", src.spec_where("hw:cpu_dedicated_mask"))
    else:
        if bool(realtime) == bool(dedicated):
            raise _bad("hw:cpu_policy mixed needs exactly one of hw:cpu_dedicated_mask and a realtime mask",
                       src.spec_where("hw:cpu_dedicated_mask"))
        dedicated = dedicated or realtime
    nodes = _node_count(src)
    pagesize = _page_constraint(src)
    _locked_memory(src)
    pcpus = set(range(src.vcpus)) if cpu_policy == DEDICATED else set(dedicated or ())
    if not (nodes or pagesize or cpu_policy in (DEDICATED, MIXED)):
        return None
    vcpus = set(range(src.vcpus)) - pcpus
    cells = _cells(src, nodes or 1, vcpus, pcpus, pagesize)
    return GuestTopology(cells=cells, cpu_policy=cpu_policy, cpu_thread_policy=thread_policy,
                         emulator_threads_policy=emulator, resources=translated, hyperthreading=hyperthreading)


def _cells(src: _Sources, nodes: int, vcpus: set[int], pcpus: set[int],
           pagesize: float | None) -> tuple[GuestCell, ...]:
    """The guest's cells: vCPUs and memory split evenly over ``nodes``, or as hw:numa_cpus.N / hw:numa_mem.N say."""
    cpu_list, cpu_where = _mappings(src, "numa_cpus")
    mem_list, mem_where = _mappings(src, "numa_mem")
    if cpu_list is None and mem_list is None:
        return _auto_cells(src, nodes, vcpus, pcpus, pagesize)
    if cpu_list is not None and mem_list is not None:
        if len(cpu_list) != nodes or len(mem_list) != nodes:
            raise _bad(f"hw:numa_cpus.N and hw:numa_mem.N must be given for each of the {nodes} NUMA nodes",
                       cpu_where if len(cpu_list) != nodes else mem_where)
        return _manual_cells(src, vcpus, pcpus, pagesize, cpu_list, cpu_where, mem_list, mem_where)
    raise _bad("hw:numa_cpus.N and hw:numa_mem.N must be given together",
               cpu_where if cpu_list is not None else mem_where)


def _translated(src: _Sources, policy: str | None, emulator: str | None, dedicated: set[int] | None,
                realtime: set[int] | None) -> tuple[tuple[str, int], ...]:
    if policy == DEDICATED:
        pcpus, vcpus = src.vcpus, 0
    elif policy == MIXED:
        pcpus = len(dedicated or realtime or ())
        vcpus = src.vcpus - pcpus
    else:
        return ()
    if emulator == "isolate":
        pcpus += 1
    return tuple((rc, amount) for rc, amount in (("VCPU", vcpus), ("PCPU", pcpus)) if amount)


def _auto_cells(src: _Sources, nodes: int, vcpus: set[int], pcpus: set[int],
                pagesize: float | None) -> tuple[GuestCell, ...]:
    if src.vcpus % nodes or src.memory_mb % nodes:
        raise _bad(f"the flavor's vCPUs ({src.vcpus}) and memory ({src.memory_mb} MiB) must divide evenly over "
                   f"{nodes} NUMA nodes, or give hw:numa_cpus.N and hw:numa_mem.N", src.spec_where("hw:numa_nodes"))
    per_cpu, per_mem = src.vcpus // nodes, src.memory_mb // nodes
    cells = []
    for node in range(nodes):
        cpus = set(range(node * per_cpu, (node + 1) * per_cpu))
        cells.append(GuestCell(node, frozenset(cpus & vcpus), frozenset(cpus & pcpus), per_mem, pagesize))
    return tuple(cells)


def _manual_cells(src: _Sources, vcpus: set[int], pcpus: set[int], pagesize: float | None, cpu_list: list[str],
                  cpu_where: str, mem_list: list[str], mem_where: str) -> tuple[GuestCell, ...]:
    unassigned = set(range(src.vcpus))
    cells = []
    total = 0
    for node, (cpu_text, mem_text) in enumerate(zip(cpu_list, mem_list, strict=True)):
        cpus = parse_cpu_spec(cpu_text, cpu_where.replace(".0", f".{node}"))
        try:
            mem = int(mem_text)
        except ValueError:
            raise _bad(f"{mem_text!r} is not a memory size in MiB", mem_where.replace(".0", f".{node}")) from None
        for cpu in sorted(cpus):
            if cpu > src.vcpus - 1:
                raise _bad(f"vCPU {cpu} is beyond the flavor's {src.vcpus} vCPUs",
                           cpu_where.replace(".0", f".{node}"))
            if cpu not in unassigned:
                raise _bad(f"vCPU {cpu} is given to two NUMA nodes", cpu_where.replace(".0", f".{node}"))
            unassigned.discard(cpu)
        cells.append(GuestCell(node, frozenset(cpus & vcpus), frozenset(cpus & pcpus), mem, pagesize))
        total += mem
    if unassigned:
        raise _bad(f"vCPUs {sorted(unassigned)} are given to no NUMA node", cpu_where)
    if total != src.memory_mb:
        raise _bad(f"the NUMA nodes' memory adds up to {total} MiB, not the flavor's {src.memory_mb}", mem_where)
    return tuple(cells)
