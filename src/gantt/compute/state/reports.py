"""How a host report lands in the columns: a full replacement of what it names, nothing else.

What a report says about instances and allocations (confirming claims, expiring them) is the instance index's and
the ledger's; the table calls them after ``apply_stats``.
"""

from __future__ import annotations

import itertools
import operator
import socket
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np

from gantt.compute.numa import HostNUMA
from gantt.compute.pci import freeze_pools
from gantt.compute.state.columns import Columns, HostCaps
from gantt.model import HostStats

# Nova's initial_*_allocation_ratio defaults: used when a host reports none (configurable: [DEFAULT]).
DEFAULT_RATIOS = {"VCPU": 4.0, "MEMORY_MB": 1.0, "DISK_GB": 1.0}
CLASSIC = (("VCPU", "vcpus", "vcpus_used", "cpu_allocation_ratio"),
           ("MEMORY_MB", "memory_mb", "memory_mb_used", "ram_allocation_ratio"),
           ("DISK_GB", "local_gb", "local_gb_used", "disk_allocation_ratio"))
_COUNTS = ("num_io_ops", "num_instances", "running_vms", "current_workload", "failed_builds")
_COUNTS_OF = operator.attrgetter(*_COUNTS)


def apply_stats(columns: Columns, row: int, stats: HostStats, default_ratios: dict[str, float], *,
                whole: bool = False, placed: bool = False) -> bool:
    """Write what ``stats`` names into ``row``. Returns whether something a static filter can see changed (a
    service enabled or disabled, capabilities, traits, an inventory's shape).

    ``whole``: ``stats`` is a node's whole stored record (a store's), so a class it no longer has an inventory
    for is gone (Placement deletes inventories; a report alone never does). ``placed``: Placement set the node's
    inventories, which are then all it offers (``Provider.inventories_set``)."""
    cols = columns.cols
    if stats.uuid is not None:
        columns.node_uuids[row] = stats.uuid
    if stats.hypervisor_hostname is not None:
        columns.hypervisor_hostnames[row] = stats.hypervisor_hostname
    if stats.host_ip is not None and stats.host_ip != columns.host_ips[row]:
        columns.host_ips[row] = stats.host_ip
        cols["host_ip4"][row] = _ipv4_int(stats.host_ip)
    for name, value in zip(_COUNTS, _COUNTS_OF(stats), strict=True):
        if value is not None:
            cols[name][row] = value
    if stats.num_instances is None and stats.instances is not None:
        cols["num_instances"][row] = len(stats.instances)
    if stats.disk_available_least is not None:
        cols["disk_available_least"][row] = stats.disk_available_least
    static = False
    service = stats.service
    # Enabling or disabling a service is rare: filters may cache on it (ComputeFilter does).
    if service is not None and (cols["disabled"][row] != service.disabled
                                or cols["forced_down"][row] != service.forced_down):
        static = True
        cols["disabled"][row] = service.disabled
        cols["forced_down"][row] = service.forced_down
    static |= _update_caps(columns, row, stats)
    if stats.traits is not None:
        code = columns.traitsets.code(frozenset(stats.traits))
        if code != cols["traits_code"][row]:
            cols["traits_code"][row] = code
            static = True
    if stats.metrics is not None:
        _update_metrics(columns, row, stats)
    topology = stats.numa_topology
    if topology is not None or whole:
        assert not isinstance(topology, str), "HostStats.__post_init__ decodes a stored topology's JSON text"
        columns.set_numa(row, HostNUMA.of(topology))
    static |= _update_inventories(columns, row, stats, default_ratios, whole, placed)
    pools = stats.pci_stats
    if pools is not None:
        assert isinstance(pools, list), "HostStats.__post_init__ turns every form of pci_stats into the plain list"
        _update_pci(columns, row, pools)
    return static


def _update_pci(columns: Columns, row: int, pools: list[dict[str, Any]]) -> None:
    # Not static: pool counts move as devices are taken (no cached mask may depend on them).
    columns.set_pci_reported(row, freeze_pools(pools))


