"""HostTable: the in-memory replica of every host, columnar so filters and weighers run over all hosts at once.

Layout
- One row per compute node (a host with several nodes has several rows). Rows are dense: deleting a node moves
  the last row into its place, so **row numbers are not identities**; claims name ``(host, node)``.
- Numbers that change on every report or claim live in numpy columns (``free``, ``num_io_ops`` …).
- Attributes that rarely change and are shared by many hosts (hypervisor, cpu_info, traits, aggregate
  membership) are *interned*: each row holds a small integer code into a list of distinct values. A filter
  evaluates its predicate once per distinct value and maps it to rows with one ``take``; this is why the
  aggregate and capability filters cost the same at 100 or 100,000 hosts.

Revisions
- ``revision`` moves on every change.
- ``static_revision`` moves only when something a *static* filter can see changes (interned attributes,
  aggregates, the set of rows, a service enabled or disabled, an inventory's shape: total, reserved, ratio,
  units).
  Static filter masks are cached against it, so a stream of usage-only reports does not throw the cache away.
- ``journal`` lists the rows whose usage or report time changed, in order: what decisions derive from usage
  columns (fit masks, liveness, extremes, weighted sums) is patched on those rows (``gantt.journal``).

Accounting (design §1): per node and resource class ``used = reported + in flight``; allocations the host's
report lists in ``instances`` are confirmed and no longer counted on top.

Thread safety: every mutation holds ``lock``. Readers take array references without the lock; growth swaps in
new arrays, so a reader holds a consistent (if slightly old) array. Claims re-check under the lock.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from gantt.config import Config
from gantt.journal import ColumnBounds, Liveness, PatchedMasks, RowJournal, Rows, WeightedSums, weighted_sum
from gantt.model import (
    Aggregate,
    Allocation,
    Conflict,
    HostReport,
    HostStats,
    Inventory,
    NodeKey,
    NotFound,
    prepare_types,
)

log = logging.getLogger(__name__)

_NONE: frozenset[str] = frozenset()  # the instances of a node that runs none
_STATIC_EPOCHS = itertools.count(1)  # see HostTable.__init__: one range of static revisions per table

# Nova's initial_*_allocation_ratio defaults: used when a host reports none (configurable: [DEFAULT]).
DEFAULT_RATIOS = {"VCPU": 4.0, "MEMORY_MB": 1.0, "DISK_GB": 1.0}
CLASSIC = (("VCPU", "vcpus", "vcpus_used", "cpu_allocation_ratio"),
           ("MEMORY_MB", "memory_mb", "memory_mb_used", "ram_allocation_ratio"),
           ("DISK_GB", "local_gb", "local_gb_used", "disk_allocation_ratio"))

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
    "updated_at": (np.float64, -np.inf),
    "disabled": (np.bool_, False),
    "forced_down": (np.bool_, False),
    "free_ram_mb": (np.float64, 0),
    "free_disk_mb": (np.float64, 0),
    "disk_available_least": (np.float64, np.nan),
    "host_ip4": (np.int64, -1),
    "usage_version": (np.int64, 0),
    "caps_code": (np.int32, 0),
    "traits_code": (np.int32, 0),
    "aggset_code": (np.int32, 0),
}
# Per resource class, 2-D (rows x classes), column-major so one class is one contiguous column.
RC_COLUMNS = ("total", "reserved", "min_unit", "max_unit", "step_size", "ratio", "reported", "inflight",
              "capacity", "free")


class HostCaps(msgspec.Struct, frozen=True):
    """The static, shareable attributes of a node (interned: identical values share one object and one code)."""

    hypervisor_type: str | None = None
    cpu_info: Any = None
    supported_instances: tuple[tuple[str | None, ...], ...] = ()
    stats: Any = None
    hypervisor_version: int | None = None


class Interner:
    """Distinct values get dense codes; code 0 is the empty/unknown value given at construction."""

    def __init__(self, empty: Any, key: Callable[[Any], Any] = lambda v: v) -> None:
        self._key = key
        self.values: list[Any] = [empty]
        self._codes: dict[Any, int] = {key(empty): 0}

    def code(self, value: Any) -> int:
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
        return lut[self.codes]


class ClaimRejected(Exception):
    """A claim on one node failed its compare-and-set; the engine moves to the next candidate."""


class SourceMoved(ClaimRejected):
    """A move's source allocation is no longer the instance's: no other node can take the move either."""


class HostTable:
    """All hosts, columnar. See the module docstring for layout, revisions and accounting."""

    def __init__(self, *, service_down_time: float = 60.0, claim_timeout: float = 600.0,
                 clock: Callable[[], float] = time.time, initial_rows: int = 1024,
                 default_ratios: dict[str, float] | None = None) -> None:
        self.lock = threading.RLock()
        self.clock = clock
        self.default_ratios = {**DEFAULT_RATIOS, **(default_ratios or {})}
        self.service_down_time = service_down_time
        self.claim_timeout = claim_timeout
        self.revision = 0
        # Caches outside the table (the engine's masks, filters' memos) are keyed on the static revision: a table
        # built by a reload must never repeat a revision an earlier table used, so each starts in its own range.
        self.static_revision = next(_STATIC_EPOCHS) << 32
        self.stale_reports = 0  # reports ignored because the node had applied a newer one
        # server group -> the consumers claimed under its hard policy (Allocation.group), wherever they run
        self.group_allocations: dict[str, set[str]] = {}
        self.settled_claims = 0  # claims on nodes that never list instances, left to the reports after the timeout
        self.n = 0
        self._rows = max(16, initial_rows)
        # identity
        self.host_names: list[str] = []
        self.node_names: list[str] = []
        self.node_uuids: list[str | None] = []
        self.hypervisor_hostnames: list[str | None] = []
        self.host_ips: list[str | None] = []
        self.row_of: dict[NodeKey, int] = {}
        self.rows_of_host: dict[str, set[int]] = {}
        # scalar columns
        self.cols: dict[str, np.ndarray] = {
            name: np.full(self._rows, fill, dtype=dtype) for name, (dtype, fill) in SCALARS.items()
        }
        # resource classes
        self.rc_index: dict[str, int] = {}
        self.rc_names: list[str] = []
        self._rc_cap = 8
        self.rc: dict[str, np.ndarray] = {
            name: np.zeros((self._rows, self._rc_cap), dtype=np.float64, order="F") for name in RC_COLUMNS
        }
        self.has_inventory = np.zeros((self._rows, self._rc_cap), dtype=np.bool_, order="F")
        self.reports_usage = np.zeros(self._rows, dtype=np.bool_)
        self.reports_instances = np.zeros(self._rows, dtype=np.bool_)
        for name in ("VCPU", "MEMORY_MB", "DISK_GB"):
            self._rc_column(name)
        # interned attributes
        self.caps = Interner(HostCaps(), key=lambda c: _ENCODER.encode(c))
        self.traitsets = Interner(frozenset())
        self.aggsets = Interner(frozenset())
        # metrics: one column per metric name, NaN where a node does not report it
        self.metrics: dict[str, np.ndarray] = {}
        # instances each node runs (reported or allocated), and where each instance is; rows that run nothing
        # share one empty frozenset (an empty set() costs 216 bytes a row)
        self.instances: list[AbstractSet[str]] = []
        self.instance_host: dict[str, str] = {}
        self.reported_instances: list[frozenset[str]] = []
        # aggregates
        self.aggregates: dict[str, Aggregate] = {}
        self.host_aggregates: dict[str, set[str]] = {}
        self._agg_cache_entry: tuple[int, dict[tuple[Any, ...], Any]] = (-1, {})
        # allocations
        self.allocations: dict[str, Allocation] = {}
        self.node_allocations: dict[NodeKey, set[str]] = {}
        self.expired_claims = 0
        # With a shared store, expiry must be a store write (every replica must agree): the owner sets this hook
        # and releases through the store; without it the table drops expired claims itself.
        self.on_expire: Callable[[list[Allocation]], None] | None = None
        self._listeners: list[Callable[[str, Any], None]] = []
        # derived data patched on changed rows rather than recomputed per decision (see gantt.journal)
        self.journal = RowJournal()
        self.heartbeat_epoch = 0
        self._liveness = Liveness()
        self._usage_masks = PatchedMasks()
        self._column_bounds = ColumnBounds()
        self._weighted_sums = WeightedSums()
        # Below this many rows a full pass over a column costs less than the bookkeeping of a patched value.
        self.patch_min_rows = 20_000

    @classmethod
    def from_config(cls, config: Config, **kwargs: Any) -> HostTable:
        """A table with the options that shape it: ``service_down_time``, ``claim_timeout`` and the allocation
        ratios a host that reports none gets (Nova: ``cpu_allocation_ratio`` when set, else
        ``initial_cpu_allocation_ratio``; likewise for RAM and disk)."""
        d = config.default
        ratios = {
            "VCPU": d.cpu_allocation_ratio or d.initial_cpu_allocation_ratio,
            "MEMORY_MB": d.ram_allocation_ratio or d.initial_ram_allocation_ratio,
            "DISK_GB": d.disk_allocation_ratio or d.initial_disk_allocation_ratio,
        }
        kwargs.setdefault("service_down_time", d.service_down_time)
        kwargs.setdefault("claim_timeout", config.gantt.claim_timeout)
        return cls(default_ratios=ratios, **kwargs)

    # ------------------------------------------------------------------------------------------- columns

    def col(self, name: str) -> np.ndarray:
        """A scalar column trimmed to the live rows (a view, no copy)."""
        return self.cols[name][: self.n]

    def rc_col(self, column: str, rc: str) -> np.ndarray | None:
        """One resource class's column (``free``, ``capacity``, ``total`` …) for the live rows, or None."""
        j = self.rc_index.get(rc)
        if j is None:
            return None
        return self.rc[column][: self.n, j]

    def has_rc(self, rc: str) -> np.ndarray:
        j = self.rc_index.get(rc)
        if j is None:
            return np.zeros(self.n, dtype=np.bool_)
        return self.has_inventory[: self.n, j]

    def _rc_column(self, rc: str) -> int:
        j = self.rc_index.get(rc)
        if j is not None:
            return j
        j = len(self.rc_names)
        if j >= self._rc_cap:
            self._rc_cap *= 2
            for name, arr in self.rc.items():
                grown = np.zeros((self._rows, self._rc_cap), dtype=np.float64, order="F")
                grown[:, : arr.shape[1]] = arr
                self.rc[name] = grown
            grown_b = np.zeros((self._rows, self._rc_cap), dtype=np.bool_, order="F")
            grown_b[:, : self.has_inventory.shape[1]] = self.has_inventory
            self.has_inventory = grown_b
        self.rc_names.append(rc)
        self.rc_index[rc] = j
        return j

    def _grow(self) -> None:
        rows = self._rows * 2
        for name, (dtype, fill) in SCALARS.items():
            grown = np.full(rows, fill, dtype=dtype)
            grown[: self._rows] = self.cols[name]
            self.cols[name] = grown
        for name, arr in self.rc.items():
            grown2 = np.zeros((rows, self._rc_cap), dtype=np.float64, order="F")
            grown2[: self._rows] = arr
            self.rc[name] = grown2
        grown_b = np.zeros((rows, self._rc_cap), dtype=np.bool_, order="F")
        grown_b[: self._rows] = self.has_inventory
        self.has_inventory = grown_b
        for attr in ("reports_usage", "reports_instances"):
            old = getattr(self, attr)
            new = np.zeros(rows, dtype=np.bool_)
            new[: self._rows] = old
            setattr(self, attr, new)
        for name, arr in self.metrics.items():
            grown_m = np.full(rows, np.nan)
            grown_m[: self._rows] = arr
            self.metrics[name] = grown_m
        self._rows = rows

    # ------------------------------------------------------------------------------------------- queries

    def __len__(self) -> int:
        return self.n

    def __contains__(self, key: NodeKey) -> bool:
        return key in self.row_of

    def keys(self) -> Iterator[NodeKey]:
        for i in range(self.n):
            yield (self.host_names[i], self.node_names[i])

    def row(self, host: str, node: str | None = None) -> int:
        row = self.row_of.get((host, node if node is not None else host))
        if row is None:
            if node is None and host in self.rows_of_host and len(self.rows_of_host[host]) == 1:
                return next(iter(self.rows_of_host[host]))
            raise NotFound(f"no such host {host!r}" + (f" node {node!r}" if node else ""), field="host")
        return row

    def alive(self, now: float | None = None) -> np.ndarray:
        """Nodes whose last report is within ``service_down_time`` (do not modify the result: it is shared)."""
        now = self.clock() if now is None else now
        if self.n < self.patch_min_rows:
            return self.col("updated_at") >= now - self.service_down_time
        return self._liveness.get(self.cols["updated_at"], now - self.service_down_time, n=self.n,
                                  static_revision=self.static_revision, epoch=self.heartbeat_epoch,
                                  journal=self.journal)

    def usage_mask(self, key: Hashable, compute: Callable[[Rows], np.ndarray]) -> np.ndarray:
        """A boolean mask over usage columns, memoized under ``key`` and patched on the rows changed since
        (``compute(rows)`` evaluates it for an index array or ``slice(0, n)``). Do not modify the result."""
        if self.n < self.patch_min_rows:
            return compute(slice(0, self.n))
        return self._usage_masks.get(key, n=self.n, static_revision=self.static_revision, journal=self.journal,
                                     compute=compute)

    def candidate_extreme(self, name: str, column: np.ndarray, mask: np.ndarray, *, highest: bool) -> float | None:
        """max (or min) of the usage column ``name`` (``column`` its live rows) over the rows ``mask`` marks,
        when a shortlist of the column's extreme rows can tell; None means: take a full pass."""
        if self.n < self.patch_min_rows:
            return None
        return self._column_bounds.get(name, column, mask, highest=highest, n=self.n,
                                       static_revision=self.static_revision, journal=self.journal)

    def weighted_sum(self, key: Hashable, terms: list[tuple[np.ndarray, float]],
                     rows: np.ndarray | None = None) -> np.ndarray:
        """``sum(factor * column)`` for ``terms`` of usage columns (live rows), over every row or over ``rows``;
        memoized under ``key`` (naming the columns and factors) and patched on the rows changed since. A new
        array, the caller's to modify."""
        if self.n < self.patch_min_rows:
            total = weighted_sum(terms, slice(0, self.n))
            return total.take(rows) if rows is not None else total
        return self._weighted_sums.get(key, terms, n=self.n, static_revision=self.static_revision,
                                       journal=self.journal, rows=rows)

    def heartbeat(self, rows: np.ndarray, now: float) -> None:
        """``update(HostReport(host))`` for many rows at once: a report naming nothing only says "alive at now"."""
        if not len(rows):
            return
        with self.lock:
            self.cols["updated_at"][rows] = now
            self.cols["usage_version"][rows] += 1
            self.heartbeat_epoch += 1
            self.revision += 1

    def node_caps(self, row: int) -> HostCaps:
        return self.caps.values[int(self.cols["caps_code"][row])]

    def node_traits(self, row: int) -> frozenset[str]:
        return self.traitsets.values[int(self.cols["traits_code"][row])]

    def node_aggregates(self, row: int) -> list[Aggregate]:
        keys = self.aggsets.values[int(self.cols["aggset_code"][row])]
        return [self.aggregates[k] for k in sorted(keys)]

    def factor(self, attribute: str) -> Factor:
        """A node attribute as codes + distinct values: interned ones (capabilities, traits, aggregates) and names."""
        n = self.n
        if attribute in HostCaps.__struct_fields__:
            return Factor(self.col("caps_code"),
                          [getattr(c, attribute) for c in self.caps.values])
        if attribute == "traits":
            return Factor(self.col("traits_code"), list(self.traitsets.values))
        if attribute == "aggregates":
            return Factor(self.col("aggset_code"), list(self.aggsets.values))
        if attribute in ("host", "nodename", "hypervisor_hostname", "uuid", "host_ip"):
            source = {"host": self.host_names, "nodename": self.node_names,
                      "hypervisor_hostname": self.hypervisor_hostnames, "uuid": self.node_uuids,
                      "host_ip": self.host_ips}[attribute]
            return Factor(np.arange(n, dtype=np.int64), source[:n])
        raise KeyError(attribute)  # numbers are filters/hoststate.numeric_attribute's, with Nova's semantics

    def used(self, rc: str) -> np.ndarray:
        j = self.rc_index.get(rc)
        if j is None:
            return np.zeros(self.n)
        return self.rc["reported"][: self.n, j] + self.rc["inflight"][: self.n, j]

    # ------------------------------------------------------------------------------------ aggregate index

    def aggregate_cache(self, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        """Memoize something derived from aggregates/static state until ``static_revision`` moves."""
        # Readers call this without the lock. The (revision, dict) pair is swapped as one object so that a value
        # built from state of revision r can never land in the dict of a later revision (which a separate
        # "reset dict, then set revision" sequence allowed when another thread reset it mid-build).
        rev = self.static_revision
        entry = self._agg_cache_entry
        if entry[0] != rev:
            entry = (rev, {})
            self._agg_cache_entry = entry
        cache = entry[1]
        if key in cache:
            return cache[key]
        value = build()
        if self.static_revision == rev:  # state moved during the build: use the value once, do not keep it
            cache[key] = value
        return value

    def metadata_values(self, key: str) -> list[set[str]]:
        """Per aggregate-set code: the values of metadata ``key`` across those aggregates (empty: not set)."""

        def build() -> list[set[str]]:
            out: list[set[str]] = []
            for aggset in self.aggsets.values:
                values = set()
                for agg_key in aggset:
                    agg = self.aggregates.get(agg_key)
                    if agg is not None and key in agg.metadata:
                        values.add(agg.metadata[key])
                out.append(values)
            return out

        return self.aggregate_cache(("metadata_values", key), build)

    def zones(self) -> list[frozenset[str]]:
        """Per aggregate-set code: the availability zones its aggregates name (empty: none, the default zone).

        The one derivation of a node's zone, for the filters, the Selection and ``describe``: as Nova's
        aggregate_metadata_get_by_host, each ``availability_zone`` value is split on commas and stripped.
        """

        def build() -> list[frozenset[str]]:
            return [frozenset(zone.strip() for value in values for zone in value.split(",") if zone.strip())
                    for values in self.metadata_values("availability_zone")]

        return self.aggregate_cache(("zones",), build)

    def zone(self, row: int) -> str | None:
        """The node's availability zone (None: in no zoned aggregate). Nova's Selection takes any one of a set
        that should have one member; the first in sorted order is the same answer on every replica."""
        zones = self.zones()[int(self.cols["aggset_code"][row])]
        return min(zones) if zones else None

    def metadata_min(self, key: str, number: type[float] | type[int] = float) -> np.ndarray | None:
        """Per live row: the lowest value of metadata ``key``, parsed as ``number``, across the node's aggregates
        (NaN: unset).

        None when no aggregate sets the key at all (the common case: callers skip the work). As Nova's
        validate_num_values does, one value that does not parse voids the node's whole set (NaN: the caller's
        default applies), rather than letting the remaining values decide.
        """
        kind = number.__name__

        def build() -> np.ndarray | None:
            lut = np.full(len(self.aggsets), np.nan)
            found = False
            for code, values in enumerate(self.metadata_values(key)):
                if not values:
                    continue
                try:
                    lut[code] = min(number(value) for value in values)
                    found = True
                except ValueError:
                    log.warning("aggregate metadata %s=%r is not %s; the default applies", key, sorted(values),
                                "an integer" if number is int else "a number")
            return lut if found else None

        def rows() -> np.ndarray | None:
            lut = self.aggregate_cache(("metadata_min", key, kind), build)
            if lut is None:
                return None
            per_row = lut[self.col("aggset_code")]
            # Shared by every caller until static state moves: read-only, so no caller can corrupt another's.
            per_row.flags.writeable = False
            return per_row

        # Memoized per row, not just per aggregate set: aggset codes and the row set are static state, and the
        # ratio filters ask for this on every decision (a 100,000-row gather each time otherwise).
        return self.aggregate_cache(("metadata_min_rows", key, kind), rows)

    def subscribe(self, listener: Callable[[str, Any], None]) -> None:
        """Called (under the lock) with ("host"|"aggregate"|"allocation"|..., object) after each change."""
        self._listeners.append(listener)

    def _changed(self, kind: str, obj: Any, *, static: bool = False) -> None:
        self.revision += 1
        if static:
            self.static_revision += 1
        for listener in self._listeners:
            listener(kind, obj)

    # ------------------------------------------------------------------------------------------- reports

    def update(self, report: HostReport, *, now: float | None = None) -> int:
        """Apply one host report (a full replacement of what it names). Returns the node's row."""
        with self.lock:
            if now is None:
                now = report.reported_at if report.reported_at is not None else self.clock()
            key = (report.host, report.nodename)
            row = self.row_of.get(key)
            if row is not None and report.reported_at is not None \
                    and report.reported_at < self.cols["updated_at"][row]:
                self.stale_reports += 1  # a late report must not roll the node's state or report time back
                return row
            static = False
            if row is None:
                row = self._add_row(report.host, report.nodename)
                static = True
            stats = report.stats
            cols = self.cols
            if stats.uuid is not None:
                self.node_uuids[row] = stats.uuid
            if stats.hypervisor_hostname is not None:
                self.hypervisor_hostnames[row] = stats.hypervisor_hostname
            if stats.host_ip is not None and stats.host_ip != self.host_ips[row]:
                self.host_ips[row] = stats.host_ip
                cols["host_ip4"][row] = _ipv4_int(stats.host_ip)
            for name in ("num_io_ops", "num_instances", "running_vms", "current_workload", "failed_builds"):
                value = getattr(stats, name)
                if value is not None:
                    cols[name][row] = value
            if stats.num_instances is None and stats.instances is not None:
                cols["num_instances"][row] = len(stats.instances)
            if stats.disk_available_least is not None:
                cols["disk_available_least"][row] = stats.disk_available_least
            if stats.service is not None:
                # Enabling or disabling a service is rare: filters may cache on it (ComputeFilter does).
                if (cols["disabled"][row] != stats.service.disabled
                        or cols["forced_down"][row] != stats.service.forced_down):
                    static = True
                cols["disabled"][row] = stats.service.disabled
                cols["forced_down"][row] = stats.service.forced_down
            static |= self._update_caps(row, stats)
            if stats.traits is not None:
                code = self.traitsets.code(frozenset(stats.traits))
                if code != cols["traits_code"][row]:
                    cols["traits_code"][row] = code
                    static = True
            if stats.metrics is not None:
                self._update_metrics(row, stats)
            static |= self._update_inventories(row, stats)
            if stats.instances is not None:
                self._update_instances(row, key, stats.instances, now)
            elif not self.reports_instances[row]:
                self._settle_unlisted(row, key, now)
            self._refresh_load(row)
            self._refresh_free(row)
            cols["updated_at"][row] = now
            self._touched(row)
            self._changed("host", key, static=static)
            return row

    def _add_row(self, host: str, node: str) -> int:
        if self.n >= self._rows:
            self._grow()
        row = self.n
        self.n += 1
        self.host_names.append(host)
        self.node_names.append(node)
        self.node_uuids.append(None)
        self.hypervisor_hostnames.append(None)
        self.host_ips.append(None)
        self.instances.append(_NONE)
        self.reported_instances.append(frozenset())
        self.row_of[(host, node)] = row
        self.rows_of_host.setdefault(host, set()).add(row)
        # Rows at and beyond n are always pristine (filled when allocated, reset when a removal frees one), so a
        # new row needs no reset here: this is the cold-start path, once per node.
        self.cols["aggset_code"][row] = self.aggsets.code(frozenset(self.host_aggregates.get(host, ())))
        # in-flight allocations that outlived a removal of the node come back with it
        for consumer in self.node_allocations.get((host, node), ()):
            alloc = self.allocations[consumer]
            self._add_instances(row, (consumer,))
            if not alloc.confirmed:
                self._add_inflight(row, alloc.resources, +1)
        return row

    def _update_caps(self, row: int, stats: HostStats) -> bool:
        old = self.node_caps(row)
        changes: dict[str, Any] = {}
        if stats.hypervisor_type is not None:
            changes["hypervisor_type"] = stats.hypervisor_type
        if stats.hypervisor_version is not None:
            changes["hypervisor_version"] = stats.hypervisor_version
            self.cols["hypervisor_version"][row] = stats.hypervisor_version
        if stats.cpu_info is not None:
            changes["cpu_info"] = stats.cpu_info
        if stats.supported_instances is not None:
            changes["supported_instances"] = tuple(tuple(x) for x in stats.supported_instances)
        if stats.stats is not None:
            changes["stats"] = stats.stats
        if not changes:
            return False
        new = msgspec.structs.replace(old, **changes)
        code = self.caps.code(new)
        if code == self.cols["caps_code"][row]:
            return False
        self.cols["caps_code"][row] = code
        return True

    def _update_metrics(self, row: int, stats: HostStats) -> None:
        seen = set()
        for metric in stats.metrics or ():
            arr = self.metrics.get(metric.name)
            if arr is None:
                arr = self.metrics[metric.name] = np.full(self._rows, np.nan)
            arr[row] = _metric_value(metric.name, metric.value)
            seen.add(metric.name)
        for name, arr in self.metrics.items():
            if name not in seen:
                arr[row] = np.nan

    def _update_inventories(self, row: int, stats: HostStats) -> bool:
        """Returns True when a static attribute (the set of classes, a min/max/step) changed."""
        static_ratio = False
        given = dict(stats.inventories or {})
        for rc, total_f, used_f, ratio_f in CLASSIC:
            if rc in given:
                inv = given[rc]
                if inv.used is None and getattr(stats, used_f) is not None:
                    given[rc] = msgspec.structs.replace(inv, used=getattr(stats, used_f))
                continue
            total = getattr(stats, total_f)
            j = self.rc_index[rc]
            if total is None:
                # Only the usage or ratio moved: keep the inventory, update what was named.
                if self.has_inventory[row, j]:
                    used = getattr(stats, used_f)
                    if used is not None:
                        self.rc["reported"][row, j] = used
                        self.reports_usage[row] = True
                    ratio = getattr(stats, ratio_f)
                    if ratio is not None:
                        if self.rc["ratio"][row, j] != ratio:
                            static_ratio = True
                        self.rc["ratio"][row, j] = ratio
                continue
            ratio = getattr(stats, ratio_f)
            if ratio is None:
                ratio = self.rc["ratio"][row, j] if self.has_inventory[row, j] else self.default_ratios[rc]
            given[rc] = Inventory(total=total, allocation_ratio=float(ratio), used=getattr(stats, used_f))
        static = static_ratio
        rc_arrays = self.rc
        for rc, inv in given.items():
            j = self._rc_column(rc)
            rc_arrays = self.rc
            max_unit = inv.max_unit if inv.max_unit is not None else inv.total
            # Shape of an inventory (not its usage) changes rarely; caches may depend on it (unit bounds, the
            # aggregate-ratio capacities), so a change moves static_revision.
            if (not self.has_inventory[row, j] or rc_arrays["min_unit"][row, j] != inv.min_unit
                    or rc_arrays["max_unit"][row, j] != max_unit or rc_arrays["step_size"][row, j] != inv.step_size
                    or rc_arrays["total"][row, j] != inv.total or rc_arrays["reserved"][row, j] != inv.reserved
                    or rc_arrays["ratio"][row, j] != inv.allocation_ratio):
                static = True
            self.has_inventory[row, j] = True
            rc_arrays["total"][row, j] = inv.total
            rc_arrays["reserved"][row, j] = inv.reserved
            rc_arrays["min_unit"][row, j] = inv.min_unit
            rc_arrays["max_unit"][row, j] = max_unit
            rc_arrays["step_size"][row, j] = inv.step_size
            rc_arrays["ratio"][row, j] = inv.allocation_ratio
            rc_arrays["reported"][row, j] = inv.used or 0
            if inv.used is not None:
                self.reports_usage[row] = True
        return static

    def _update_instances(self, row: int, key: NodeKey, instances: list[str], now: float) -> None:
        reported = frozenset(instances)
        host = key[0]
        for gone in self.reported_instances[row] - reported:
            if gone not in self.allocations and self.instance_host.get(gone) == host:
                del self.instance_host[gone]
            if gone not in self.allocations:
                self._discard_instance(row, gone)
        for uuid in reported:
            self.instance_host[uuid] = host
        self._add_instances(row, reported)
        self.reported_instances[row] = reported
        self.reports_instances[row] = True
        expired: list[Allocation] = []
        for consumer in list(self.node_allocations.get(key, ())):
            alloc = self.allocations[consumer]
            if alloc.confirmed:
                continue
            if alloc.listed_as in reported:
                alloc.confirmed = True
                self._add_inflight(row, alloc.resources, -1)
            elif alloc.created_at and now - alloc.created_at > self.claim_timeout:
                log.warning("claim of %s on %s/%s unconfirmed after %.0f s: released",
                            consumer, key[0], key[1], now - alloc.created_at)
                expired.append(alloc)
        if expired:
            self.expired_claims += len(expired)
            if self.on_expire is not None:
                self.on_expire(expired)
            else:
                for alloc in expired:
                    self._drop_allocation(alloc.consumer_uuid)

    def _settle_unlisted(self, row: int, key: NodeKey, now: float) -> None:
        """Claims on a node that never lists its instances stop counting in flight after ``claim_timeout``.

        Such a node's reported usage (``vcpus_used`` …) includes an instance once it is built, and nothing says
        when: until ``claim_timeout`` a claim is counted on top (twice once built: safe), after it the build has
        happened or failed and the report is the truth. The allocation itself stays until it is released.
        """
        for consumer in list(self.node_allocations.get(key, ())):
            alloc = self.allocations[consumer]
            if not alloc.confirmed and alloc.created_at and now - alloc.created_at > self.claim_timeout:
                alloc.confirmed = True
                self._add_inflight(row, alloc.resources, -1)
                self.settled_claims += 1

    def _refresh_load(self, row: int) -> None:
        cols = self.cols
        cols["io_ops_load"][row] = cols["num_io_ops"][row] + cols["inflight_instances"][row]
        cols["instances_load"][row] = cols["num_instances"][row] + cols["inflight_instances"][row]

    def _refresh_free(self, row: int) -> None:
        rc = self.rc
        k = len(self.rc_names)
        cap = (rc["total"][row, :k] - rc["reserved"][row, :k]) * rc["ratio"][row, :k]
        rc["capacity"][row, :k] = cap
        rc["free"][row, :k] = cap - rc["reported"][row, :k] - rc["inflight"][row, :k]
        self._refresh_physical_free(row)

    def _refresh_physical_free(self, row: int) -> None:
        """The weighers' free RAM and disk: physical (no allocation ratio), in MB."""
        rc = self.rc
        mem = self.rc_index["MEMORY_MB"]
        disk = self.rc_index["DISK_GB"]
        self.cols["free_ram_mb"][row] = (rc["total"][row, mem] - rc["reserved"][row, mem]
                                         - rc["reported"][row, mem] - rc["inflight"][row, mem])
        free_gb = rc["total"][row, disk] - rc["reserved"][row, disk] - rc["reported"][row, disk]
        least = self.cols["disk_available_least"][row]
        if least == least and least < free_gb:
            # not NaN: as Nova's HostState does, the smaller of the hypervisor's own view and the accounted free
            # space wins (disk_available_least can lag behind or run ahead of the database's figures)
            free_gb = least
        self.cols["free_disk_mb"][row] = (free_gb - rc["inflight"][row, disk]) * 1024.0

    def _add_inflight(self, row: int, resources: dict[str, int], sign: int) -> None:
        known = self.rc_index
        if all(name in known for name in resources):
            # Every claim and release lands here, on every replica: only the named classes' free changes (the
            # capacity does not), so update those alone rather than recompute the row.
            rc = self.rc
            inflight, free, capacity, reported = rc["inflight"], rc["free"], rc["capacity"], rc["reported"]
            for name, amount in resources.items():
                j = known[name]
                held = inflight[row, j] + sign * amount
                inflight[row, j] = held
                free[row, j] = capacity[row, j] - reported[row, j] - held
            self._refresh_physical_free(row)
        else:
            for name, amount in resources.items():
                j = self._rc_column(name)  # may add a class (and grow the arrays)
                self.rc["inflight"][row, j] += sign * amount
            self._refresh_free(row)
        self.cols["inflight_instances"][row] += sign
        self._refresh_load(row)
        self._touched(row)

    def _add_instances(self, row: int, uuids: Iterable[str]) -> None:
        held = self.instances[row]
        if held is _NONE:
            fresh = set(uuids)
            if fresh:
                self.instances[row] = fresh
        else:
            held |= set(uuids)  # type: ignore[operator]

    def _discard_instance(self, row: int, uuid: str) -> None:
        held = self.instances[row]
        if uuid in held:
            held.discard(uuid)  # type: ignore[attr-defined]
            if not held:
                self.instances[row] = _NONE

    def _touched(self, row: int) -> None:
        """After a row's usage or report time is written: a new usage version, and a journal entry (last, so a
        reader that sees the entry sees the values)."""
        self.cols["usage_version"][row] += 1
        self.journal.append(row)

    def remove(self, host: str, node: str | None = None) -> list[NodeKey]:
        """Remove a node (or, without ``node``, every node of the host) and the allocations on it."""
        with self.lock:
            if node is not None:
                keys = [(host, node)] if (host, node) in self.row_of else []
            else:
                keys = [(host, self.node_names[r]) for r in sorted(self.rows_of_host.get(host, ()))]
            if not keys:
                raise NotFound(f"no such host {host!r}" + (f" node {node!r}" if node else ""), field="host")
            for key in keys:
                for consumer in list(self.node_allocations.get(key, ())):
                    self._drop_allocation(consumer)
                self._remove_row(self.row_of[key])
            self._changed("host_deleted", keys, static=True)
            return keys

    def _remove_row(self, row: int) -> None:
        last = self.n - 1
        key = (self.host_names[row], self.node_names[row])
        del self.row_of[key]
        self.rows_of_host[key[0]].discard(row)
        if not self.rows_of_host[key[0]]:
            del self.rows_of_host[key[0]]
        for uuid in self.instances[row]:
            if self.instance_host.get(uuid) == key[0]:
                self.instance_host.pop(uuid, None)
        if row != last:
            moved = (self.host_names[last], self.node_names[last])
            for arr in self.cols.values():
                arr[row] = arr[last]
            for arr in self.rc.values():
                arr[row, :] = arr[last, :]
            self.has_inventory[row, :] = self.has_inventory[last, :]
            self.reports_usage[row] = self.reports_usage[last]
            self.reports_instances[row] = self.reports_instances[last]
            for arr in self.metrics.values():
                arr[row] = arr[last]
            for lst in (self.host_names, self.node_names, self.node_uuids, self.hypervisor_hostnames,
                        self.host_ips, self.instances, self.reported_instances):
                lst[row] = lst[last]  # type: ignore[index]
            self.row_of[moved] = row
            self.rows_of_host[moved[0]].discard(last)
            self.rows_of_host[moved[0]].add(row)
        for lst in (self.host_names, self.node_names, self.node_uuids, self.hypervisor_hostnames,
                    self.host_ips, self.instances, self.reported_instances):
            lst.pop()  # type: ignore[attr-defined]
        self.n -= 1
        self._reset_row(last)

    def _reset_row(self, row: int) -> None:
        """Give a freed row back its never-reported values, so that _add_row can take it as it is."""
        for name, (_, fill) in SCALARS.items():
            self.cols[name][row] = fill
        for arr in self.rc.values():
            arr[row, :] = 0.0
        self.has_inventory[row, :] = False
        self.reports_usage[row] = False
        self.reports_instances[row] = False
        for arr in self.metrics.values():
            arr[row] = np.nan

    # ---------------------------------------------------------------------------------------- aggregates

    def update_aggregate(self, aggregate: Aggregate) -> None:
        with self.lock:
            key = aggregate.key
            old = self.aggregates.get(key)
            old_hosts = set(old.hosts) if old else set()
            new_hosts = set(aggregate.hosts)
            self.aggregates[key] = aggregate
            for host in old_hosts - new_hosts:
                self.host_aggregates.get(host, set()).discard(key)
            for host in new_hosts - old_hosts:
                self.host_aggregates.setdefault(host, set()).add(key)
            self._recode_hosts(old_hosts ^ new_hosts)
            self._changed("aggregate", aggregate, static=True)

    def delete_aggregate(self, aggregate_id: int | str) -> Aggregate:
        with self.lock:
            key = str(aggregate_id)
            old = self.aggregates.pop(key, None)
            if old is None:
                raise NotFound(f"no such aggregate {aggregate_id!r}", field="id")
            for host in old.hosts:
                self.host_aggregates.get(host, set()).discard(key)
            self._recode_hosts(set(old.hosts))
            self._changed("aggregate_deleted", old, static=True)
            return old

    def _recode_hosts(self, hosts: Iterable[str]) -> None:
        for host in hosts:
            code = self.aggsets.code(frozenset(self.host_aggregates.get(host, ())))
            for row in self.rows_of_host.get(host, ()):
                self.cols["aggset_code"][row] = code

    # --------------------------------------------------------------------------------------- allocations

    def fits(self, row: int, resources: dict[str, int], limits: dict[str, float] | None = None) -> str | None:
        """None if the node can take ``resources`` now; else the first resource class that does not fit."""
        rc = self.rc
        for name, amount in resources.items():
            if amount <= 0:
                continue
            j = self.rc_index.get(name)
            if j is None or not self.has_inventory[row, j]:
                return name
            if rc["free"][row, j] < amount - 1e-9:
                return name
            if amount < rc["min_unit"][row, j] or amount > rc["max_unit"][row, j]:
                return name
            if amount % rc["step_size"][row, j]:
                return name
            if limits and name in limits:
                used = rc["reported"][row, j] + rc["inflight"][row, j]
                if used + amount > limits[name] + 1e-9:
                    return name
        return None

    def claim(self, key: NodeKey, allocation: Allocation, *, limits: dict[str, float] | None = None) -> Allocation:
        """Consume ``allocation.resources`` on node ``key`` atomically, or raise ClaimRejected.

        The compare: the node still exists and still has room. A consumer that already holds an allocation gets
        it back.
        """
        with self.lock:
            held = self.allocations.get(allocation.consumer_uuid)
            if held is not None:
                return held
            row = self._row_with_room(key, allocation.resources, limits)
            self._insert_allocation(row, key, allocation)
            self._changed("allocation", allocation)
            return allocation

    def _row_with_room(self, key: NodeKey, resources: dict[str, int], limits: dict[str, float] | None) -> int:
        """The node's row, if it still exists and can take ``resources`` now; else ClaimRejected."""
        row = self.row_of.get(key)
        if row is None:
            raise ClaimRejected(f"{key} is gone")
        missing = self.fits(row, resources, limits)
        if missing is not None:
            raise ClaimRejected(f"{key} has no room for {missing}")
        return row

    def put_allocation(self, allocation: Allocation) -> None:
        """Record an allocation decided elsewhere (another instance's claim arriving through the change feed).

        No capacity check: the store already committed it. Idempotent per consumer.
        """
        with self.lock:
            held = self.allocations.get(allocation.consumer_uuid)
            if held is not None:
                if (held.host, held.nodename) == (allocation.host, allocation.nodename) \
                        and held.resources == allocation.resources and held.confirmed == allocation.confirmed \
                        and held.group == allocation.group and held.migration_uuid == allocation.migration_uuid \
                        and held.instance_uuid == allocation.instance_uuid:
                    # Same accounting; but the record is now the store's: a local claim of ours that happens to
                    # equal it must not be rolled back as ours (rollbacks go by identity).
                    if held is not allocation:
                        allocation.created_at = allocation.created_at or held.created_at
                        self.allocations[allocation.consumer_uuid] = allocation
                    return
                self._drop_allocation(allocation.consumer_uuid)
            self._place_recorded(allocation)
            self._changed("allocation", allocation)

    def _insert_allocation(self, row: int, key: NodeKey, allocation: Allocation) -> None:
        if not allocation.created_at:
            allocation.created_at = self.clock()
        listed = allocation.listed_as in self.reported_instances[row]
        if listed and allocation.migration_uuid:
            # A moved instance the node already lists (a resize on the same host, a revert's source): only a
            # report made after the move counts what it now holds; until then it is in flight.
            listed = bool(self.cols["updated_at"][row] > allocation.created_at)
        # On a node that never lists instances, a claim older than the timeout is settled, as _settle_unlisted
        # would have done (a replica loading a snapshot).
        settled = not self.reports_instances[row] \
            and self.cols["updated_at"][row] - allocation.created_at > self.claim_timeout
        if listed or settled:
            allocation.confirmed = True
        self.allocations[allocation.consumer_uuid] = allocation
        self.node_allocations.setdefault(key, set()).add(allocation.consumer_uuid)
        if allocation.group:
            self.group_allocations.setdefault(allocation.group, set()).add(allocation.consumer_uuid)
        self._add_instances(row, (allocation.consumer_uuid,))
        self.instance_host[allocation.consumer_uuid] = key[0]
        if not allocation.confirmed:
            self._add_inflight(row, allocation.resources, +1)
        else:
            self._touched(row)

    def move(self, key: NodeKey, allocation: Allocation, source: Allocation, *,
             limits: dict[str, float] | None = None) -> Allocation:
        """Move ``source``'s consumer to node ``key`` as ``allocation``, holding the source for the migration.

        One compare-and-set: the consumer still holds ``source``, the migration holds nothing yet, the node has
        room for the whole new allocation (the source keeps its resources until confirm or revert, as Nova's
        migration-based allocations do, also on the same node). Returns the migration's allocation.
        """
        migration = allocation.migration_uuid
        assert migration is not None
        with self.lock:
            if self.allocations.get(source.consumer_uuid) is not source:
                raise SourceMoved(f"{source.consumer_uuid} moved meanwhile")
            if migration in self.allocations:  # a twin request made this move: answer with it
                raise SourceMoved(f"migration {migration} holds an allocation already")
            row = self._row_with_room(key, allocation.resources, limits)
            held = msgspec.structs.replace(source, consumer_uuid=migration, migration_uuid=None,
                                           instance_uuid=source.consumer_uuid, confirmed=False)
            self._drop_allocation(source.consumer_uuid)
            self._place_recorded(held)
            self._insert_allocation(row, key, allocation)
            self._changed("allocation", allocation)
            self._changed("allocation", held)
            return held

    def unmove(self, allocation: Allocation, held: Allocation, source: Allocation) -> bool:
        """Undo ``move`` while nothing else has replaced its allocations (a failed commit). Whether it did."""
        with self.lock:
            if self.allocations.get(allocation.consumer_uuid) is not allocation:
                return False
            self._drop_allocation(allocation.consumer_uuid)
            if self.allocations.get(held.consumer_uuid) is held:
                self._drop_allocation(held.consumer_uuid)
            source.confirmed = False  # derived again on insertion
            self._place_recorded(source)
            self._changed("allocation", source)
            return True

    def migration(self, migration_uuid: str) -> Allocation:
        """The allocation holding a move's source, under the migration's UUID."""
        held = self.allocations.get(migration_uuid)
        if held is None:
            raise NotFound(f"no move in progress under migration {migration_uuid!r}", field="migration_uuid")
        if held.instance_uuid is None:
            raise Conflict(f"{migration_uuid!r} is a consumer, not a migration", field="migration_uuid")
        return held

    def revertible(self, migration_uuid: str) -> tuple[Allocation, Allocation]:
        """(the source held, the instance's allocation) of a move that can still be reverted: the instance is
        where this move put it (not released, not moved on by a later move)."""
        held = self.migration(migration_uuid)
        moved = self.allocations.get(held.instance_uuid or "")
        if moved is None or moved.migration_uuid != migration_uuid:
            raise Conflict(f"instance {held.instance_uuid!r} no longer holds the allocation of migration "
                           f"{migration_uuid!r}; confirm drops its source", field="migration_uuid")
        return held, moved

    def reverted(self, held: Allocation) -> Allocation:
        """The instance's allocation a revert gives back: the source, as the migration holds it."""
        assert held.instance_uuid is not None
        return msgspec.structs.replace(held, consumer_uuid=held.instance_uuid, instance_uuid=None,
                                       migration_uuid=None, confirmed=False)

    def confirm_move(self, migration_uuid: str) -> Allocation:
        """Drop the source a move held (returned); the instance keeps its new allocation, if it still has one."""
        with self.lock:
            return self.release(self.migration(migration_uuid).consumer_uuid)

    def revert_move(self, migration_uuid: str) -> Allocation:
        """Give the instance its source back and drop the destination; returns the restored allocation."""
        with self.lock:
            held, _ = self.revertible(migration_uuid)
            restored = self.reverted(held)
            self.release(held.consumer_uuid)
            self.put_allocation(restored)
            return restored

    def _place_recorded(self, allocation: Allocation) -> None:
        """Insert an allocation without a capacity check (it is held already, under another consumer)."""
        key = (allocation.host, allocation.nodename)
        row = self.row_of.get(key)
        if row is None:
            self.allocations[allocation.consumer_uuid] = allocation
            self.node_allocations.setdefault(key, set()).add(allocation.consumer_uuid)
            if allocation.group:
                self.group_allocations.setdefault(allocation.group, set()).add(allocation.consumer_uuid)
        else:
            self._insert_allocation(row, key, allocation)

    def release(self, consumer_uuid: str) -> Allocation:
        with self.lock:
            if consumer_uuid not in self.allocations:
                raise NotFound(f"no allocation for consumer {consumer_uuid!r}", field="consumer_uuid")
            alloc = self._drop_allocation(consumer_uuid)
            self._changed("allocation_deleted", alloc)
            return alloc

    def _drop_allocation(self, consumer_uuid: str) -> Allocation:
        alloc = self.allocations.pop(consumer_uuid)
        if alloc.group:
            members = self.group_allocations.get(alloc.group)
            if members is not None:
                members.discard(consumer_uuid)
                if not members:
                    del self.group_allocations[alloc.group]
        key = (alloc.host, alloc.nodename)
        holders = self.node_allocations.get(key)
        if holders is not None:
            holders.discard(consumer_uuid)
            if not holders:
                del self.node_allocations[key]  # an empty set per node that ever held a claim adds up at scale
        row = self.row_of.get(key)
        if row is not None:
            if consumer_uuid not in self.reported_instances[row]:
                self._discard_instance(row, consumer_uuid)
                if self.instance_host.get(consumer_uuid) == alloc.host:
                    del self.instance_host[consumer_uuid]
            if not alloc.confirmed:
                self._add_inflight(row, alloc.resources, -1)
        return alloc

    # ---------------------------------------------------------------------------------- instance info

    def set_instances(self, host: str, instances: Iterable[str], *, replace: bool) -> None:
        """Nova's update/sync_instance_info: what runs on a host, for the affinity filters."""
        with self.lock:
            rows = self.rows_of_host.get(host)
            if not rows:
                raise NotFound(f"no such host {host!r}", field="host")
            row = min(rows)
            new = set(instances)
            if replace:
                for r in rows:
                    for uuid in self.instances[r] - new:
                        if uuid not in self.allocations and self.instance_host.get(uuid) == host:
                            del self.instance_host[uuid]
                    kept = {u for u in self.instances[r] if u in new or u in self.allocations}
                    self.instances[r] = kept or _NONE
            self._add_instances(row, new)
            for uuid in new:
                self.instance_host[uuid] = host
            self._changed("instances", host)

    def delete_instance(self, host: str, instance_uuid: str) -> None:
        with self.lock:
            rows = self.rows_of_host.get(host)
            if not rows:
                raise NotFound(f"no such host {host!r}", field="host")
            found = False
            for r in rows:
                if instance_uuid in self.instances[r]:
                    self._discard_instance(r, instance_uuid)
                    found = True
            if not found:
                raise NotFound(f"instance {instance_uuid!r} is not on host {host!r}", field="instance_uuid")
            if self.instance_host.get(instance_uuid) == host:
                del self.instance_host[instance_uuid]
            self._changed("instances", host)

    # ------------------------------------------------------------------------------------------ summaries

    def describe(self, row: int) -> dict[str, Any]:
        """One node as plain data (for the API and the CLI)."""
        caps = self.node_caps(row)
        inventories = {}
        for rc, j in self.rc_index.items():
            if not self.has_inventory[row, j]:
                continue
            inventories[rc] = {
                "total": int(self.rc["total"][row, j]), "reserved": int(self.rc["reserved"][row, j]),
                "min_unit": int(self.rc["min_unit"][row, j]), "max_unit": int(self.rc["max_unit"][row, j]),
                "step_size": int(self.rc["step_size"][row, j]), "allocation_ratio": float(self.rc["ratio"][row, j]),
                "reported_used": int(self.rc["reported"][row, j]), "in_flight": int(self.rc["inflight"][row, j]),
                "capacity": float(self.rc["capacity"][row, j]), "free": float(self.rc["free"][row, j]),
            }
        now = self.clock()
        aggs = self.node_aggregates(row)
        return {
            "host": self.host_names[row], "nodename": self.node_names[row], "uuid": self.node_uuids[row],
            "hypervisor_hostname": self.hypervisor_hostnames[row], "host_ip": self.host_ips[row],
            "hypervisor_type": caps.hypervisor_type, "hypervisor_version": caps.hypervisor_version,
            "up": bool(self.cols["updated_at"][row] >= now - self.service_down_time),
            "disabled": bool(self.cols["disabled"][row]), "forced_down": bool(self.cols["forced_down"][row]),
            "updated_at": float(self.cols["updated_at"][row]),
            "num_io_ops": int(self.cols["num_io_ops"][row]), "num_instances": int(self.cols["num_instances"][row]),
            "failed_builds": int(self.cols["failed_builds"][row]),
            "free_ram_mb": float(self.cols["free_ram_mb"][row]), "free_disk_mb": float(self.cols["free_disk_mb"][row]),
            "inventories": inventories, "traits": sorted(self.node_traits(row)),
            "aggregates": [a.key for a in aggs],
            "availability_zone": self.zone(row),
            "instances": sorted(self.instances[row]),
            "allocations": sorted(self.node_allocations.get((self.host_names[row], self.node_names[row]), ())),
        }


# Nova keeps these as hundredths in an integer field: its scheduler reads a compute node's metrics JSON, scales
# these names by 100 and truncates every value to an integer (nova.objects.monitor_metric), and its
# MetricsWeigher weighs those integers. Gantt stores what Nova's weigher would see.
_PERCENT_METRICS = frozenset({"cpu.user.percent", "cpu.kernel.percent", "cpu.idle.percent", "cpu.iowait.percent",
                              "cpu.percent"})


def _metric_value(name: str, value: float) -> float:
    return float(int(value * 100 if name in _PERCENT_METRICS else value))


def _ipv4_int(ip: str) -> int:
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


prepare_types(globals())  # build msgspec type info before any thread decodes (see model.prepare_types)
