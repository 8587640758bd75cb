"""PoolTable: every pool's state as numpy columns, updated incrementally, claimed as Cinder consumes.

One row per pool (``host#pool``). A report replaces the row's figures (as Cinder's PoolState takes a backend's
periodic report); a claim consumes from them exactly as Cinder's ``consume_from_volume`` does (allocated and
provisioned GB grow by the volume's size; free GB shrinks unless the pool says 'infinite' or 'unknown'), so the
next decision sees the volume at once. A release gives back what a claim took, as long as no report has arrived
for the pool since the claim (a later report already counts, or no longer counts, the volume itself).

Capacities Cinder lets a backend state as 'infinite' or 'unknown' keep that status in a kind column beside the
number (``INFINITE`` / ``UNKNOWN``; ``NONE`` for a free capacity the report left out as null).

Volumes per pool (VolumeNumberWeigher) and where each volume lives (SameBackendFilter, DifferentBackendFilter)
come from the claims the table holds: ``claim`` / ``place`` record them, ``release`` forgets them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from gantt.volume.model import BackendReport, PoolReport

NUMBER, INFINITE, UNKNOWN, NONE = 0, 1, 2, 3
_KINDS = {"infinite": INFINITE, "unknown": UNKNOWN, None: NONE}
INITIAL_AUTO_MOSR = 20.0  # Cinder's ratio for an 'auto' pool that has provisioned nothing yet
MISSING = object()  # a capability a pool does not report


def max_over_subscription_ratio(caps: dict[str, Any], default: float | str) -> float:
    """Cinder's calculate_max_over_subscription_ratio: the ratio a pool's report implies."""
    if not caps.get("thin_provisioning_support", False):
        return 1.0
    total = caps.get("total_capacity_gb", 0)
    free = caps.get("free_capacity_gb", 0)
    if total in ("infinite", "unknown") or free in ("infinite", "unknown"):
        return 1.0
    ratio = caps.get("max_over_subscription_ratio") or default
    if ratio == "auto":
        provisioned = caps.get("provisioned_capacity_gb", caps.get("allocated_capacity_gb", 0))
        if provisioned != 0:
            return 1 + float(provisioned) / float(total - free + 1)
        return INITIAL_AUTO_MOSR
    return float(ratio)


@dataclass(slots=True)
class Held:
    """A volume the table knows on a pool: its size, and whether its consumption is still on top of the report."""

    row: int
    size: int
    in_flight: bool
    at: float | None = None  # when it was claimed: a pool report taken after that counts it (Cinder's rule)


class PoolTable:
    """Columns over pool rows; removed rows are reused. ``live`` marks rows that hold a pool."""

    def __init__(self, max_over_subscription_ratio: float | str = 20.0, capacity: int = 64) -> None:
        self.default_ratio = max_over_subscription_ratio
        self.n = 0
        self.rows: dict[tuple[str, str], int] = {}
        self.reports: list[PoolReport | None] = []
        self.volumes: dict[str, Held] = {}
        self._free_rows: list[int] = []
        self.az_names: dict[str, int] = {}
        self.host_pools: dict[str, set[str]] = {}
        self.revision = 0  # moves with every change; a decision's caches key on it
        self.static_revision = 0  # moves when a pool reports or goes: what capabilities-derived caches key on
        self._factors: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray, list[Any], dict[Any, int]]] = {}
        self._alloc(capacity)

    def _alloc(self, capacity: int) -> None:
        def grow(old: np.ndarray | None, dtype: Any, fill: Any) -> np.ndarray:
            new = np.full(capacity, fill, dtype=dtype)
            if old is not None:
                new[:len(old)] = old
            return new

        get = self.__dict__.get
        self.live = grow(get("live"), np.bool_, False)
        self.total = grow(get("total"), np.float64, 0.0)
        self.total_kind = grow(get("total_kind"), np.int8, NUMBER)
        self.free = grow(get("free"), np.float64, 0.0)
        self.free_kind = grow(get("free_kind"), np.int8, NUMBER)
        self.allocated = grow(get("allocated"), np.float64, 0.0)
        self.provisioned = grow(get("provisioned"), np.float64, 0.0)
        self.reserved = grow(get("reserved"), np.float64, 0.0)
        self.ratio = grow(get("ratio"), np.float64, 1.0)
        self.thin = grow(get("thin"), np.bool_, False)
        self.thick = grow(get("thick"), np.bool_, False)
        self.volume_count = grow(get("volume_count"), np.int64, 0)
        self.az = grow(get("az"), np.int32, -1)  # code into az_names
        self.generation = grow(get("generation"), np.int64, 0)
        self.capacity = capacity

    # -- rows -------------------------------------------------------------------------------------------------

    def row(self, host: str, pool: str) -> int | None:
        return self.rows.get((host, pool))

    def report(self, row: int) -> PoolReport:
        report = self.reports[row]
        assert report is not None, f"row {row} holds no pool"
        return report

    def capabilities(self, row: int) -> dict[str, Any]:
        return self.report(row).capabilities

    def apply(self, report: PoolReport) -> int:
        """Take a pool's report (a full replacement of its figures); returns its row."""
        key = (report.host, report.pool_name)
        row = self.rows.get(key)
        if row is None:
            row = self._free_rows.pop() if self._free_rows else self.n
            if row >= self.capacity:
                self._alloc(max(64, self.capacity * 2))
            self.n = max(self.n, row + 1)
            while len(self.reports) < self.n:
                self.reports.append(None)
            self.rows[key] = row
            self.host_pools.setdefault(report.host, set()).add(report.pool_name)
            self.volume_count[row] = sum(1 for h in self.volumes.values() if h.row == row)
        caps = report.capabilities
        self.reports[row] = report
        self.live[row] = not report.service.disabled
        self.total[row], self.total_kind[row] = _capacity(caps.get("total_capacity_gb", 0))
        self.free[row], self.free_kind[row] = _capacity(caps.get("free_capacity_gb", 0))
        self.allocated[row] = caps.get("allocated_capacity_gb", 0)
        self.provisioned[row] = caps.get("provisioned_capacity_gb", self.allocated[row])
        self.reserved[row] = caps.get("reserved_percentage", 0)
        self.thin[row] = bool(caps.get("thin_provisioning_support", False))
        self.thick[row] = bool(caps.get("thick_provisioning_support", False))
        self.ratio[row] = max_over_subscription_ratio(caps, self.default_ratio)
        zone = report.service.availability_zone
        self.az[row] = self.az_names.setdefault(zone, len(self.az_names))
        self.generation[row] += 1
        self.static_revision += 1
        for held in self.volumes.values():
            if held.row == row:
                # The report speaks for every volume claimed before it was taken (Cinder's rule); one claimed
                # since is not in its figures yet, and still consumes on top of them.
                held.in_flight = (held.at is not None and report.reported_at is not None
                                  and held.at > report.reported_at)
                if held.in_flight:
                    self.consume(row, held.size)
        self.revision += 1
        return row

    def touch(self, host: str, pool: str, at: float) -> bool:
        """The pool reported again at ``at`` with the very figures it holds (the store's touch): a report like
        any other (Cinder's scheduler takes every newer report whole), so the volumes claimed before ``at`` are
        now counted by the pool's figures and stop consuming on top of them. False: no such pool."""
        row = self.rows.get((host, pool))
        if row is None:
            return False
        report = self.report(row)
        if report.reported_at is not None and report.reported_at >= at:
            return True
        self.reports[row] = msgspec.structs.replace(report, reported_at=at)
        for held in self.volumes.values():
            if held.row == row and held.in_flight and (held.at is None or held.at <= at):
                held.in_flight = False
                self.consume(row, -held.size)
        self.revision += 1
        return True

    def apply_backend(self, report: BackendReport, reported_at: float | None = None) -> list[int]:
        """Take a backend's whole report: its pools applied, and its pools that the report no longer lists
        removed (Cinder's update_pools drops them from its cache). Returns the rows of the listed pools."""
        pools = report.pool_reports(reported_at)
        listed = {p.pool_name for p in pools}
        for pool in self.host_pools.get(report.host, set()) - listed:
            self.remove(report.host, pool)
        return [self.apply(p) for p in pools]

    def remove(self, host: str, pool: str) -> bool:
        """Forget a pool (its backend stopped reporting it). Volumes recorded on it are forgotten too."""
        row = self.rows.pop((host, pool), None)
        if row is None:
            return False
        pools = self.host_pools.get(host, set())
        pools.discard(pool)
        if not pools:
            self.host_pools.pop(host, None)
        self.reports[row] = None
        self.generation[row] += 1
        self.live[row] = False
        self.az[row] = -1
        self.volume_count[row] = 0
        for volume in [v for v, h in self.volumes.items() if h.row == row]:
            del self.volumes[volume]
        self._free_rows.append(row)
        self.revision += 1
        self.static_revision += 1
        return True

    # -- claims -----------------------------------------------------------------------------------------------

    def claim(self, row: int, volume_id: str, size: int, at: float | None = None) -> None:
        """Consume ``size`` GB on ``row`` for a new volume, as Cinder's consume_from_volume does. ``at``: when it
        was claimed; a claim older than the pool's report is already in the report's figures (``place``), so
        the table's state depends on the reports and claims it holds, not on the order they arrived in."""
        if volume_id in self.volumes:
            raise ValueError(f"volume {volume_id} is already placed")
        if not _after(at, self.report(row).reported_at):
            self.place(row, volume_id, size)
            self.volumes[volume_id].at = at
            return
        self.consume(row, size)
        self.volumes[volume_id] = Held(row, size, True, at)
        self.volume_count[row] += 1

    def place(self, row: int, volume_id: str, size: int) -> None:
        """Record a volume the pool's report already counts (no consumption): a replica rebuilt from a store."""
        if volume_id in self.volumes:
            raise ValueError(f"volume {volume_id} is already placed")
        self.volumes[volume_id] = Held(row, size, False)
        self.volume_count[row] += 1
        self.revision += 1

    def consume(self, row: int, size: float) -> None:
        self.allocated[row] += size
        self.provisioned[row] += size
        if self.free_kind[row] == NUMBER:
            self.free[row] -= size
        self.revision += 1

    def release(self, volume_id: str) -> bool:
        """Forget a volume; give back its consumption if no report came for its pool since it was claimed."""
        held = self.volumes.pop(volume_id, None)
        if held is None:
            return False
        self.volume_count[held.row] -= 1
        if held.in_flight:
            self.consume(held.row, -held.size)
        self.revision += 1
        return True

    def factor(self, scope: tuple[str, ...]) -> tuple[np.ndarray, list[Any]]:
        """The capability at ``scope`` (keys below the pool's capabilities) of every row, as codes into its
        distinct values (-1 where a row holds no pool; ``MISSING`` among the values where a key is absent or the
        value has no keys), so a requirement on it is evaluated once per distinct value. Kept across decisions
        and brought up to date row by row: only the pools that reported since are read again."""
        n = self.n
        generation = self.generation[:n]
        cached = self._factors.get(scope)
        if cached is None:
            values: list[Any] = []
            index: dict[Any, int] = {}
            seen, codes = np.zeros(0, np.int64), np.zeros(0, np.int32)
        else:
            seen, codes, values, index = cached
        if len(seen) < n:
            seen = np.concatenate([seen, np.full(n - len(seen), -1, np.int64)])
            codes = np.concatenate([codes, np.full(n - len(codes), -1, np.int32)])
        stale = np.flatnonzero(seen != generation)
        if len(stale):
            codes = codes.copy()
            for row in stale.tolist():
                codes[row] = self._code(row, scope, values, index)
            seen = generation.copy()
            if len(values) > 4 * max(64, n):  # values no row holds any more pile up: start afresh
                self._factors.pop(scope, None)
                return self.factor(scope) if cached is not None else (codes, values)
            if len(self._factors) > 64:
                self._factors.clear()
            self._factors[scope] = (seen, codes, values, index)
        return codes, values

    def _code(self, row: int, scope: tuple[str, ...], values: list[Any], index: dict[tuple[str, str], int]) -> int:
        report = self.reports[row]
        if report is None:
            return -1
        value: Any = report.capabilities
        for part in scope:
            try:
                value = value[part]
            except (TypeError, KeyError, IndexError):
                value = MISSING
                break
        key = (type(value).__name__, repr(value))
        code = index.get(key)
        if code is None:
            code = index[key] = len(values)
            values.append(value)
        return code

    def where(self, volume_id: str) -> int | None:
        held = self.volumes.get(volume_id)
        return None if held is None else held.row