def _update_caps(columns: Columns, row: int, stats: HostStats) -> bool:
    hv_type, version, cpu_info = stats.hypervisor_type, stats.hypervisor_version, stats.cpu_info
    supported, host_stats = stats.supported_instances, stats.stats
    if hv_type is None and version is None and cpu_info is None and supported is None and host_stats is None:
        return False
    old = columns.node_caps(row)
    if version is not None:
        columns.cols["hypervisor_version"][row] = version
    # Every report names the same capabilities again: the fields it leaves out are the old ones, so the new value
    # is built directly, and interned by its encoding (the key tells 1 from 1.0, as ComputeCapabilitiesFilter does).
    new = HostCaps(hypervisor_type=old.hypervisor_type if hv_type is None else hv_type,
                   cpu_info=old.cpu_info if cpu_info is None else cpu_info,
                   supported_instances=old.supported_instances if supported is None
                   else tuple(map(tuple, supported)),
                   stats=old.stats if host_stats is None else host_stats,
                   hypervisor_version=old.hypervisor_version if version is None else version)
    code = columns.caps.code(new)
    caps_code = columns.cols["caps_code"]
    if code == caps_code[row]:
        return False
    caps_code[row] = code
    return True


def _update_metrics(columns: Columns, row: int, stats: HostStats) -> None:
    seen = set()
    for metric in stats.metrics or ():
        columns.metric_column(metric.name)[row] = _metric_value(metric.name, metric.value)
        seen.add(metric.name)
    for name, arr in columns.metrics.items():
        if name not in seen:
            arr[row] = float("nan")


def _update_inventories(columns: Columns, row: int, stats: HostStats, default_ratios: dict[str, float],
                        whole: bool, placed: bool = False) -> bool:
    """Returns True when a static attribute (the set of classes, a min/max/step) changed."""
    static = False
    given = stats.inventories or {}
    # An ironic node is one bare-metal machine, offered whole as one custom resource class (Nova's ironic driver
    # reports 0 VCPU, RAM and disk, whatever the node's properties say): the classic fields are not capacity.
    # (the report's own type first: a bulk load writes the caps after the inventories, a single report before)
    kind = stats.hypervisor_type if stats.hypervisor_type is not None else columns.node_caps(row).hypervisor_type
    ironic = (kind or "").lower() == "ironic"
    # no capacity from the classic fields: an ironic node's, or any node's once Placement set its inventories
    classic_off = ironic or placed
    if placed:
        # Placement's usage is its allocations, every one of them in this store, counted for as long as held. The
        # node's own *_used figures count the same instances again (for claim_timeout, as unlisted claims) and
        # the reserved amount its inventory already holds back: Nova's Placement reads neither.
        columns.reports_usage[row] = False
    for rc, total_f, used_f, ratio_f in CLASSIC:
        if rc in given or classic_off:
            continue
        total = getattr(stats, total_f)
        j = columns.rc_index[rc]
        used = getattr(stats, used_f)
        ratio = getattr(stats, ratio_f)
        if total is None:
            # Only the usage or ratio moved: keep the inventory, update what was named.
            if columns.has_inventory[row, j]:
                if used is not None:
                    columns.rc["reported"][row, j] = used
                    columns.reports_usage[row] = True
                if ratio is not None:
                    if columns.rc["ratio"][row, j] != ratio:
                        static = True
                    columns.rc["ratio"][row, j] = ratio
            continue
        if ratio is None:
            ratio = columns.rc["ratio"][row, j] if columns.has_inventory[row, j] else default_ratios[rc]
        # HostStats has validated these figures (an Inventory built of them would only check them again).
        static |= _write_inventory(columns, row, j, total, 0, 1, total, 1, float(ratio), used)
    for rc, inv in given.items():
        used = inv.used
        if used is None and rc in _CLASSIC_USED and not placed:
            used = getattr(stats, _CLASSIC_USED[rc])
        if ironic and stats.instances:
            used = max(used or 0, inv.total)  # taken: all of it (Nova's driver reserves a node with an instance)
        j = columns.rc_slot(rc)
        max_unit = inv.max_unit if inv.max_unit is not None else inv.total
        static |= _write_inventory(columns, row, j, inv.total, inv.reserved, inv.min_unit, max_unit, inv.step_size,
                                   inv.allocation_ratio, used)
    if whole:
        static |= _drop_inventories(columns, row, set(given) | (set() if classic_off else _classic_kept(stats)))
    elif ironic:  # a node that became ironic: what its classic fields made before is no capacity
        static |= _drop_inventories(columns, row, set(columns.rc_index) - ({rc for rc, *_ in CLASSIC} - set(given)))
    if classic_off:
        # Nova's HostState still shows the node's allocation ratios (ComputeCapabilitiesFilter, JsonFilter read
        # them): kept beside no inventory, where a ratio is otherwise 0.
        for rc, _, _, ratio_f in CLASSIC:
            ratio = getattr(stats, ratio_f)
            if rc not in given and ratio is not None:
                columns.rc["ratio"][row, columns.rc_index[rc]] = ratio
    return static


