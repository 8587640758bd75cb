"""Ranking: pre-selection, filters and weighers over one table — the order a decision picks from.

The engine (``gantt.compute.engine``) asks a ``Ranker`` for a ``Ranking`` per instance and claims down it; dry runs
(candidates, explain) read the same ranking. Filters and weighers are the plugins of ``filters.base`` and
``weighers.base``; the weights are Nova's (per weigher ``multiplier * (x - min) / (max - min)`` over the
candidates, summed), computed without per-row Python.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gantt.compute import filters as filter_pkg
from gantt.compute import weighers as weigher_pkg
from gantt.compute.blocks import block_reduce, blocks_with, masked_best
from gantt.compute.journal import SumTerm
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable
from gantt.compute.weighers.base import Weigher
from gantt.config import Config
from gantt.model import Explanation, FilterStep, NearestMiss, emptied_by

if TYPE_CHECKING:
    from gantt.compute.engine import EngineStats


# Request classes whose combined static mask is kept: one byte per row each (32 MB at 1,000,000 rows).
COMBINED_CLASSES = 32
# From this many rows a decision reads the kept weighted sum by blocks (``BlockPick``) instead of masking and
# scanning every row, and a minority of candidates (a zone) takes its weighers' extremes by blocks instead of
# gathering every candidate's values. Below it a full pass costs about as little (and 100,000 rows stay as tuned).
BLOCK_MIN_ROWS = 256 * 1024
RANK_ATTEMPTS = 4  # rankings without the table's lock before one with it (rows moved under each of the others)
_MISSING: Any = object()  # a cache's answer for a key it does not hold (None is a mask: every row passes)
PICK_BUDGET = 84  # blocks a pick reads by the kept maxima (chunks of 4, 16, 64) before it tightens them


class BlockPick:
    """A decision's scores read lazily: the weight of candidate row ``i`` is ``total[i]`` (the table's kept
    weighted sum, shared and never modified), -inf off the mask or once taken. Stands in for ``Ranking.score``
    in the engine's pick (``__getitem__``; writing -inf takes a row), and finds the best rows by blocks
    (``blocks.masked_best``) in the order repeated ``argmax`` over the masked scores gives."""

    __slots__ = ("blockmax", "has", "mask", "taken", "tight", "total")

    def __init__(self, total: np.ndarray, mask: np.ndarray, blockmax: np.ndarray, has: np.ndarray) -> None:
        self.total = total
        self.mask = mask
        self.blockmax = blockmax
        self.has = has
        self.taken: set[int] = set()
        self.tight = False  # ``blockmax`` bounds the candidates' own scores (not every row's)

    def __getitem__(self, i: int) -> float:
        if i < 0 or i in self.taken or not self.mask[i]:
            return -np.inf
        return float(self.total[i])

    def __setitem__(self, i: int, value: float) -> None:
        assert value == -np.inf, "a pick only ever takes a row"
        self.taken.add(i)

    def best_first(self, batch: int) -> Iterator[int]:
        """Positions best first (as ``engine._best_first``); -1 (weight -inf) once none is left."""
        while True:
            found = masked_best(self.total, self.mask, self.blockmax, self.has, batch, self.taken,
                                budget=None if self.tight else PICK_BUDGET)
            if found is None:
                # The best rows by the kept maxima are not candidates (a small aggregate spread over every
                # block, the busy or down nodes): maxima of the candidates' own scores, one pass as before.
                self.blockmax = block_reduce(np.where(self.mask, self.total, -np.inf), highest=True)
                self.tight = True
                continue
            if not found:
                while True:
                    yield -1
            yield from found


@dataclass(slots=True)
class Ranking:
    """One pass of filters and weighers for one instance.

    When few rows pass (``rows`` given), weights are computed for those rows only and ``score[i]`` is the weight
    of row ``rows[i]``; otherwise ``score`` spans every row with -inf where the mask is False. Gathering pays
    only when the candidates are a minority (an availability zone, a tenant's aggregate); over most of the cloud
    full-length arithmetic is cheaper than gathering.
    """

    mask: np.ndarray
    score: np.ndarray
    count: int
    steps: list[tuple[str, np.ndarray | None]]
    limits: dict[str, np.ndarray]
    rows: np.ndarray | None = None
    applied: tuple[filter_pkg.Filter, ...] = ()  # the filters that ran (not for forced hosts)
    offset: float = 0.0  # added to every score to give the weight (it never changes the order)
    layout: int = 0  # the table's row layout the row numbers refer to (HostTable.layout)
    # A decision's ranking over filters that refine (filters.base): the mask keeps rows their prefilters keep,
    # and this is the exact verdict per row, which the engine asks before it picks or offers a row. The weights
    # are exact all the same: every weigher's extremes over the mask are held by rows that pass (see _settle).
    exact: Callable[[int], bool] | None = None
    # A decision over many rows: the pick reads ``score`` (then the kept weighted sum) through this, by blocks.
    pick: BlockPick | None = None
    # ``score`` is the table's kept weighted sum (every row a candidate): read it, and copy it before a write.
    shared: bool = False
    # ``score``'s highest value when known without a pass over it (None: take one)
    top: float | None = None

    def candidate_rows(self) -> np.ndarray:
        return self.rows if self.rows is not None else np.flatnonzero(self.mask)

    def candidate_scores(self) -> np.ndarray:
        """Weights in candidate order."""
        scores = self.score if self.rows is not None else self.score.take(np.flatnonzero(self.mask))
        return scores + self.offset


class Ranker:
    """The filters and weighers one engine runs, in their order, and the cache of masks that depend on static
    data only (keyed on the table's static revision, so a mask never outlives what it was computed from)."""

    def __init__(self, table: HostTable, config: Config, stats: EngineStats) -> None:
        self.table = table
        self.config = config
        self.stats = stats
        fs = config.filter_scheduler
        self.filters: list[filter_pkg.Filter] = [cls(config) for cls in filter_pkg.pipeline(fs.enabled_filters)]
        self.weighers: list[weigher_pkg.Weigher] = [cls(config) for cls in weigher_pkg.resolve(fs.weight_classes)]
        # The filters that cap usage (``limits``) or leave something in a Selection's limits (``selection_limits``):
        # the base methods answer nothing, and a decision would otherwise call each of ~20 filters for nothing.
        self.capping: frozenset[filter_pkg.Filter] = frozenset(
            f for f in self.filters if type(f).limits is not filter_pkg.Filter.limits)
        self.leaving: tuple[filter_pkg.Filter, ...] = tuple(
            f for f in self.filters if type(f).selection_limits is not filter_pkg.Filter.selection_limits)
        self._mask_cache: OrderedDict[tuple[Any, ...], np.ndarray | None] = OrderedDict()
        self._mask_cache_lock = threading.Lock()
        # The AND of every static filter's mask, per request class (the tuple of those masks' cache keys): at
        # 1,000,000 rows each AND is a pass of ~50 µs, and a dozen static filters are combined per decision.
        # Keyed by the masks themselves (their identities, each entry holding its masks so that no identity is
        # reused while it lives), not by their cache keys: a filter keyed by the request's project gives every
        # project no aggregate names one shared mask, and keying by project made 500 projects 500 classes.
        self._combined: OrderedDict[tuple[Any, ...], tuple[list[np.ndarray | None], np.ndarray | None]] = \
            OrderedDict()
        # The static filters' masks and their AND per request class (the tuple of their cache keys), for the
        # first instance of a request that forces no host: one lookup instead of one per static filter (each a
        # key, a lock and an LRU move). Cleared when the static revision moves, so that no entry pins the masks
        # of an earlier revision; as small as the kept ANDs, whose arrays its entries share.
        self._static_filters = tuple(f for f in self.filters if f.static and not f.refines)
        self._classes: OrderedDict[tuple[Any, ...], tuple[tuple[np.ndarray | None, ...], np.ndarray | None]] = \
            OrderedDict()
        self._classes_revision = -1
        self._multiplier_memo: tuple[tuple[Any, ...], list[float | np.ndarray]] | None = None
        # A decision's pick by blocks (BlockPick) gives what repeated argmax gives; Nova's tie shuffle and the
        # subset slots read every candidate's score, so they keep the full-length scores.
        self._by_blocks = not fs.shuffle_best_same_weighed_hosts and config.gantt.subset_slots == 1
        # The tie shuffle draws among the rows at the best score: with every row a candidate, that score is the
        # kept sum's highest, read from its kept block maxima instead of a pass over every row.
        self._tops = fs.shuffle_best_same_weighed_hosts
        self.block_min_rows = BLOCK_MIN_ROWS  # (tests lower it to run the block paths on small tables)

    def _preselect(self, ctx: RequestContext) -> tuple[list[tuple[str, np.ndarray | None]], bool]:
        """ignore_hosts, force_hosts/force_nodes and requested_destination, as Nova's host manager applies them."""
        table = self.table
        spec = ctx.spec
        steps: list[tuple[str, np.ndarray | None]] = []
        roots = table.roots()
        if roots is not None:  # a child provider (NUMA cell, PF) is part of its root's node, never one itself
            steps.append(("root_providers", roots))
        hosts = table.host_names
        if spec.ignore_hosts:  # host names case-insensitively, node names exactly (Nova's host manager)
            ignored = {h.lower() for h in spec.ignore_hosts}
            steps.append(("ignore_hosts", self._name_mask(hosts, lambda h: h.lower() not in ignored)))
        source = ctx.move_source
        if source is not None and not self.config.default.allow_resize_to_same_host:
            steps.append(("allow_resize_to_same_host", self._name_mask(hosts, lambda h: h != source.host)))
        forced = False
        if spec.force_hosts or spec.force_nodes:
            fh = {h.lower() for h in spec.force_hosts or ()}
            fn = set(spec.force_nodes or ())
            mask = np.ones(table.n, dtype=np.bool_)
            if fh:
                mask &= self._name_mask(hosts, lambda h: h.lower() in fh)
            if fn:
                mask &= self._name_mask(table.node_names, lambda nd: nd in fn)
            steps.append(("force_hosts", mask))
            forced = True
        dest = spec.requested_destination
        if dest is not None:
            mask = np.ones(table.n, dtype=np.bool_)
            if dest.host:
                mask &= self._name_mask(hosts, lambda h: h == dest.host)
            if dest.node:
                mask &= self._name_mask(table.node_names, lambda nd: nd == dest.node)
            for group in dest.aggregates or ():
                wanted = {g.strip() for g in group.split(",") if g.strip()}
                keys = {a.key for a in table.aggregates() if a.key in wanted or a.uuid in wanted}
                mask &= table.factor("aggregates").map(lambda aggs, keys=keys: bool(aggs & keys))
            steps.append(("requested_destination", mask))
        return steps, forced

    def _name_mask(self, names: list[str], keep: Callable[[str], bool]) -> np.ndarray:
        n = self.table.n
        return np.fromiter((keep(name) for name in names[:n]), dtype=np.bool_, count=n)

    def _filter_mask(self, flt: filter_pkg.Filter, ctx: RequestContext,
                     keys: list[tuple[Any, ...]] | None = None, cache_key: Any = _MISSING) -> np.ndarray | None:
        """The filter's mask; a static one comes from the cache, and its cache key is appended to ``keys``
        (``cache_key``: ``flt.cache_key(ctx)`` when the caller has it already)."""
        table = self.table
        layout = table.layout
        if flt.once_per_request and ctx.instance_index > 0:
            memo = ctx.scratch.get(("once", flt.name))
            if memo is not None and memo[1] == table.layout and (memo[0] is None or len(memo[0]) == table.n):
                return memo[0]
        if flt.static:
            if cache_key is _MISSING:
                cache_key = flt.cache_key(ctx)
            key = (flt.name, cache_key, table.static_revision, table.n)
            if keys is not None:
                keys.append(key)
            cache = self._mask_cache
            with self._mask_cache_lock:
                mask = cache.get(key, _MISSING)
                if mask is not _MISSING:
                    cache.move_to_end(key)
                    self.stats.mask_cache_hits += 1
                    if flt.once_per_request:
                        ctx.scratch[("once", flt.name)] = (mask, layout)
                    return mask  # type: ignore[return-value]
            mask = flt.mask(table, ctx)
            with self._mask_cache_lock:
                self.stats.mask_cache_misses += 1
                self._mask_cache[key] = mask
                while len(self._mask_cache) > self.config.gantt.mask_cache_size:
                    self._mask_cache.popitem(last=False)
        else:
            mask = flt.mask(table, ctx)
        if flt.once_per_request:
            ctx.scratch[("once", flt.name)] = (mask, layout)
        return mask

    def _static_class(self, ctx: RequestContext, n: int) -> tuple[tuple[np.ndarray | None, ...],
                                                                   np.ndarray | None] | None:
        """The masks of ``_static_filters`` (in their order) and their AND for this request's class; None when a
        filter refused the request (the caller then meets the refusal where the filters' order puts it)."""
        batch = self._static_filters
        revision = self.table.static_revision
        try:
            parts = tuple(flt.cache_key(ctx) for flt in batch)
        except Exception:  # e.g. a malformed extra spec: refused by whichever filter comes first, as before
            return None
        key = (n, *parts)
        with self._mask_cache_lock:
            if self._classes_revision != revision:
                self._classes.clear()
                self._classes_revision = revision
            entry = self._classes.get(key)
            if entry is not None:
                self._classes.move_to_end(key)
                self.stats.mask_cache_hits += len(batch)
                return entry
        try:
            masks = tuple(self._filter_mask(flt, ctx, None, part) for flt, part in zip(batch, parts, strict=True))
        except Exception:
            return None
        entry = (masks, self._combine(list(masks), n))
        with self._mask_cache_lock:
            if self._classes_revision == revision:
                self._classes[key] = entry
                while len(self._classes) > min(COMBINED_CLASSES, self.config.gantt.mask_cache_size):
                    self._classes.popitem(last=False)
        return entry

    def _combine(self, masks: list[np.ndarray | None], n: int) -> np.ndarray | None:
        """The AND of the static ``masks`` (None: none of them removes anything), cached under the masks'
        identities: a static mask is a new array whenever the static revision or row count moves, so the AND is
        as fresh as its parts."""
        key = (n, *(id(m) for m in masks if m is not None))
        with self._mask_cache_lock:
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
        with self._mask_cache_lock:
            self._combined[key] = ([m for m in masks if m is not None], combined)
            while len(self._combined) > min(COMBINED_CLASSES, self.config.gantt.mask_cache_size):
                self._combined.popitem(last=False)
        return combined

    def rank(self, ctx: RequestContext, contributions: dict[str, np.ndarray] | None = None, *,
             lazy: bool = False) -> Ranking:
        """Pre-selection, then every filter, then the weighers over what is left. ``contributions``, when given,
        receives each weigher's part of every candidate's weight (a dry run shows them).

        ``lazy`` (a decision): filters that refine give their prefilter, and the ranking's ``exact`` the verdict
        the engine asks of the rows it picks from; the pick is the one the exact masks would give.

        Columns are read without the table's lock: when a removal renumbers rows or rows join meanwhile, masks from
        before and after it do not line up (nor, at worst, have the same length), so the ranking is made again.
        """
        table = self.table
        for attempt in range(RANK_ATTEMPTS):
            if attempt == RANK_ATTEMPTS - 1:
                with table.lock:  # rows keep moving or joining: rank once with the table held still
                    ranking = self._rank(ctx, contributions, lazy)
                    ranking.layout = table.layout
                    return ranking
            layout, n = table.layout, table.n
            try:
                ranking = self._rank(ctx, contributions, lazy)
            except (ValueError, IndexError):
                if table.layout == layout and table.n == n:
                    raise
                ranking = None
            # Rows joining meanwhile (the feed adding hosts) renumber nothing, but masks and columns taken before
            # and after do not line up either: rank again rather than trust arrays of two lengths.
            if ranking is not None and table.layout == layout and table.n == n:
                ranking.layout = layout
                return ranking
            if contributions is not None:
                contributions.clear()
        raise AssertionError("unreachable")

    def _rank(self, ctx: RequestContext, contributions: dict[str, np.ndarray] | None, lazy: bool) -> Ranking:
        table = self.table
        n = table.n
        steps, forced = self._preselect(ctx)
        limits: dict[str, np.ndarray] = {}
        checks: list[Callable[[int], bool]] = []
        applied: list[filter_pkg.Filter] = []
        static_keys: list[tuple[Any, ...]] = []
        static_steps: set[int] = set()  # positions in ``steps`` of the masks ``static_keys`` names
        capping = self.capping
        # Nova skips the filters for forced hosts unless the request says _nova_check_type; the resource claim
        # (the always-on Placement query) still applies. A rebuild runs only Nova's RUN_ON_REBUILD filters.
        unfiltered = forced and not ctx.check_type
        rebuild = ctx.rebuild
        known = self._static_class(ctx, n) if not unfiltered and not rebuild and ctx.instance_index == 0 else None
        known_masks = known[0] if known is not None else ()
        at = 0  # the next of ``known_masks``
        layout = table.layout
        for flt in self.filters:
            if rebuild and flt.name not in filter_pkg.RUN_ON_REBUILD:
                continue
            if unfiltered and not flt.always_on:
                continue
            applied.append(flt)
            if known is not None and flt.static and not flt.refines:
                step = known_masks[at]
                at += 1
                static_steps.add(len(steps))
                if flt.once_per_request:  # what _filter_mask leaves for the request's later instances
                    ctx.scratch[("once", flt.name)] = (step, layout)
            elif lazy and flt.refines:
                step = flt.prefilter(table, ctx)
                check = flt.exact(table, ctx) if step is not None else None
                if check is not None:
                    checks.append(check)
            else:
                before = len(static_keys)
                step = self._filter_mask(flt, ctx, static_keys)
                if len(static_keys) > before and known is None:  # else ANDed on its own (not in ``known``)
                    static_steps.add(len(steps))
            steps.append((flt.name, step))
            if flt not in capping:
                continue
            flt_limits = flt.limits(table, ctx)
            if flt_limits:
                for rc, arr in flt_limits.items():
                    limits[rc] = arr if rc not in limits else np.fmin(limits[rc], arr)
        combined = known[1] if known is not None else self._combine([steps[i][1] for i in sorted(static_steps)], n)
        mask = combined.copy() if combined is not None else np.ones(n, dtype=np.bool_)
        for i, (_, m) in enumerate(steps):
            if m is not None and i not in static_steps:
                np.logical_and(mask, m[:n], out=mask)
        if checks:
            ranking = self._settle(ctx, mask, steps, limits, checks)
        else:
            ranking = self._score(ctx, mask, steps, limits, contributions, lazy=lazy)
        ranking.applied = tuple(applied)
        return ranking

    def _score(self, ctx: RequestContext, mask: np.ndarray, steps: list[tuple[str, np.ndarray | None]],
               limits: dict[str, np.ndarray], contributions: dict[str, np.ndarray] | None,
               bounds: list[tuple[np.ndarray, float | None, float | None]] | None = None, *,
               lazy: bool = False) -> Ranking:
        """``lazy`` (a decision): over ``BLOCK_MIN_ROWS`` rows, the ranking may read the kept weighted sum
        through a ``BlockPick`` instead of masking every row's score."""
        table = self.table
        n = table.n
        count = int(np.count_nonzero(mask))
        by_blocks = lazy and self._by_blocks and contributions is None and n >= self.block_min_rows
        if by_blocks:
            rows = None
            extremes = _Extremes(table, mask, None, by_blocks=True)
        else:
            rows = np.flatnonzero(mask) if count > 0 and count * 3 < n else None
            extremes = _Extremes(table, mask, rows)
        shared = False
        blockmax: np.ndarray | None = None
        if count > 1:  # Nova returns a lone candidate unweighed (weight 0): nothing to rank it against
            score, offset, shared, blockmax = self._weigh(ctx, extremes, rows, contributions, bounds, by_blocks)
        else:
            score, offset = np.zeros(count if rows is not None else n), 0.0
        if blockmax is not None and by_blocks:
            pick = BlockPick(score, mask, blockmax, extremes.has)
            return Ranking(mask=mask, score=score, count=count, steps=steps, limits=limits, offset=offset, pick=pick)
        top = float(blockmax.max()) if blockmax is not None else None  # every row a candidate (see _weigh)
        if rows is None and count < n:
            # One pass that also copies the table's kept sums (``shared``); a scatter of -inf over the excluded
            # rows would need their row numbers first (a pass of its own) and a copy.
            score = np.where(mask, score, -np.inf)
            shared = False
        # Still the kept sum (``shared``): the engine copies it only if it takes a row beyond the ties it draws,
        # the one pass of a decision over every row that is seldom needed.
        return Ranking(mask=mask, score=score, count=count, steps=steps, limits=limits, rows=rows, offset=offset,
                       shared=shared, top=top)

    def _settle(self, ctx: RequestContext, mask: np.ndarray, steps: list[tuple[str, np.ndarray | None]],
                limits: dict[str, np.ndarray], checks: list[Callable[[int], bool]]) -> Ranking:
        """Weights over a superset of the candidates, made exact: Nova normalizes each weigher by its lowest and
        highest value over the candidates, and a superset may stretch those. Each extreme over the superset is
        checked to be held by some row that passes the exact checks; the rows holding an extreme that all fail
        leave the mask and the weights are made again. Then the weights of the rows that pass are Nova's, and
        the engine skips the rows that fail as it walks the order (``Ranking.exact``)."""
        def exact(row: int) -> bool:
            return all(check(row) for check in checks)

        while True:
            bounds: list[tuple[np.ndarray, float | None, float | None]] = []
            ranking = self._score(ctx, mask, steps, limits, None, bounds, lazy=True)
            failed: list[int] = []
            passing: set[int] = set()
            for raw, lo, hi in bounds:
                for value in (lo, hi):
                    if value is None:
                        continue
                    holders = np.flatnonzero(raw[: len(mask)] == value) if ranking.rows is None else None
                    if holders is None:
                        assert ranking.rows is not None
                        holders = ranking.rows[raw.take(ranking.rows) == value]
                    else:
                        holders = holders[mask[holders]]
                    held = next((row for row in holders.tolist() if exact(row)), None)
                    if held is None:
                        failed.extend(holders.tolist())
                    else:
                        passing.add(held)
            if failed:
                mask = mask.copy()
                mask[failed] = False
                continue
            if bounds and len(passing) == 1:
                # Nova leaves a lone candidate unweighed (weight 0): is the one row found the only one?
                (only,) = passing
                if not any(exact(row) for row in np.flatnonzero(mask).tolist() if row != only):
                    mask = np.zeros_like(mask)
                    mask[only] = True
                    ranking = self._score(ctx, mask, steps, limits, None, lazy=True)
            ranking.exact = exact
            return ranking

    def _weigh(self, ctx: RequestContext, extremes: _Extremes, rows: np.ndarray | None,
               contributions: dict[str, np.ndarray] | None,
               bounds_seen: list[tuple[np.ndarray, float | None, float | None]] | None = None,
               by_blocks: bool = False) -> tuple[np.ndarray, float, bool, np.ndarray | None]:
        """Nova's weighing: per weigher ``multiplier * (x - min) / (max - min)`` over the candidates, summed.

        Returns ``(score, offset)``: the weight of a candidate is ``score + offset``. With a scalar multiplier a
        weigher contributes ``c * x - c * min``; the ``c * x`` terms are summed per row and the constants into
        ``offset``, which never changes the order and is added only to the weights reported. When every weigher
        reads a usage column with a scalar multiplier the per-row sum comes from the table's patched sums; else
        it is computed here. ``score`` covers every row, or ``rows`` (in that order) when given; it is the table's
        kept sum, not to be modified, when the third item (``shared``) is true.
        With the kept sums, by blocks or for the tie shuffle over every row, the fourth item is the kept sum's
        maxima per block (else None).
        ``bounds_seen`` receives, per weigher, its raw column and the lowest and highest value over the candidates
        that normalize it (None where a fixed ``minval``/``maxval`` does).
        """
        table = self.table
        mask = extremes.mask
        terms: list[tuple[Weigher, str | None, np.ndarray, float | np.ndarray, float, float]] = []
        for weigher, multiplier in zip(self.weighers, self._multipliers(), strict=True):
            # ``multiplier``: a float, or per row when an aggregate overrides it
            if isinstance(multiplier, float) and multiplier == 0.0:
                continue
            raw = weigher.raw(table, ctx, mask)
            if raw is None:
                continue
            column = weigher.usage_column
            bounds = extremes.bounds(raw, weigher.minval, weigher.maxval, column)
            if bounds is None:
                continue  # Nova: every candidate equal -> every normalized weight 0
            if bounds_seen is not None:
                bounds_seen.append((raw, bounds[0] if weigher.minval is None else None,
                                    bounds[1] if weigher.maxval is None else None))
            raw, column = _clamped(extremes, raw, column, weigher.minval, weigher.maxval, bounds)
            terms.append((weigher, column, raw, multiplier, *bounds))
        size = len(rows) if rows is not None else table.n
        if not terms:
            return np.zeros(size), 0.0, False, None
        offset = 0.0
        if contributions is None and all(c for _, c, _, _, _, _ in terms):
            # The same arithmetic as the loop below, kept per row across decisions (``HostTable.weighted_sum``). A
            # per-row multiplier only moves with static state, which the kept sums are tied to.
            key: list[tuple[Any, ...]] = []
            sum_terms: list[SumTerm] = []
            for weigher, column, raw, multiplier, lo, hi in terms:
                if isinstance(multiplier, float):
                    factor = multiplier / (hi - lo)
                    key.append((column, factor))
                    sum_terms.append((raw, factor, lo, None))
                    offset -= lo * factor
                else:
                    factor = 1.0 / (hi - lo)
                    key.append((column, weigher.name, lo, factor))
                    sum_terms.append((raw, factor, lo, multiplier))
            if by_blocks or (self._tops and rows is None and extremes.everyone):
                total, blockmax = table.weighted_sum_blocks(tuple(key), sum_terms)
                return total, offset, True, blockmax
            return table.weighted_sum(tuple(key), sum_terms, rows, copy=False), offset, rows is None, None
        score = np.zeros(size)
        scratch = np.empty(size)
        for weigher, _, raw, multiplier, lo, hi in terms:
            if rows is not None:
                raw = raw[rows]
                if not isinstance(multiplier, float):
                    multiplier = multiplier[rows]
            if isinstance(multiplier, float):
                factor = multiplier / (hi - lo)
                np.multiply(raw, factor, out=scratch)
                score += scratch
                offset -= lo * factor
                if contributions is not None:
                    contributions[weigher.name] = _aligned(scratch - lo * factor, rows, mask)
            else:
                np.subtract(raw, lo, out=scratch)
                scratch *= 1.0 / (hi - lo)
                scratch *= multiplier
                score += scratch
                if contributions is not None:
                    contributions[weigher.name] = _aligned(scratch.copy(), rows, mask)
        return score, offset, False, None

    def _multipliers(self) -> list[float | np.ndarray]:
        """Each weigher's ``multipliers``, kept until the static revision or the row count moves (they depend on
        the configuration and the aggregates only): one call per decision instead of one per weigher."""
        table = self.table
        weighers = tuple(self.weighers)  # (a copy of a ranker may be given other weighers)
        key = (table.static_revision, table.n, weighers)
        memo = self._multiplier_memo
        if memo is None or memo[0] != key:
            memo = (key, [weigher.multipliers(table) for weigher in weighers])
            self._multiplier_memo = memo
        return memo[1]

    def explain(self, ctx: RequestContext, ranking: Ranking, reason: str = "") -> Explanation:
        """Filter by filter, how many nodes each step removed; the nearest misses; the reason to report (the
        filter that emptied the list unless ``reason`` says otherwise)."""
        table = self.table
        n = table.n
        alive = np.ones(n, dtype=np.bool_)
        steps: list[FilterStep] = []
        for name, m in ranking.steps:
            before = int(np.count_nonzero(alive))
            if m is not None:
                alive &= m[:n]
            after = int(np.count_nonzero(alive))
            steps.append(FilterStep(name=name, before=before, removed=before - after, after=after))
        nearest: list[NearestMiss] = []
        ran = {name for name, _ in ranking.steps}
        for flt in self.filters:
            if flt.explains_miss and flt.name in ran:
                others = np.ones(n, dtype=np.bool_)
                for name, m in ranking.steps:
                    if name != flt.name and m is not None:
                        others &= m[:n]
                nearest.extend(flt.nearest_miss(table, ctx, others))
        if not reason:
            # The step that emptied the list (a filter, or the request's own pre-selection: force_hosts,
            # ignore_hosts, requested_destination); when none did (candidates passed and the pick still found no
            # room), the filter that removed the most.
            worst_name = emptied_by(steps)
            if worst_name is None:
                names = {flt.name for flt in self.filters}
                worst = max((s for s in steps if s.name in names and s.removed), key=lambda s: s.removed,
                            default=None)
                worst_name = worst.name if worst is not None else None
            reason = worst_name or ("no hosts" if n == 0 else "")
        down = int(n - np.count_nonzero(table.alive(ctx.now)[:n])) if n else 0
        return Explanation(hosts=n, steps=steps, nearest_miss=nearest, instance_index=ctx.instance_index,
                           reason=reason, down=down, service_down_time=table.service_down_time if down else 0.0)


class _Extremes:
    """min / max of a raw column over the candidates, cheaply.

    numpy's ``where=`` reductions, ``np.where`` and gathers of most rows cost 50-100 µs per 100,000 rows; a plain
    reduction costs ~10. In order of preference:
    - over most of the cloud, a weigher that reads a usage column of the table asks the table's shortlist of that
      column's extreme rows (kept across decisions, patched on changed rows: a few µs);
    - with few candidates (``rows`` given), a gather of those rows and plain reductions;
    - the extreme over every row is also the candidates' extreme when the row holding it is a candidate, or when
      some candidate ties with it (common: many identical empty hosts); a column whose extremes agree over every
      row is constant over the candidates too;
    - otherwise the column is copied into a scratch buffer with the excluded rows set to a value that cannot win.
    """

    def __init__(self, table: HostTable, mask: np.ndarray, rows: np.ndarray | None, *,
                 by_blocks: bool = False) -> None:
        self.table = table
        self.mask = mask
        self.rows = rows
        # A decision over many rows: a usage column's extremes over the candidates come from its block bounds
        # (table.block_extreme), not from gathers (a zone's candidates) nor from shortlists of the column's
        # extreme rows, which the simulation's stream of reports and request classes kept rebuilding (a partition
        # of every row); and whether a candidate passes a weigher's fixed bound is asked of them directly
        # (table.block_beyond: the least free rows are rarely candidates).
        self.by_blocks = by_blocks
        self._has: np.ndarray | None = None
        self._everyone: bool | None = None
        self._excluded: np.ndarray | None = None
        self._buffer: np.ndarray | None = None
        # (lo, hi) of a raw column over ``rows``, by the column's identity: a weigher's bounds and its clamp
        # check ask for the same column twice, and each gather of the candidates costs a pass over them.
        self._gathered: dict[int, tuple[np.ndarray, float, float]] = {}

    @property
    def everyone(self) -> bool:
        """Every row is a candidate (so plain reductions are exact)."""
        if self._everyone is None:
            self._everyone = self.rows is None and len(self.mask) > 0 and bool(self.mask.all())
        return self._everyone

    @property
    def has(self) -> np.ndarray:
        """Per block of rows, whether it holds a candidate (computed once per ranking, on first need)."""
        if self._has is None:
            self._has = blocks_with(self.mask)
        return self._has

    @property
    def excluded(self) -> np.ndarray:
        """Row numbers of the non-candidates (computed once per ranking, on first need)."""
        if self._excluded is None:
            self._excluded = np.flatnonzero(~self.mask)
        return self._excluded

    def bounds(self, raw: np.ndarray, minval: float | None, maxval: float | None,
               column: str | None = None) -> tuple[float, float] | None:
        """(lo, hi) of ``raw`` (every row) over the candidates, for normalization, or None when every candidate
        weighs the same (``hi <= lo``)."""
        lo, hi = minval, maxval
        if column is not None and self.rows is None and self.by_blocks:
            if lo is None:
                lo = self.table.block_extreme(column, raw, self.mask, self.has, highest=False)
            if hi is None:
                hi = self.table.block_extreme(column, raw, self.mask, self.has, highest=True)
        elif column is not None and self.rows is None:  # a shortlist rarely holds a small candidate set's extreme
            if lo is None:
                lo = self.table.candidate_extreme(column, raw, self.mask, highest=False, everyone=self.everyone)
            if hi is None:
                hi = self.table.candidate_extreme(column, raw, self.mask, highest=True, everyone=self.everyone)
        if lo is None or hi is None:
            if self.rows is not None:
                low, high = self._over_rows(raw)
                lo = low if lo is None else lo
                hi = high if hi is None else hi
            elif self.everyone:
                lo = float(raw.min()) if lo is None else lo
                hi = float(raw.max()) if hi is None else hi
            elif lo is None and hi is None:
                lo_row = int(raw.argmin())
                hi_row = int(raw.argmax())
                if raw[lo_row] == raw[hi_row]:
                    return None  # constant over every row, so over the candidates
                lo = self._extreme(raw, lo_row, highest=False)
                hi = self._extreme(raw, hi_row, highest=True)
            elif lo is None:
                lo = self._extreme(raw, int(raw.argmin()), highest=False)
            else:
                hi = self._extreme(raw, int(raw.argmax()), highest=True)
        assert lo is not None and hi is not None
        return (lo, hi) if hi > lo else None

    def beyond(self, raw: np.ndarray, column: str | None, limit: float, bounds: tuple[float, float], *,
               below: bool) -> bool:
        """Whether a candidate's value of ``raw`` lies below (above) ``limit``; ``bounds`` the (lo, hi) found
        for the weigher, whose other end the full question reuses."""
        if self.by_blocks and column is not None and self.rows is None:
            found = self.table.block_beyond(column, raw, self.mask, self.has, limit, below=below)
            if found is not None:
                return found
        actual = self.bounds(raw, None, bounds[1], column) if below else self.bounds(raw, bounds[0], None, column)
        return actual is not None and (actual[0] < limit if below else actual[1] > limit)

    def _over_rows(self, raw: np.ndarray) -> tuple[float, float]:
        """min and max of ``raw`` over ``rows``, gathered once per column (the entry keeps ``raw`` alive, so its
        identity cannot be reused by another array meanwhile)."""
        seen = self._gathered.get(id(raw))
        if seen is None or seen[0] is not raw:
            assert self.rows is not None
            values = raw.take(self.rows)
            seen = (raw, float(values.min()), float(values.max()))
            self._gathered[id(raw)] = seen
        return seen[1], seen[2]

    def _extreme(self, raw: np.ndarray, row: int, *, highest: bool) -> float:
        value = raw[row]
        if self.mask[row]:
            return float(value)
        excluded = self.excluded
        if len(excluded) * 8 < len(raw):
            # Does a candidate tie with the overall extreme? Count the ties everywhere and among the excluded.
            ties = int(np.count_nonzero(raw == value))
            if ties > int(np.count_nonzero(raw.take(excluded) == value)):
                return float(value)
        if self._buffer is None:
            self._buffer = np.empty(len(raw))
        buffer = self._buffer
        np.copyto(buffer, raw)
        buffer[excluded] = -np.inf if highest else np.inf
        return float(buffer.max() if highest else buffer.min())


def _clamped(extremes: _Extremes, raw: np.ndarray, column: str | None, minval: float | None, maxval: float | None,
             bounds: tuple[float, float]) -> tuple[np.ndarray, str | None]:
    """Nova's weigh_objects: a weight below ``minval`` (above ``maxval``) counts as ``minval`` (``maxval``).

    Only when a candidate lies outside the bounds is a clamped copy made (it is then no longer the usage
    column, so the patched weighted sums do not apply to it); e.g. RAMWeigher's ``minval = 0`` clamps the
    negative free RAM of an overcommitted node.
    """
    if minval is not None and extremes.beyond(raw, column, minval, bounds, below=True):
        raw, column = np.maximum(raw, minval), None
    if maxval is not None and extremes.beyond(raw, column, maxval, bounds, below=False):
        raw, column = np.minimum(raw, maxval), None
    return raw, column


def _aligned(values: np.ndarray, rows: np.ndarray | None, mask: np.ndarray) -> np.ndarray:
    """Per-weigher contributions in candidate order (as ``Ranking.candidate_scores``), for dry runs."""
    return values if rows is not None else values[mask]
