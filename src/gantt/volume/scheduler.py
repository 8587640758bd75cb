"""VolumeScheduler: Cinder's filter scheduler over a PoolTable (filters, then weighers, best first).

``passes`` is the conjunction of the enabled filters over the live pools; ``select`` weighs the pools that pass
and ranks them as Cinder's OrderedHostWeightHandler does (weight descending, ties in table order). The caller
claims the first pick with ``PoolTable.claim`` (or through its store's compare-and-set) and may offer the
rest as alternates. The scheduler keeps no state between requests beyond its filters' memos.
"""

from __future__ import annotations

import numpy as np

from gantt.config import VolumeOptions
from gantt.model import Explanation, FilterStep, InvalidRequest, NoValidHost, emptied_by
from gantt.volume.filters import FILTERS, CapacityFilter, Request, VolumeFilter
from gantt.volume.model import Pick, VolumeRequest
from gantt.volume.table import PoolTable
from gantt.volume.weighers import WEIGHERS, VolumeWeigher

_CAPACITY = CapacityFilter()


class VolumeScheduler:
    def __init__(self, options: VolumeOptions | None = None) -> None:
        self.options = options or VolumeOptions()
        self.filters: list[VolumeFilter] = [
            FILTERS.find(name)() for name in self.options.scheduler_default_filters]
        self.weighers: list[VolumeWeigher] = [
            WEIGHERS.find(name)(self.options) for name in self.options.scheduler_default_weighers]

    def masks(self, table: PoolTable, request: VolumeRequest | Request) -> dict[str, np.ndarray]:
        """Each enabled filter's own verdict over every row (for explanations and the parity suite)."""
        req = request if isinstance(request, Request) else Request(request)
        n = table.n
        out = {}
        for f in self.filters:
            mask = f.mask(table, req)
            out[f.name] = (np.ones(n, dtype=np.bool_) if mask is None else mask) & table.live[:n]
        return out

    def passes(self, table: PoolTable, request: VolumeRequest | Request) -> np.ndarray:
        req = request if isinstance(request, Request) else Request(request)
        out = table.live[:table.n].copy()
        for f in self.filters:
            if not f.narrows:
                mask = f.mask(table, req)
                if mask is not None:
                    out &= mask
        # the filters that compute on the survivors only, the ones that evaluate Python per pool last
        for f in sorted((f for f in self.filters if f.narrows), key=lambda f: f.per_pool):
            mask = f.mask(table, req, out)
            if mask is not None:
                out &= mask
        return out

    def explain(self, table: PoolTable, request: VolumeRequest | Request) -> Explanation:
        """Filter by filter, in the configured order, how many live pools each one removed."""
        masks = self.masks(table, request)
        alive = table.live[:table.n].copy()
        steps = []
        for name, mask in masks.items():
            before = int(alive.sum())
            alive &= mask
            steps.append(FilterStep(name=name, before=before, removed=before - int(alive.sum()),
                                    after=int(alive.sum())))
        # the filter that emptied the list (as the compute side reports it); else the one that removed the most
        worst = max(steps, key=lambda s: s.removed, default=None)
        reason = emptied_by(steps) or (worst.name if worst is not None and worst.removed else "")
        return Explanation(hosts=int(table.live[:table.n].sum()), steps=steps, reason=reason)

    def fits(self, table: PoolTable, request: VolumeRequest, row: int) -> bool:
        """Does pool ``row`` still take the volume (CapacityFilter's verdict on it alone)? For a claim that
        refreshed the pool after a conflict: the choice stands only if this holds."""
        within = np.zeros(table.n, dtype=np.bool_)
        within[row] = bool(table.live[row])
        mask = _CAPACITY.mask(table, Request(request), within)
        return bool(within[row] if mask is None else mask[row])

    def weigh(self, table: PoolTable, request: VolumeRequest | Request,
              rows: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Total weight of each candidate row, and each weigher's normalized value (before its multiplier)."""
        req = request if isinstance(request, Request) else Request(request)
        total = np.zeros(len(rows))
        parts = {}
        for w in self.weighers:
            values = w.normalized(table, req, rows)
            parts[w.name] = values
            total += w.multiplier * values
        return total, parts

    def select(self, table: PoolTable, request: VolumeRequest, *, limit: int = 1) -> list[Pick]:
        """The best ``limit`` pools, best first; NoValidHost when none passes."""
        req = Request(request)
        backend = resource_backend(table, request)
        rows = np.flatnonzero(self.passes(table, req))
        if len(rows) == 0:
            explanation = self.explain(table, req)
            raise NoValidHost(explanation.summary().replace("valid host", "valid pool"), explanation)
        weights, _ = self.weigh(table, req, rows)
        if backend is not None:
            # As Cinder: weighed among every candidate, then only the resource's backend (or pool) kept
            keep = np.array([_on_backend(table, int(r), backend) for r in rows], dtype=np.bool_)
            rows, weights = rows[keep], weights[keep]
            if len(rows) == 0:
                raise NoValidHost(f"no pool of {backend} passes the filters")
        if limit == 1:
            best = int(np.argmax(weights))  # the first of the best, as a stable descending sort gives
            order = np.array([best])
        else:
            order = np.argsort(-weights, kind="stable")[:limit]
        picks = []
        for index in order:
            report = table.report(int(rows[index]))
            picks.append(Pick(host=report.host, pool=report.pool_name, weight=float(weights[index])))
        return picks


def resource_backend(table: PoolTable, request: VolumeRequest) -> str | None:
    """Where the volume must go (Cinder's request_spec.resource_backend), or None: anywhere."""
    if request.resource_backend:
        return request.resource_backend
    if request.source_volid:
        row = table.where(request.source_volid)
        if row is None:
            raise InvalidRequest(f"source volume {request.source_volid} is not known to this namespace; give "
                                 "resource_backend (the backend or pool it lives on)", field="$.source_volid")
        return table.report(row).backend_id
    for field in ("snapshot_id", "group_id", "consistencygroup_id"):
        if getattr(request, field):
            raise InvalidRequest(f"{field} needs resource_backend: Cinder's API finds the backend of the "
                                 f"{field.removesuffix('_id')}; Gantt does not hold those records",
                                 field=f"$.{field}")
    return None


def _on_backend(table: PoolTable, row: int, backend: str) -> bool:
    pool_id = table.report(row).backend_id
    return pool_id == backend if "#" in backend else pool_id.partition("#")[0] == backend