_CLASSIC_USED = {rc: used_f for rc, _, used_f, _ in CLASSIC}


def _write_inventory(columns: Columns, row: int, j: int, total: int, reserved: int, min_unit: int, max_unit: int,
                     step_size: int, ratio: float, used: int | None) -> bool:
    """One class's inventory into ``row``; True when its shape changed (static)."""
    rc_arrays = columns.rc  # after rc_slot: a new class may have swapped in wider arrays
    # Shape of an inventory (not its usage) changes rarely; caches may depend on it (unit bounds, the
    # aggregate-ratio capacities), so a change moves static_revision. Read as Python numbers (``item``): every
    # report compares all six, and numpy scalars cost twice as much to fetch and compare. (Counts are below 2**53,
    # so an int compares with its stored float exactly as numpy would.)
    static = not (columns.has_inventory[row, j] and rc_arrays["total"].item(row, j) == total
                  and rc_arrays["reserved"].item(row, j) == reserved
                  and rc_arrays["min_unit"].item(row, j) == min_unit
                  and rc_arrays["max_unit"].item(row, j) == max_unit
                  and rc_arrays["step_size"].item(row, j) == step_size
                  and rc_arrays["ratio"].item(row, j) == ratio)
    if static:
        columns.has_inventory[row, j] = True
        rc_arrays["total"][row, j] = total
        rc_arrays["reserved"][row, j] = reserved
        rc_arrays["min_unit"][row, j] = min_unit
        rc_arrays["max_unit"][row, j] = max_unit
        rc_arrays["step_size"][row, j] = step_size
        rc_arrays["ratio"][row, j] = ratio
    rc_arrays["reported"][row, j] = used or 0
    if used is not None:
        columns.reports_usage[row] = True
    return static


def _classic_kept(stats: HostStats) -> set[str]:
    return {rc for rc, total_f, _, _ in CLASSIC if getattr(stats, total_f) is not None}


def _drop_inventories(columns: Columns, row: int, kept: set[str]) -> bool:
    """Clear the inventories of ``row`` that ``kept`` does not name (what is in flight there stays counted)."""
    dropped = False
    for rc, j in columns.rc_index.items():
        if rc in kept or not columns.has_inventory[row, j]:
            continue
        columns.has_inventory[row, j] = False
        for name, arr in columns.rc.items():
            if name != "inflight":
                arr[row, j] = 0.0
        dropped = True
    return dropped


# Nova keeps these as hundredths in an integer field: its scheduler reads a compute node's metrics JSON, scales
# these names by 100 and truncates every value to an integer (nova.objects.monitor_metric), and its
# MetricsWeigher weighs those integers. Gantt stores what Nova's weigher would see.
_PERCENT_METRICS = frozenset({"cpu.user.percent", "cpu.kernel.percent", "cpu.idle.percent", "cpu.iowait.percent",
                              "cpu.percent"})


def _metric_value(name: str, value: float) -> float:
    return float(int(value * 100 if name in _PERCENT_METRICS else value))


