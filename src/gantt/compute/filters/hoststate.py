"""Nova's HostState attributes as HostTable views, for the filters that name attributes by string.

ComputeCapabilitiesFilter (extra specs such as ``capabilities:cpu_info:features``) and JsonFilter (``$free_ram_mb``)
both look host attributes up by Nova's HostState names. A name resolves to one of:

- a numeric column (``Numeric``): Nova's integer/float attributes, changing with usage;
- a factor (``Factor`` codes + distinct values): interned capabilities (hypervisor, cpu_info, stats, …), so a
  predicate runs once per distinct value; or identity strings (host, nodename, …), one value per row.

``static`` says whether the view can only change when ``table.static_revision`` moves (so a mask derived from it
may be cached against that revision).
"""

from __future__ import annotations

import datetime
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gantt.compute.state import Factor, HostCaps, HostTable

# Integer attributes of Nova's HostState (str() of them has no ".0").
_INT_ATTRS = ("free_ram_mb", "free_disk_mb", "total_usable_ram_mb", "total_usable_disk_gb", "disk_mb_used",
              "vcpus_total", "vcpus_used", "num_instances", "num_io_ops", "failed_builds")
_RATIO_ATTRS = {"cpu_allocation_ratio": "VCPU", "ram_allocation_ratio": "MEMORY_MB",
                "disk_allocation_ratio": "DISK_GB"}
# Interned per node (HostCaps); 'stats' holds the free-form compute stats Nova falls back to.
CAPS_ATTRS = ("hypervisor_type", "hypervisor_version", "cpu_info", "supported_instances", "stats")
# One value per row; host and nodename identify the row, the others may change with any report.
IDENTITY_ATTRS = frozenset({"host", "nodename", "hypervisor_hostname", "uuid", "host_ip"})
NUMERIC_ATTRS = frozenset({*_INT_ATTRS, *_RATIO_ATTRS})
# The rest of Nova's HostState: objects and collections, read per row (they move with reports and claims). What a
# capability key finds below them is Nova's: attribute names on an object, keys of a real dict; a UserDict
# (``service``), a list or a missing attribute ends the walk (the node fails).
OBJECT_ATTRS = frozenset({"service", "limits", "aggregates", "instances", "metrics", "pci_stats", "numa_topology",
                          "allocation_candidates", "updated"})
HOSTSTATE_ATTRS = frozenset({*NUMERIC_ATTRS, *CAPS_ATTRS, *IDENTITY_ATTRS, *OBJECT_ATTRS})


@dataclass(slots=True)
class Numeric:
    values: np.ndarray  # float64 over live rows, NaN where the node has no value
    integer: bool
    static: bool = False

    def text(self, value: float) -> str | None:
        if value != value:
            return None
        if self.integer and float(value).is_integer():
            return str(int(value))
        return str(float(value))


@dataclass(slots=True)
class Objects:
    factor: Factor
    static: bool


def numeric_attribute(table: HostTable, name: str) -> Numeric | None:
    """A Nova integer/float HostState attribute as a column, or None if ``name`` is not one."""
    n = table.n
    if name in ("free_ram_mb", "free_disk_mb", "failed_builds"):
        return Numeric(table.col(name), integer=True)
    if name in ("num_instances", "num_io_ops"):
        # Nova's HostState counts a build it has just placed until the host reports again (consume_from_request)
        return Numeric(table.col(name) + table.col("inflight_instances"), integer=True)
    if name in ("total_usable_ram_mb", "total_usable_disk_gb", "vcpus_total"):
        rc = {"total_usable_ram_mb": "MEMORY_MB", "total_usable_disk_gb": "DISK_GB", "vcpus_total": "VCPU"}[name]
        col = table.rc_col("total", rc)
        return Numeric(col if col is not None else np.zeros(n), integer=True)
    if name == "vcpus_used":
        return Numeric(table.used("VCPU"), integer=True)
    if name == "disk_mb_used":
        return Numeric(table.used("DISK_GB") * 1024.0, integer=True)
    if name in _RATIO_ATTRS:
        col = table.rc_col("ratio", _RATIO_ATTRS[name])
        # a ratio without an inventory is an ironic node's (reports.py); 0 means none was reported
        values = np.where(table.has_rc(_RATIO_ATTRS[name]) | (col > 0), col, np.nan) if col is not None \
            else np.full(n, np.nan)
        return Numeric(values, integer=False)
    return None


def identity_attribute(table: HostTable, name: str) -> Objects | None:
    if name not in IDENTITY_ATTRS:
        return None
    return Objects(table.factor(name), static=name in ("host", "nodename"))


def caps_factor(table: HostTable) -> Factor:
    """Codes + distinct HostCaps of every live row."""
    return table.factor("caps")


def caps_attribute(caps: HostCaps, name: str) -> Any:
    """Nova's view of an interned attribute: supported_instances as a list of lists, stats never None."""
    value = getattr(caps, name)
    if name == "supported_instances":
        return [list(spec) for spec in value]
    if name == "stats" and value is None:
        return {}
    return value


