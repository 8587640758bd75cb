"""The table's storage: one row per compute node, as numpy columns and row-aligned lists.

- Rows are dense: removing a node moves the last row into its place, so **row numbers are not identities**;
  claims name ``(host, node)``. Rows at and beyond ``n`` are always pristine (filled when allocated, reset when a
  removal frees one), so a new row needs no reset.
- Numbers that change on every report or claim live in numpy columns (``SCALARS``; per resource class,
  ``RC_COLUMNS``; one column per metric name).
- Attributes that rarely change and are shared by many hosts (capabilities, traits) are *interned*: each row holds
  a small integer code into a list of distinct values, so a filter evaluates its predicate once per distinct value.

The table's other parts (aggregate index, instance index, ledger) keep their own state and reach rows through
this object; code outside ``gantt.compute.state`` reads it through ``HostTable`` only.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec
import numpy as np

from gantt.compute.numa import HostNUMA, with_claims
from gantt.compute.pci import Pool, device_counts, pool_key, remaining
from gantt.compute.state.cells import CellColumns
from gantt.model import NodeKey, NUMACellClaim, prepare_types

# Scalar columns: name -> (dtype, value of a row that never reported it)
SCALARS: dict[str, tuple[Any, Any]] = {
    "num_io_ops": (np.float64, 0),
    "num_instances": (np.float64, 0),
    "running_vms": (np.float64, 0),
    "current_workload": (np.float64, 0),
    "failed_builds": (np.float64, 0),
    # unconfirmed allocations on the node: builds Nova's HostState.consume_from_request would count as one more
    # instance and one more io op until the host's report lists them (IoOps/NumInstances weighers read it)
    "inflight_instances": (np.float64, 0),
    # Nova's effective counts (reported + in flight), kept current per row so that the io-ops / instance
    # filters and weighers read a column instead of adding two 100,000-row columns on every decision
    "io_ops_load": (np.float64, 0),
    "instances_load": (np.float64, 0),
    "hypervisor_version": (np.float64, 0),
    # when this replica took the node's last report, on the table's clock (liveness reads it), and the stamp
    # that report carries (the receiving server's wall clock: it tells a report from a rewrite of the same one)
    "updated_at": (np.float64, -np.inf),
    "reported_at": (np.float64, np.nan),
    "disabled": (np.bool_, False),
    "forced_down": (np.bool_, False),
    "free_ram_mb": (np.float64, 0),
    # Nova's free vCPUs for CPUWeigher: vcpus * ratio - used. A VCPU inventory's reserved is Placement's
    # (reserved_host_cpus) and never reaches Nova's HostState, so unlike the capacity columns it is not taken off
    # (nor from free RAM and disk, see _refresh_physical_free).
    "free_vcpus": (np.float64, 0),
    "free_disk_mb": (np.float64, 0),
    "disk_available_least": (np.float64, np.nan),
    "host_ip4": (np.int64, -1),
    "usage_version": (np.int64, 0),
    "caps_code": (np.int32, 0),
    "traits_code": (np.int32, 0),
    "aggset_code": (np.int32, 0),
    "pci_code": (np.int32, 0),  # the node's PCI device pools, interned (0: none)
    "pci_free": (np.float64, 0),  # devices in those pools (PCIWeigher)
    # a child resource provider (a NUMA cell, a PF under a compute node): never a candidate on its own (design §5)
    "child": (np.bool_, False),
    # Placement set the node's inventories (``Provider.inventories_set``): its classic fields are no capacity
    "placed": (np.bool_, False),
    # NUMA summaries for NUMATopologyFilter's vectorized prefilter (gantt.compute.numa.HostNUMA has the cells): how many
    # cells, and per host the largest cell figures no guest cell can exceed and still fit
    "numa_cells": (np.float64, 0),
    "numa_max_cpus": (np.float64, 0),
    "numa_max_free_pcpus": (np.float64, 0),
    "numa_max_memory": (np.float64, 0),
    "numa_threads": (np.bool_, False),  # some cell has SMT siblings (a thread policy of require needs one)
    # the node's in-flight NUMA claims do not all hold (a CPU pinned twice, huge pages over-used): a claim on it
    # must not commit (ledger.within_capacity)
    "numa_overbooked": (np.bool_, False),
}
# Per resource class, 2-D (rows x classes), column-major so one class is one contiguous column.
RC_COLUMNS = ("total", "reserved", "min_unit", "max_unit", "step_size", "ratio", "reported", "inflight",
              "capacity", "free")
# The classic classes hold the first slots of every table (``Columns.__init__`` opens them in this order): the
# weighers' physical free figures (``free_vcpus``, ``free_ram_mb``, ``free_disk_mb``) derive from them.
CLASSIC_CLASSES = ("VCPU", "MEMORY_MB", "DISK_GB")
_VCPU, _MEMORY_MB, _DISK_GB = range(len(CLASSIC_CLASSES))


class HostCaps(msgspec.Struct, frozen=True):
    """The static, shareable attributes of a node (interned: identical values share one object and one code)."""

    hypervisor_type: str | None = None
    cpu_info: Any = None
    supported_instances: tuple[tuple[str | None, ...], ...] = ()
    stats: Any = None
    hypervisor_version: int | None = None


V = TypeVar("V")


class Interner(Generic[V]):
    """Distinct values get dense codes; code 0 is the empty/unknown value given at construction."""

    def __init__(self, empty: V, key: Callable[[V], Hashable] = lambda v: v) -> None:
        self._key = key
        self.values: list[V] = [empty]
        self._codes: dict[Hashable, int] = {key(empty): 0}

    def code(self, value: V) -> int:
        k = self._key(value)
        code = self._codes.get(k)
        if code is None:
            code = len(self.values)
            self._codes[k] = code
            self.values.append(value)
        return code

    def __len__(self) -> int:
        return len(self.values)


_ENCODER = msgspec.json.Encoder(order="sorted")


@dataclass(slots=True)
class Factor:
    """A column as (per-row codes, distinct values): evaluate a predicate per value, then ``lut[codes]``."""

    codes: np.ndarray
    values: list[Any]

    def map(self, predicate: Callable[[Any], bool]) -> np.ndarray:
        lut = np.fromiter((bool(predicate(v)) for v in self.values), dtype=np.bool_, count=len(self.values))
        mapped: np.ndarray = lut[self.codes]
        return mapped


class Columns:
    """Every node's per-row data, and the row set (which ``(host, node)`` is which row)."""

    def __init__(self, initial_rows: int) -> None:
        self.n = 0
        self._capacity = max(16, initial_rows)
        # identity
        self.host_names: list[str] = []
        self.node_names: list[str] = []
        self.node_uuids: list[str | None] = []
        self.hypervisor_hostnames: list[str | None] = []
        self.host_ips: list[str | None] = []
        # each node's NUMA cells as reported, and with its in-flight NUMA claims counted (what a fit reads)
        self.numa_reported: list[HostNUMA | None] = []
        self.numa: list[HostNUMA | None] = []
        # the same cells as per-cell columns (NUMATopologyFilter's prefilter reads these, not the cells)
        self.cells = CellColumns(self._capacity)
        self.row_of: dict[NodeKey, int] = {}
        self.rows_of_host: dict[str, set[int]] = {}
        self.cols: dict[str, np.ndarray] = {
            name: np.full(self._capacity, fill, dtype=dtype) for name, (dtype, fill) in SCALARS.items()
        }
        # resource classes: rc_index maps a class to its column in every 2-D array, in the order classes came
        self.rc_index: dict[str, int] = {}
        self._rc_cap = 8
        self.rc: dict[str, np.ndarray] = {
            name: np.zeros((self._capacity, self._rc_cap), dtype=np.float64, order="F") for name in RC_COLUMNS
        }
        self.has_inventory = np.zeros((self._capacity, self._rc_cap), dtype=np.bool_, order="F")
        self.reports_usage = np.zeros(self._capacity, dtype=np.bool_)
        self.reports_instances = np.zeros(self._capacity, dtype=np.bool_)
        for name in CLASSIC_CLASSES:
            self.rc_slot(name)
        self.caps: Interner[HostCaps] = Interner(HostCaps(), key=lambda c: _ENCODER.encode(c))
        self.traitsets: Interner[frozenset[str]] = Interner(frozenset())
        # PCI: each row's pools interned (values are gantt.compute.pci.freeze_pools tuples), and devices per
        # (vendor_id, product_id) as a 2-D column so a request's prefilter is one sum per row, no Python per host
        self.pcisets: Interner[tuple[Pool, ...]] = Interner(())
        # (codes, values, epoch) replaced as one object, so a reader without the lock always gets codes and the
        # values they index together; epoch moves when the sets are renumbered (see _compact_pci)
        self.pci_source: tuple[np.ndarray, list[tuple[Pool, ...]], int] = (
            self.cols["pci_code"], self.pcisets.values, 0)
        # per row: the pools its host reported, and the devices unconfirmed claims hold (pool key -> count);
        # pci_code and pci_devices describe what is left (gantt.compute.pci.remaining)
        self.pci_reported: list[tuple[Any, ...]] = []
        self.pci_taken: list[dict[Any, int]] = []
        self.pci_index: dict[tuple[str, str], int] = {}
        self.pci_devices = np.zeros((self._capacity, 4), dtype=np.int64, order="F")
        # one column per metric name, NaN where a node does not report it
        self.metrics: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------------------------------- reading

    def col(self, name: str) -> np.ndarray:
        return self.cols[name][: self.n]

    def rc_col(self, column: str, rc: str) -> np.ndarray | None:
        j = self.rc_index.get(rc)
        if j is None:
            return None
        return self.rc[column][: self.n, j]

    def has_rc(self, rc: str) -> np.ndarray:
        j = self.rc_index.get(rc)
        if j is None:
            return np.zeros(self.n, dtype=np.bool_)
        return self.has_inventory[: self.n, j]

    def used(self, rc: str) -> np.ndarray:
        j = self.rc_index.get(rc)
        if j is None:
            return np.zeros(self.n)
        used: np.ndarray = self.rc["reported"][: self.n, j] + self.rc["inflight"][: self.n, j]
        return used

    def metric(self, name: str) -> np.ndarray | None:
        column = self.metrics.get(name)
        return None if column is None else column[: self.n]

    def inventories(self, row: int) -> dict[str, dict[str, float]]:
        return {rc: {column: float(self.rc[column][row, j]) for column in RC_COLUMNS}
                for rc, j in self.rc_index.items() if self.has_inventory[row, j]}

    def node_caps(self, row: int) -> HostCaps:
        return self.caps.values[int(self.cols["caps_code"][row])]

    def node_traits(self, row: int) -> frozenset[str]:
        return self.traitsets.values[int(self.cols["traits_code"][row])]

    # ------------------------------------------------------------------------------------------- growing

    def rc_slot(self, rc: str) -> int:
        """The class's column in the 2-D arrays, added (and the arrays widened) on first sight."""
        j = self.rc_index.get(rc)
        if j is not None:
            return j
        j = len(self.rc_index)
        if j >= self._rc_cap:
            self._rc_cap *= 2
            for name, arr in self.rc.items():
                grown = np.zeros((self._capacity, self._rc_cap), dtype=np.float64, order="F")
                grown[:, : arr.shape[1]] = arr
                self.rc[name] = grown
            grown_b = np.zeros((self._capacity, self._rc_cap), dtype=np.bool_, order="F")
            grown_b[:, : self.has_inventory.shape[1]] = self.has_inventory
            self.has_inventory = grown_b
        self.rc_index[rc] = j
        return j

    def pci_slot(self, pair: tuple[str, str]) -> int:
        """The (vendor_id, product_id) pair's column in ``pci_devices``, added on first sight."""
        j = self.pci_index.get(pair)
        if j is not None:
            return j
        j = len(self.pci_index)
        if j >= self.pci_devices.shape[1]:
            grown = np.zeros((self._capacity, 2 * self.pci_devices.shape[1]), dtype=np.int64, order="F")
            grown[:, : self.pci_devices.shape[1]] = self.pci_devices
            self.pci_devices = grown
        self.pci_index[pair] = j
        return j

    def set_pci_reported(self, row: int, pools: tuple[Pool, ...]) -> None:
        self.pci_reported[row] = pools
        self._refresh_pci(row)

    def add_pci_inflight(self, row: int, taken: Iterable[tuple[Pool, int]], sign: int) -> None:
        """Count devices a claim took from the row's pools (``sign`` +1), or no longer (-1)."""
        held = self.pci_taken[row]
        for key, count in taken:
            value = held.get(key, 0) + sign * count
            if value:
                held[key] = value
            else:
                held.pop(key, None)
        self._refresh_pci(row)

    def pci_within_capacity(self, row: int) -> bool:
        """No pool the node reports is held by claims beyond its count."""
        return not self.pci_overbooked(row)

    def pci_overbooked(self, row: int) -> list[tuple[Pool, int, int]]:
        """(pool key, devices unconfirmed claims hold, devices the pool has) for every pool held beyond its
        count."""
        held = self.pci_taken[row]
        if not held:
            return []
        counts: dict[Pool, int] = {}  # a report may list two pools with one key: claims take from both
        for pool in self.pci_reported[row]:
            key = pool_key(pool)
            counts[key] = counts.get(key, 0) + dict(pool)["count"]
        return [(key, held[key], count) for key, count in counts.items() if held.get(key, 0) > count]

    def _refresh_pci(self, row: int) -> None:
        pools = remaining(self.pci_reported[row], self.pci_taken[row])
        counts = device_counts(pools)
        slots = {self.pci_slot(pair): count for pair, count in counts.items()}  # may widen pci_devices
        devices = np.zeros(self.pci_devices.shape[1], dtype=np.int64)
        for j, count in slots.items():
            devices[j] = count
        self.pci_devices[row, :] = devices
        self.cols["pci_code"][row] = self.pcisets.code(pools)
        self.cols["pci_free"][row] = sum(counts.values())
        if len(self.pcisets) > 2 * self.n + 1024:
            self._compact_pci()

    def pci_pools(self, row: int) -> tuple[Pool, ...]:
        """The pools the row has left (reported, less what unconfirmed claims hold)."""
        return self.pcisets.values[int(self.cols["pci_code"][row])]

    def _compact_pci(self) -> None:
        """Intern again only the pool sets live rows use. Counts move with every claim, release and report, and
        an interner only grows: without this, a long-running replica would keep every pool set it ever saw.
        Codes and values are replaced, not changed, so a reader keeps the consistent pair it took."""
        fresh: Interner[tuple[Pool, ...]] = Interner(())
        old = self.cols["pci_code"]
        codes = np.zeros_like(old)
        values = self.pcisets.values
        for row in range(self.n):
            codes[row] = fresh.code(values[int(old[row])])
        self.pcisets = fresh
        self.cols["pci_code"] = codes
        self.pci_source = (codes, fresh.values, self.pci_source[2] + 1)

    def metric_column(self, name: str) -> np.ndarray:
        """The metric's column over every allocated row, added on first sight."""
        arr = self.metrics.get(name)
        if arr is None:
            arr = self.metrics[name] = np.full(self._capacity, np.nan)
        return arr

    def _grow(self) -> None:
        """Readers hold references to the old arrays without the lock: new arrays are swapped in, never resized
        in place, so a reader keeps a consistent (if slightly old) array."""
        rows = self._capacity * 2
        for name, (dtype, fill) in SCALARS.items():
            grown = np.full(rows, fill, dtype=dtype)
            grown[: self._capacity] = self.cols[name]
            self.cols[name] = grown
        self.pci_source = (self.cols["pci_code"], self.pcisets.values, self.pci_source[2])
        for name, arr in self.rc.items():
            grown2 = np.zeros((rows, self._rc_cap), dtype=np.float64, order="F")
            grown2[: self._capacity] = arr
            self.rc[name] = grown2
        grown_b = np.zeros((rows, self._rc_cap), dtype=np.bool_, order="F")
        grown_b[: self._capacity] = self.has_inventory
        self.has_inventory = grown_b
        grown_p = np.zeros((rows, self.pci_devices.shape[1]), dtype=np.int64, order="F")
        grown_p[: self._capacity] = self.pci_devices
        self.pci_devices = grown_p
        for attr in ("reports_usage", "reports_instances"):
            old = getattr(self, attr)
            new = np.zeros(rows, dtype=np.bool_)
            new[: self._capacity] = old
            setattr(self, attr, new)
        for name, arr in self.metrics.items():
            grown_m = np.full(rows, np.nan)
            grown_m[: self._capacity] = arr
            self.metrics[name] = grown_m
        self.cells.grow(rows)
        self._capacity = rows

    # ---------------------------------------------------------------------------------------------- rows

    def add_row(self, host: str, node: str) -> int:
        if self.n >= self._capacity:
            self._grow()
        row = self.n
        self.n += 1
        self.host_names.append(host)
        self.node_names.append(node)
        self.node_uuids.append(None)
        self.hypervisor_hostnames.append(None)
        self.host_ips.append(None)
        self.numa_reported.append(None)
        self.numa.append(None)
        self.pci_reported.append(())
        self.pci_taken.append({})
        self.row_of[(host, node)] = row
        self.rows_of_host.setdefault(host, set()).add(row)
        return row

    def add_rows(self, keys: list[NodeKey]) -> int:
        """``add_row`` for each of ``keys`` (none of them present yet), at once; returns the first new row."""
        first = self.n
        while first + len(keys) > self._capacity:
            self._grow()
        count = len(keys)
        self.host_names.extend(host for host, _ in keys)
        self.node_names.extend(node for _, node in keys)
        for lst in (self.node_uuids, self.hypervisor_hostnames, self.host_ips, self.numa_reported, self.numa):
            lst.extend(itertools.repeat(None, count))
        self.pci_reported.extend(itertools.repeat((), count))
        self.pci_taken.extend({} for _ in range(count))
        self.row_of.update(zip(keys, range(first, first + count), strict=True))
        rows_of_host = self.rows_of_host
        for row, host in enumerate(self.host_names[first:], first):
            held = rows_of_host.get(host)
            if held is None:
                rows_of_host[host] = {row}
            else:
                held.add(row)
        self.n = first + count
        return first

    def remove_row(self, row: int) -> int:
        """Move the last row into ``row`` and free the last; returns the last row's number (the one that moved,
        unless it was ``row`` itself), so that row-aligned state kept elsewhere can follow."""
        last = self.n - 1
        key = (self.host_names[row], self.node_names[row])
        del self.row_of[key]
        self.rows_of_host[key[0]].discard(row)
        if not self.rows_of_host[key[0]]:
            del self.rows_of_host[key[0]]
        if row != last:
            moved = (self.host_names[last], self.node_names[last])
            for arr in self.cols.values():
                arr[row] = arr[last]
            for arr in self.rc.values():
                arr[row, :] = arr[last, :]
            self.has_inventory[row, :] = self.has_inventory[last, :]
            self.pci_devices[row, :] = self.pci_devices[last, :]
            self.reports_usage[row] = self.reports_usage[last]
            self.reports_instances[row] = self.reports_instances[last]
            for arr in self.metrics.values():
                arr[row] = arr[last]
            self.cells.move(row, last)
            for lst in self._row_lists():
                lst[row] = lst[last]
            self.row_of[moved] = row
            self.rows_of_host[moved[0]].discard(last)
            self.rows_of_host[moved[0]].add(row)
        for lst in self._row_lists():
            lst.pop()
        self.n -= 1
        self._reset_row(last)
        return last

    def _row_lists(self) -> tuple[list[Any], ...]:
        return (self.host_names, self.node_names, self.node_uuids, self.hypervisor_hostnames, self.host_ips,
                self.numa_reported, self.numa, self.pci_reported, self.pci_taken)

    def set_numa(self, row: int, numa: HostNUMA | None) -> None:
        """The node's reported cells (its in-flight claims are counted again by the ledger, after)."""
        self.numa_reported[row] = numa
        self.count_numa_claims(row, [])

    def count_numa_claims(self, row: int, claims: list[NUMACellClaim]) -> None:
        """The node's cells with ``claims`` (its unconfirmed allocations' NUMA parts) counted on top."""
        reported = self.numa_reported[row]
        cols = self.cols
        if reported is None and not claims and self.numa[row] is None and not cols["numa_overbooked"][row]:
            # No cells before and none now (every provider without a NUMA topology, on every write the feed
            # applies to it): the row's columns already say so. Rewriting them was a third of such an apply.
            return
        if reported is None or not claims:
            numa, ok = reported, reported is not None or not claims
        else:
            numa, ok = with_claims(reported, claims)
        self.numa[row] = numa
        cols["numa_overbooked"][row] = not ok
        cells = numa.cells if numa is not None else ()
        cols["numa_cells"][row] = len(cells)
        cols["numa_max_cpus"][row] = max((len(c.cpuset) for c in cells), default=0)
        cols["numa_max_free_pcpus"][row] = max((len(c.free_pcpus) for c in cells), default=0)
        cols["numa_max_memory"][row] = max((c.largest_guest_memory for c in cells), default=0)
        cols["numa_threads"][row] = numa is not None and numa.has_threads
        self.cells.set(row, numa)

    def _reset_row(self, row: int) -> None:
        """Give a freed row back its never-reported values, so that add_row can take it as it is."""
        for name, (_, fill) in SCALARS.items():
            self.cols[name][row] = fill
        for arr in self.rc.values():
            arr[row, :] = 0.0
        self.has_inventory[row, :] = False
        self.pci_devices[row, :] = 0
        self.reports_usage[row] = False
        self.reports_instances[row] = False
        for arr in self.metrics.values():
            arr[row] = np.nan
        self.cells.reset(row)

    # ----------------------------------------------------------------------------------------- usage

    def refresh_load(self, row: int) -> None:
        # One row's figures as Python floats (``item``): the same float64 arithmetic, at a fraction of the cost of
        # numpy scalars (every report and claim passes here, as in ``_refresh_physical_free``).
        cols = self.cols
        inflight = cols["inflight_instances"].item(row)
        cols["io_ops_load"][row] = cols["num_io_ops"].item(row) + inflight
        cols["instances_load"][row] = cols["num_instances"].item(row) + inflight

    def refresh_free(self, row: int, *, shape: bool = True) -> None:
        """The row's capacity and free figures from its inventories and usage. ``shape`` False: no inventory of
        the row changed its total, reserved or ratio since its last refresh (a report of usage alone), so the
        capacity stands and only the free figures are computed again (from it, which gives the same values)."""
        rc = self.rc
        k = len(self.rc_index)
        if shape:
            cap = (rc["total"][row, :k] - rc["reserved"][row, :k]) * rc["ratio"][row, :k]
            rc["capacity"][row, :k] = cap
        else:
            cap = rc["capacity"][row, :k]
        rc["free"][row, :k] = cap - rc["reported"][row, :k] - rc["inflight"][row, :k]
        self._refresh_physical_free(row)

    def refresh_rows(self, rows: slice | np.ndarray) -> None:
        """``refresh_load`` and ``refresh_free`` on a range (or an index array) of rows at once (the same
        arithmetic, elementwise)."""
        cols = self.cols
        cols["io_ops_load"][rows] = cols["num_io_ops"][rows] + cols["inflight_instances"][rows]
        cols["instances_load"][rows] = cols["num_instances"][rows] + cols["inflight_instances"][rows]
        rc = self.rc
        k = len(self.rc_index)
        cap = (rc["total"][rows, :k] - rc["reserved"][rows, :k]) * rc["ratio"][rows, :k]
        rc["capacity"][rows, :k] = cap
        rc["free"][rows, :k] = cap - rc["reported"][rows, :k] - rc["inflight"][rows, :k]
        cpu, mem, disk = _VCPU, _MEMORY_MB, _DISK_GB
        cols["free_vcpus"][rows] = (rc["total"][rows, cpu] * rc["ratio"][rows, cpu]
                                    - rc["reported"][rows, cpu] - rc["inflight"][rows, cpu])
        cols["free_ram_mb"][rows] = rc["total"][rows, mem] - rc["reported"][rows, mem] - rc["inflight"][rows, mem]
        free_gb = rc["total"][rows, disk] - rc["reported"][rows, disk]
        least = cols["disk_available_least"][rows]
        free_gb = np.where(least < free_gb, least, free_gb)  # NaN (not reported) compares False: free_gb stays
        cols["free_disk_mb"][rows] = (free_gb - rc["inflight"][rows, disk]) * 1024.0

    def _refresh_physical_free(self, row: int) -> None:
        """The weighers' free RAM and disk (physical: no allocation ratio, in MB) and free vCPUs."""
        reported, inflight = self.rc["reported"], self.rc["inflight"]
        for j in range(len(CLASSIC_CLASSES)):
            self._set_physical_free(row, j, reported.item(row, j), inflight.item(row, j))

    def _set_physical_free(self, row: int, j: int, used: float, held: float) -> None:
        """The physical free figure of the classic class in slot ``j`` (none for another class), from its reported
        usage ``used`` and what claims hold in flight, ``held``."""
        rc = self.rc
        cols = self.cols
        # As Nova's HostState: memory_mb - memory_mb_used, local_gb - local_gb_used. An inventory's reserved is
        # Placement's; nova-compute counts its reserved_host_memory_mb / _disk_mb in the used figures it reports.
        if j == _VCPU:
            cols["free_vcpus"][row] = rc["total"].item(row, j) * rc["ratio"].item(row, j) - used - held
        elif j == _MEMORY_MB:
            cols["free_ram_mb"][row] = rc["total"].item(row, j) - used - held
        elif j == _DISK_GB:
            free_gb = rc["total"].item(row, j) - used
            least = cols["disk_available_least"].item(row)
            if least == least and least < free_gb:
                # not NaN: as Nova's HostState does, the smaller of the hypervisor's own view and the accounted
                # free space wins (disk_available_least can lag behind or run ahead of the database's figures)
                free_gb = least
            cols["free_disk_mb"][row] = (free_gb - held) * 1024.0

    def add_inflight(self, row: int, resources: dict[str, int], sign: int, *, instance: bool = True) -> None:
        """Count ``resources`` in flight on ``row`` (``sign`` +1) or no longer (-1), and one instance with them
        unless ``instance`` is False (a consumer's part on a node it does not run on)."""
        known = self.rc_index
        if known.keys() >= resources.keys():
            # Every claim and release lands here, on every replica (a feed applies the other workers' too): only
            # the named classes' figures change (the capacity does not), so write those alone, each value read
            # once, rather than recompute the row: the same float64 arithmetic, in the same order, as
            # ``refresh_free``, on Python floats (``item``: numpy scalars cost several times more).
            rc = self.rc
            inflight, free, capacity, reported = rc["inflight"], rc["free"], rc["capacity"], rc["reported"]
            for name, amount in resources.items():
                j = known[name]
                held = inflight.item(row, j) + sign * amount
                inflight[row, j] = held
                used = reported.item(row, j)
                free[row, j] = capacity.item(row, j) - used - held
                self._set_physical_free(row, j, used, held)
        else:
            for name, amount in resources.items():
                j = self.rc_slot(name)  # may add a class (and grow the arrays)
                self.rc["inflight"][row, j] += sign * amount
            self.refresh_free(row)
        if instance:
            instances = self.cols["inflight_instances"]
            instances[row] = instances.item(row) + sign
            self.refresh_load(row)


prepare_types(globals())  # build msgspec type info before any thread decodes (see model.prepare_types)