def _ipv4_int(ip: str) -> int:
    """``ip`` as an integer, -1 when it is not four dot-separated numbers 0-255 (as ``int`` reads each)."""
    try:
        # The strict dotted quad (decimal, no leading zeros: all inet_pton takes), read in C: what a cold start
        # of a million reports meets, at a fifth of the cost. Anything else is read part by part below.
        return int.from_bytes(socket.inet_pton(socket.AF_INET, ip), "big")
    except (OSError, ValueError):
        pass
    parts = ip.split(".")
    if len(parts) != 4:
        return -1
    try:
        value = 0
        for part in parts:
            octet = int(part)
            if not 0 <= octet <= 255:
                return -1
            value = value * 256 + octet
        return value
    except ValueError:
        return -1


def _ipv4_ints(ips: list[str]) -> list[int] | np.ndarray:
    """``_ipv4_int`` of each of ``ips``: every one read in C at once when all are strict dotted quads (a cold
    start's million), else one by one."""
    try:
        packed = b"".join(map(socket.inet_pton, itertools.repeat(socket.AF_INET, len(ips)), ips))
    except (OSError, ValueError, TypeError):
        return [_ipv4_int(ip) for ip in ips]
    return np.frombuffer(packed, dtype=">u4").astype(np.int64)


def simple_for_new_row(stats: HostStats) -> bool:
    """Whether ``apply_new_rows`` can write ``stats`` (no metrics, NUMA cells, PCI pools or instance list)."""
    return stats.metrics is None and stats.numa_topology is None and stats.pci_stats is None \
        and stats.instances is None


def apply_new_rows(columns: Columns, rows: list[int], stats_list: list[HostStats],
                   default_ratios: dict[str, float]) -> None:
    """``apply_stats`` of each of ``stats_list`` (``simple_for_new_row``) into its row of ``rows``, all of them
    never-reported rows, with one numpy write per column instead of one per value: a cold start's work.

    What it writes must be what ``apply_stats`` writes, value for value (tests/test_bulk_load.py builds a table
    both ways and compares them). On a never-reported row every inventory is new, so nothing is compared and
    no inventory is dropped (``whole``); classic usage with no total names no inventory and is ignored."""
    if not rows:
        return
    index = np.asarray(rows, dtype=np.intp)
    numbers, named = _write_numbers(columns, index, stats_list)
    _write_identities(columns, rows, index, stats_list)
    # ironic nodes: no capacity from the classic fields, a custom class taken whole once an instance is listed
    # (as ``_update_inventories`` does for one report)
    ironic = np.fromiter(((stats.hypervisor_type or "").lower() == "ironic" for stats in stats_list),
                         dtype=np.bool_, count=len(stats_list))
    given_classic = _write_inventories(columns, rows, stats_list, ironic)
    _write_classic(columns, index, numbers, named, ironic, given_classic, default_ratios)


def _write_numbers(columns: Columns, index: np.ndarray,
                   stats_list: list[HostStats]) -> tuple[np.ndarray, np.ndarray]:
    """The scalar counts, ``disk_available_least`` and ``hypervisor_version`` of new rows; returns every number
    of ``_NUMBERS`` per row (NaN: not named) and where each is named."""
    cols = columns.cols
    # every number at once: None becomes NaN, which marks "not named" below
    numbers = np.empty((len(index), len(_NUMBERS)), dtype=np.float64)
    for start in range(0, len(index), _CHUNK):  # in chunks: a million tuples at once would hold ~200 MB more
        part = stats_list[start:start + _CHUNK]
        numbers[start:start + len(part)] = _numbers_of(part)
    named = ~np.isnan(numbers)
    for k, name in enumerate(_COUNTS):
        cols[name][index[named[:, k]]] = numbers[named[:, k], k]
    cols["disk_available_least"][index] = numbers[:, _AT["disk_available_least"]]
    k = _AT["hypervisor_version"]
    cols["hypervisor_version"][index[named[:, k]]] = numbers[named[:, k], k]
    return numbers, named