def _after(claimed_at: float | None, reported_at: float | None) -> bool:
    """A claim made at ``claimed_at`` is not yet in figures reported at ``reported_at`` (an unknown time: it is
    not, the safe side; the pool's next report counts it)."""
    return claimed_at is None or reported_at is None or claimed_at > reported_at


def _capacity(value: Any) -> tuple[float, int]:
    kind = _KINDS.get(value, NUMBER) if value is None or isinstance(value, str) else NUMBER
    return (float(value) if kind == NUMBER else np.nan), kind


_STATE_DEFAULTS: tuple[tuple[str, Any], ...] = (
    ("volume_backend_name", None), ("vendor_name", None), ("driver_version", None), ("storage_protocol", None),
    ("QoS_support", False), ("reserved_percentage", 0), ("thin_provisioning_support", False),
    ("thick_provisioning_support", False), ("multiattach", False), ("filter_function", None),
    ("goodness_function", 0),
)


def pool_state(table: PoolTable, row: int) -> dict[str, Any]:
    """The attributes of Cinder's PoolState for ``row`` (what JsonFilter's ``$name`` and the expression
    language's ``stats.*`` read), with the usage figures as claims left them."""
    report = table.report(row)
    caps = report.capabilities
    state: dict[str, Any] = {key: caps.get(key, default) for key, default in _STATE_DEFAULTS}

    def figure(key: str, column: np.ndarray, default: Any) -> Any:
        original = caps.get(key, default)
        if isinstance(original, str) or original is None:
            return original
        value = float(column[row])
        return original if original == value else value

    state["total_capacity_gb"] = figure("total_capacity_gb", table.total, 0)
    state["free_capacity_gb"] = figure("free_capacity_gb", table.free, 0)
    state["allocated_capacity_gb"] = figure("allocated_capacity_gb", table.allocated, 0)
    state["provisioned_capacity_gb"] = figure("provisioned_capacity_gb", table.provisioned,
                                              state["allocated_capacity_gb"])
    state["max_over_subscription_ratio"] = float(table.ratio[row])
    cluster = report.service.cluster_name
    state.update(host=report.pool_host, cluster_name=f"{cluster}#{report.pool_name}" if cluster else None,
                 backend_id=report.backend_id, pool_name=report.pool_name, capabilities=caps, pools={},
                 service={"availability_zone": report.service.availability_zone,
                          "disabled": report.service.disabled},
                 updated=report.reported_at)
    return state