def descend(value: Any, path: list[str] | tuple[str, ...]) -> Any:
    """Walk dict keys down ``path``; a JSON string is decoded first (Nova stores cpu_info as JSON text).

    None when a step is missing or lands on something that is not a mapping.
    """
    for name in path:
        if isinstance(value, _Shown):  # an object: its attributes by name, nothing else
            value = value.below.get(name)
            if value is None:
                return None
            continue
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except (ValueError, RecursionError):  # nested past the interpreter's limit: nothing to read in it
                return None
        if not isinstance(value, dict):
            return None
        value = value.get(name)
        if value is None:
            return None
    return value


class StaticMemo:
    """A small LRU of masks valid for one ``static_revision`` (and row count): a filter whose mask has a static
    part and a usage part caches the static part here and recomputes only the rest.
    """

    def __init__(self, size: int = 256) -> None:
        self.size = max(1, size)
        self._lock = threading.Lock()
        self._masks: OrderedDict[Hashable, np.ndarray] = OrderedDict()

    def get(self, table: HostTable, key: Hashable, build: Callable[[], np.ndarray]) -> np.ndarray:
        rev = table.static_revision
        full = (rev, table.n, key)
        with self._lock:
            mask = self._masks.get(full)
            if mask is not None:
                self._masks.move_to_end(full)
                return mask
        mask = build()
        if table.static_revision == rev:  # state moved during the build: use it once, keep nothing
            with self._lock:
                self._masks[full] = mask
                while len(self._masks) > self.size:
                    self._masks.popitem(last=False)
        return mask


def host_rows(table: HostTable, hosts: Iterable[str], value: bool = True, base: bool = False) -> np.ndarray:
    """A mask that is ``base`` everywhere except on the nodes of ``hosts``, where it is ``value``."""
    n = table.n
    mask = np.full(n, base, dtype=np.bool_)
    for host in hosts:
        for row in table.rows_of_host(host):
            if row < n:
                mask[row] = value
    return mask


def in_any_aggregate(table: HostTable, keys: frozenset[str]) -> np.ndarray:
    """Nodes whose host is in at least one of the aggregates ``keys`` names (by key)."""
    return table.factor("aggregates").map(lambda aggs: bool(aggs & keys))


def aggregate_keys(table: HostTable, refs: Iterable[str]) -> frozenset[str]:
    """The keys of the aggregates named by id or uuid (an unknown name matches nothing)."""
    refs = set(refs)
    return frozenset(agg.key for agg in table.aggregates() if agg.key in refs or agg.uuid in refs)


class _Shown:
    """A HostState object as a capability sees it: present (so not None), its text (``str()`` in Nova: an object's
    repr, of which Gantt gives its own rendering), and what a walk finds below it by attribute name."""

    __slots__ = ("below", "text")

    def __init__(self, text: str, below: dict[str, Any] | None = None) -> None:
        self.text = text
        self.below = below or {}

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__  # inside a dict or list, as Nova's objects show inside theirs


def object_attribute(table: HostTable, row: int, name: str) -> Any:
    """Nova's HostState ``name`` (one of ``OBJECT_ATTRS``) for node ``row``: a _Shown, a plain value, or None
    where Nova's is None (no NUMA topology, no report time)."""
    host = table.host_names[row]
    if name == "service":
        service = {"host": host, "binary": "nova-compute", "disabled": bool(table.col("disabled")[row]),
                   "disabled_reason": table.disabled_reason((host, table.node_names[row])),
                   "forced_down": bool(table.col("forced_down")[row])}
        return _Shown(repr(service))  # a UserDict: nothing below it for Nova's walk
    if name == "limits":
        return {}  # what a filter leaves there later in the request is not known when this one runs
    if name == "aggregates":
        return _Shown(repr([f"Aggregate(id={a.key},name={a.name})" for a in table.node_aggregates(row)]))
    if name == "instances":
        listed = sorted(table.instances(row))
        shown = {uuid: _Shown(f"Instance(uuid={uuid},host={host})", {"uuid": uuid, "host": host})
                 for uuid in listed}
        return {**shown} if shown else {}
    if name == "metrics":
        return _Shown("MonitorMetricList(objects=[...])", {"objects": _Shown("[...]")})
    if name == "pci_stats":
        return _Shown("PciDeviceStats(...)", {"pools": _Shown("[...]")})
    if name == "numa_topology":
        return None if table.node_numa(row) is None else _Shown("NUMATopology(...)", {"cells": _Shown("[...]")})
    if name == "allocation_candidates":
        return _Shown("[...]")
    if name == "updated":
        stamp = float(table.col("updated_at")[row])
        if not stamp:
            return None
        return str(datetime.datetime.fromtimestamp(stamp, datetime.UTC))
    raise KeyError(name)