def _numbers_of(part: list[HostStats]) -> np.ndarray:
    """Every number of ``_NUMBERS`` per report of ``part`` (NaN: not named). The numbers every report names are
    read into a record array in C, at half the cost of an array of tuples (a fifth of a cold start); the ones no
    report names are NaN. When a number is named by some reports and not others, value by value."""
    first = _NUMBERS_OF(part[0])
    absent = [k for k, value in enumerate(first)
              if value is None and list(map(_GETTERS[k], part)).count(None) == len(part)]
    named = [k for k in range(len(_NUMBERS)) if k not in absent]
    if len(named) >= 2:  # (an attrgetter of one name gives no tuple)
        try:
            records = np.fromiter(map(operator.attrgetter(*(_NUMBERS[k] for k in named)), part),
                                  dtype=np.dtype([(_NUMBERS[k], np.float64) for k in named]), count=len(part))
        except (TypeError, ValueError):  # a None among the values: named by some reports only
            pass
        else:
            out = np.full((len(part), len(_NUMBERS)), np.nan)
            out[:, named] = records.view(np.float64).reshape(len(part), len(named))
            return out
    return np.array(list(map(_NUMBERS_OF, part)), dtype=np.float64)


def _write_identities(columns: Columns, rows: list[int], index: np.ndarray, stats_list: list[HostStats]) -> None:
    """New rows' names and address, their service's state, and their interned capabilities and traits."""
    cols = columns.cols
    # never-reported rows hold None in these lists: a value written as None where the report names none is the same
    _put(columns.node_uuids, rows, [stats.uuid for stats in stats_list])
    _put(columns.hypervisor_hostnames, rows, [stats.hypervisor_hostname for stats in stats_list])
    ips = [stats.host_ip for stats in stats_list]
    _put(columns.host_ips, rows, ips)
    named = [(k, ip) for k, ip in enumerate(ips) if ip is not None]
    cols["host_ip4"][index[[k for k, _ in named]]] = _ipv4_ints([ip for _, ip in named])
    services = [(row, stats.service) for row, stats in zip(rows, stats_list, strict=True)
                if stats.service is not None]
    if services:
        service_rows = [row for row, _ in services]
        cols["disabled"][service_rows] = [service.disabled for _, service in services]
        cols["forced_down"][service_rows] = [service.forced_down for _, service in services]
    caps_code, traits_code = columns.caps.code, columns.traitsets.code
    # A cloud's nodes report few distinct capabilities: each distinct set of the fields a HostCaps is made of
    # is made into one (and encoded to be interned) once, where one per report was a fifth of a cold start.
    # Equal bytes are equal fields, so equal HostCaps; unequal bytes of equal HostCaps meet again in the interner.
    seen: dict[bytes, int] = {}
    encode = _CAPS_FIELDS.encode
    caps: list[int] = []
    for stats in stats_list:
        key = encode((stats.hypervisor_type, stats.hypervisor_version, stats.cpu_info, stats.supported_instances,
                      stats.stats))
        code = seen.get(key)
        if code is None:
            code = seen[key] = _new_caps_code(stats, caps_code)
        caps.append(code)
    cols["caps_code"][index] = caps
    # the same for the traits: a set and an intern per distinct list of traits, not per report
    traits: dict[tuple[str, ...] | None, int] = {None: 0}
    listed = [None if stats.traits is None else tuple(stats.traits) for stats in stats_list]
    for names in dict.fromkeys(listed):  # in the order of their first row, as one intern per row numbers them
        if names is not None:
            traits[names] = traits_code(frozenset(names))
    cols["traits_code"][index] = list(map(traits.__getitem__, listed))


def _put(values: list[Any], rows: list[int], new: list[Any]) -> None:
    """``values[row] = v`` for each row of ``rows`` and v of ``new``; one slice write when the rows run on."""
    if rows and rows[-1] - rows[0] == len(rows) - 1:  # ascending and distinct (new rows): a run
        values[rows[0]:rows[-1] + 1] = new
        return
    for row, value in zip(rows, new, strict=True):
        values[row] = value


