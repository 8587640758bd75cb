"""The masks of filters that read static state only, kept across decisions: per filter and request class,
and their AND per request class. Keyed on the table's static revision and row count, so a mask never outlives
what it was computed from."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from gantt.compute.filters.base import Filter
from gantt.compute.request import RequestContext
from gantt.compute.state.table import HostTable
from gantt.compute.stats import EngineStats
from gantt.config import Config

# Request classes whose combined static mask is kept: one byte per row each (32 MB at 1,000,000 rows).
COMBINED_CLASSES = 32
# Aggregate sets beyond which a class's rows are not bounded per set (``allowed_codes``): the per-set block maxima
# of a kept sum take one float per set and block of rows.
MAX_CODES = 128
_MISSING: Any = object()  # a cache's answer for a key it does not hold (None is a mask: every row passes)

# A static filter's masks for one request class, and their AND (None: none of them removes anything)
StaticClass = tuple[tuple[np.ndarray | None, ...], np.ndarray | None]


class MaskCache:
    """The static filters' masks and their ANDs, for one ranker."""

    def __init__(self, table: HostTable, config: Config, stats: EngineStats, filters: Sequence[Filter]) -> None:
        self.table = table
        self.config = config
        self.stats = stats
        self._masks: OrderedDict[tuple[Any, ...], np.ndarray | None] = OrderedDict()
        self._lock = threading.Lock()
        # The AND of every static filter's mask, per request class (the tuple of those masks' cache keys): at
        # 1,000,000 rows each AND is a pass of ~50 µs, and a dozen static filters are combined per decision.
        # Keyed by the masks themselves (their identities, each entry holding its masks so that no identity is
        # reused while it lives), not by their cache keys: a filter keyed by the request's project gives every
        # project no aggregate names one shared mask, and keying by project made 500 projects 500 classes.
        self._combined: OrderedDict[tuple[Any, ...], tuple[list[np.ndarray], np.ndarray | None]] = OrderedDict()
        # The static filters' masks and their AND per request class (the tuple of their cache keys), for the
        # first instance of a request that forces no host: one lookup instead of one per static filter (each a
        # key, a lock and an LRU move). Cleared when the static revision moves, so that no entry pins the masks
        # of an earlier revision; as small as the kept ANDs, whose arrays its entries share.
        self.static_filters = tuple(f for f in filters if f.static and not f.refines)
        self.classes: OrderedDict[tuple[Hashable, ...], StaticClass] = OrderedDict()
        self._classes_revision = -1
        # Per static mask (by identity, the entry holding it): the aggregate-set codes of the rows it keeps
        self._codes: OrderedDict[int, tuple[np.ndarray, int, int, np.ndarray]] = OrderedDict()

    def filter_mask(self, flt: Filter, ctx: RequestContext,
                     keys: list[Hashable] | None = None, cache_key: Any = _MISSING) -> np.ndarray | None:
        """The filter's mask; a static one comes from the cache, and its cache key is appended to ``keys``
        (``cache_key``: ``flt.cache_key(ctx)`` when the caller has it already)."""
        table = self.table
        layout = table.layout
        if flt.once_per_request and ctx.instance_index > 0:
            memo = ctx.scratch.get(("once", flt.name))
            if memo is not None and memo[1] == table.layout and (memo[0] is None or len(memo[0]) == table.n):
                once: np.ndarray | None = memo[0]  # (mask, layout), as stored below
                return once
        if flt.static:
            if cache_key is _MISSING:
                cache_key = flt.cache_key(ctx)
            key = (flt.name, cache_key, table.static_revision, table.n)
            if keys is not None:
                keys.append(key)
            cache = self._masks
            with self._lock:
                if key in cache:
                    mask = cache[key]
                    cache.move_to_end(key)
                    self.stats.mask_cache_hits += 1
                    if flt.once_per_request:
                        ctx.scratch[("once", flt.name)] = (mask, layout)
                    return mask
            mask = flt.mask(table, ctx)
            with self._lock:
                self.stats.mask_cache_misses += 1
                self._masks[key] = mask
                while len(self._masks) > self.config.gantt.mask_cache_size:
                    self._masks.popitem(last=False)
        else:
            mask = flt.mask(table, ctx)
        if flt.once_per_request:
            ctx.scratch[("once", flt.name)] = (mask, layout)
        return mask

    def static_class(self, ctx: RequestContext, n: int) -> StaticClass | None:
        """The masks of ``static_filters`` (in their order) and their AND for this request's class; None when a
        filter refused the request (the caller then meets the refusal where the filters' order puts it)."""
        batch = self.static_filters
        revision = self.table.static_revision
        try:
            parts = tuple(flt.cache_key(ctx) for flt in batch)
        except Exception:  # e.g. a malformed extra spec: refused by whichever filter comes first, as before
            return None
        key = (n, *parts)
        with self._lock:
            if self._classes_revision != revision:
                self.classes.clear()
                self._classes_revision = revision
            entry = self.classes.get(key)
            if entry is not None:
                self.classes.move_to_end(key)
                self.stats.mask_cache_hits += len(batch)
                return entry
        try:
            masks = tuple(self.filter_mask(flt, ctx, None, part) for flt, part in zip(batch, parts, strict=True))
        except Exception:
            return None
        entry = (masks, self.combine(list(masks), n))
        with self._lock:
            if self._classes_revision == revision:
                self.classes[key] = entry
                while len(self.classes) > min(COMBINED_CLASSES, self.config.gantt.mask_cache_size):
                    self.classes.popitem(last=False)
        return entry

    def combine(self, masks: Sequence[np.ndarray | None], n: int) -> np.ndarray | None:
        """The AND of the static ``masks`` (None: none of them removes anything), cached under the masks'
        identities: a static mask is a new array whenever the static revision or row count moves, so the AND is
        as fresh as its parts."""
        key = (n, *(id(m) for m in masks if m is not None))
        with self._lock:
            entry = self._combined.get(key)
            if entry is not None:
                self._combined.move_to_end(key)
                return entry[1]
        combined: np.ndarray | None = None
        for m in masks:
            if m is None:
                continue
            if combined is None:
                combined = m[:n].copy()
            else:
                np.logical_and(combined, m[:n], out=combined)
        with self._lock:
            self._combined[key] = ([m for m in masks if m is not None], combined)
            while len(self._combined) > min(COMBINED_CLASSES, self.config.gantt.mask_cache_size):
                self._combined.popitem(last=False)
        return combined

    def allowed_codes(self, masks: Sequence[np.ndarray | None], n: int) -> np.ndarray | None:
        """Per aggregate-set code, whether a row that every one of the static ``masks`` keeps can have it: per
        mask, the codes of the rows it keeps, ANDed (a superset of the rows' codes, which is all a bound needs).
        None when it allows every code (nothing to gain), or there are more than ``MAX_CODES`` codes."""
        table = self.table
        revision = table.static_revision
        ncodes = table.static_cache(("aggset_count",), lambda: len(table.factor("aggregates").values))
        if ncodes > MAX_CODES:
            return None
        allowed: np.ndarray | None = None
        for mask in masks:
            if mask is None:
                continue
            with self._lock:
                entry = self._codes.get(id(mask))
                if entry is not None:
                    self._codes.move_to_end(id(mask))
            if entry is None or entry[0] is not mask or entry[1] != revision or entry[2] != n:
                present = np.zeros(ncodes, dtype=np.bool_)
                present[table.col("aggset_code")[:n][mask[:n]]] = True
                entry = (mask, revision, n, present)
                with self._lock:
                    self._codes[id(mask)] = entry
                    while len(self._codes) > self.config.gantt.mask_cache_size:
                        self._codes.popitem(last=False)
            allowed = entry[3].copy() if allowed is None else np.logical_and(allowed, entry[3], out=allowed)
        if allowed is None or allowed.all():
            return None
        return allowed