def _write_inventories(columns: Columns, rows: list[int], stats_list: list[HostStats],
                       ironic: np.ndarray) -> dict[str, np.ndarray]:
    """The inventories new rows' reports name themselves; returns, per classic class, which rows named it."""
    inv_rows: list[int] = []  # (row, class column) pairs and their values
    inv_js: list[int] = []
    inv: dict[str, list[Any]] = {name: [] for name in ("total", "reserved", "min_unit", "max_unit", "step_size",
                                                       "ratio", "reported")}
    usage_rows: list[int] = []
    given_classic = {rc: np.zeros(len(rows), dtype=np.bool_) for rc, _, _, _ in CLASSIC}
    for k, stats in enumerate(stats_list):
        given = stats.inventories
        if not given:
            continue
        row = rows[k]
        for rc, item in given.items():
            used = item.used
            if rc in _CLASSIC_USED:
                given_classic[rc][k] = True
                if used is None:
                    used = getattr(stats, _CLASSIC_USED[rc])
            if ironic[k] and stats.instances:
                used = max(used or 0, item.total)
            inv_rows.append(row)
            inv_js.append(columns.rc_slot(rc))  # may widen the 2-D arrays: they are read after the loop
            inv["total"].append(item.total)
            inv["reserved"].append(item.reserved)
            inv["min_unit"].append(item.min_unit)
            inv["max_unit"].append(item.max_unit if item.max_unit is not None else item.total)
            inv["step_size"].append(item.step_size)
            inv["ratio"].append(item.allocation_ratio)
            inv["reported"].append(used or 0)
            if used is not None:
                usage_rows.append(row)
    if inv_rows:
        pairs = (np.asarray(inv_rows, dtype=np.intp), np.asarray(inv_js, dtype=np.intp))
        columns.has_inventory[pairs] = True
        for name, values in inv.items():
            columns.rc[name][pairs] = values
    columns.reports_usage[usage_rows] = True
    return given_classic


def _write_classic(columns: Columns, index: np.ndarray, numbers: np.ndarray, named: np.ndarray,
                   ironic: np.ndarray, given_classic: dict[str, np.ndarray], default_ratios: dict[str, float]) -> None:
    """The classic classes from the compute node's own fields, where the report names a total and no inventory."""
    rc_arrays = columns.rc
    has_inventory = columns.has_inventory
    for rc, total_f, used_f, ratio_f in CLASSIC:
        j = columns.rc_index[rc]
        # an ironic node keeps its ratio in sight (capability and JSON queries read it) beside no inventory
        kept = ironic & ~given_classic[rc] & named[:, _AT[ratio_f]]
        rc_arrays["ratio"][index[kept], j] = numbers[kept, _AT[ratio_f]]
        has = named[:, _AT[total_f]] & ~given_classic[rc] & ~ironic
        at = index[has]
        total = numbers[has, _AT[total_f]]
        ratio = numbers[has, _AT[ratio_f]]
        used = numbers[has, _AT[used_f]]
        used_named = named[has, _AT[used_f]]
        has_inventory[at, j] = True
        rc_arrays["total"][at, j] = total
        rc_arrays["reserved"][at, j] = 0
        rc_arrays["min_unit"][at, j] = 1
        rc_arrays["max_unit"][at, j] = total
        rc_arrays["step_size"][at, j] = 1
        rc_arrays["ratio"][at, j] = np.where(np.isnan(ratio), float(default_ratios[rc]), ratio)
        rc_arrays["reported"][at, j] = np.where(used_named, used, 0.0)
        columns.reports_usage[at[used_named]] = True


_NUMBERS = (*_COUNTS, "disk_available_least", "hypervisor_version",
            *(f for _, total_f, used_f, ratio_f in CLASSIC for f in (total_f, used_f, ratio_f)))
_CHUNK = 1 << 16
_AT = {name: k for k, name in enumerate(_NUMBERS)}
_NUMBERS_OF = operator.attrgetter(*_NUMBERS)
_GETTERS = [operator.attrgetter(name) for name in _NUMBERS]
_CAPS_FIELDS = msgspec.json.Encoder(order="sorted")


def _new_caps_code(stats: HostStats, code: Callable[[HostCaps], int]) -> int:
    """``_update_caps``'s code for a never-reported row (whose capabilities are the empty ones, code 0)."""
    if stats.hypervisor_type is None and stats.hypervisor_version is None and stats.cpu_info is None \
            and stats.supported_instances is None and stats.stats is None:
        return 0
    supported = stats.supported_instances
    return code(HostCaps(
        hypervisor_type=stats.hypervisor_type, cpu_info=stats.cpu_info,
        supported_instances=() if supported is None else tuple(tuple(x) for x in supported), stats=stats.stats,
        hypervisor_version=stats.hypervisor_version))
