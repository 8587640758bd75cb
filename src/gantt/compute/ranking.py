"""Ranking: pre-selection, filters and weighers over one table — the order a decision picks from.

The engine (``gantt.compute.engine``) asks a ``Ranker`` for a ``Ranking`` per instance and claims down it; dry runs
(candidates, explain) read the same ranking. Filters and weighers are the plugins of ``filters.base`` and
``weighers.base``; the weights are Nova's (per weigher ``multiplier * (x - min) / (max - min)`` over the
candidates, summed), computed without per-row Python.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from gantt.compute.blocks import block_reduce, masked_best
from gantt.compute.extremes import Extremes
from gantt.compute.filters.base import Filter
from gantt.compute.filters.pipeline import RUN_ON_REBUILD
from gantt.compute.filters.pipeline import pipeline as filter_pipeline
from gantt.compute.masks import MaskCache
from gantt.compute.preselect import Steps, preselect
from gantt.compute.request import RequestContext
from gantt.compute.state.table import HostTable
from gantt.compute.stats import EngineStats
from gantt.compute.ties import KEY as TIES
from gantt.compute.weighers.base import Weigher
from gantt.compute.weighers.pipeline import resolve as resolve_weighers
from gantt.compute.weighing import Bounds, Weighing
from gantt.config import Config
from gantt.model import Explanation, FilterStep, NearestMiss, NoValidHost, emptied_by

# From this many rows a decision reads the kept weighted sum by blocks (``BlockPick``) instead of masking and
# scanning every row, and a minority of candidates (a zone) takes its weighers' extremes by blocks instead of
# gathering every candidate's values. Below it a full pass costs about as little (and 100,000 rows stay as tuned).
BLOCK_MIN_ROWS = 256 * 1024
RANK_ATTEMPTS = 4  # rankings without the table's lock before one with it (rows moved under each of the others)
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
        """Positions best first (as ``order.best_first``); -1 (weight -inf) once none is left."""
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
    steps: Steps
    limits: dict[str, np.ndarray]
    rows: np.ndarray | None = None
    applied: tuple[Filter, ...] = ()  # the filters that ran (not for forced hosts)
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
    """The filters and weighers one engine runs, in their order, chained: pre-selection (``preselect``), the
    filters (static masks from ``masks.MaskCache``), the weighers (``weighing.Weighing``)."""

    def __init__(self, table: HostTable, config: Config, stats: EngineStats) -> None:
        self.table = table
        self.config = config
        self.stats = stats
        fs = config.filter_scheduler
        self.filters: list[Filter] = [cls(config) for cls in filter_pipeline(fs.enabled_filters)]
        self.weighers: list[Weigher] = [cls(config) for cls in resolve_weighers(fs.weight_classes)]
        # The filters that cap usage (``limits``) or leave something in a Selection's limits (``selection_limits``):
        # the base methods answer nothing, and a decision would otherwise call each of ~20 filters for nothing.
        self.capping: frozenset[Filter] = frozenset(f for f in self.filters if type(f).limits is not Filter.limits)
        self.leaving: tuple[Filter, ...] = tuple(
            f for f in self.filters if type(f).selection_limits is not Filter.selection_limits)
        self.masks = MaskCache(table, config, stats, self.filters)
        self.weighing = Weighing(table, config)
        # A decision's pick by blocks (BlockPick) gives what repeated argmax gives; Nova's tie shuffle and the
        # subset slots read every candidate's score, so they keep the full-length scores.
        self._by_blocks = not fs.shuffle_best_same_weighed_hosts and config.gantt.subset_slots == 1
        self.block_min_rows = BLOCK_MIN_ROWS  # (tests lower it to run the block paths on small tables)
        # By blocks, the weighers' extremes are searched by block bounds per aggregate set (``Extremes.allowed``)
        # as the kept sum's best rows are (``_class_bounds``); off, by every row's (tests and A/B runs compare)
        self.code_extremes = True
        self.keep_candidates = True  # (off: every decision ANDs its masks afresh; tests and A/B runs compare)

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
            found: Ranking | None
            try:
                found = self._rank(ctx, contributions, lazy)
            except (ValueError, IndexError):
                if table.layout == layout and table.n == n:
                    raise
                found = None
            # Rows joining meanwhile (the feed adding hosts) renumber nothing, but masks and columns taken before
            # and after do not line up either: rank again rather than trust arrays of two lengths.
            if found is not None and table.layout == layout and table.n == n:
                found.layout = layout
                return found
            if contributions is not None:
                contributions.clear()
        raise AssertionError("unreachable")

    def _rank(self, ctx: RequestContext, contributions: dict[str, np.ndarray] | None, lazy: bool) -> Ranking:
        table = self.table
        n = table.n
        seq = table.derived.journal_seq()  # before any mask is read (see Derived.candidate_mask)
        steps, forced = preselect(table, self.config, ctx)
        limits: dict[str, np.ndarray] = {}
        checks: list[Callable[[int], bool]] = []
        applied: list[Filter] = []
        static_keys: list[Hashable] = []
        static_steps: set[int] = set()  # positions in ``steps`` of the masks ``static_keys`` names
        capping = self.capping
        # Nova skips the filters for forced hosts unless the request says _nova_check_type; the resource claim
        # (the always-on Placement query) still applies. A rebuild runs only Nova's RUN_ON_REBUILD filters.
        unfiltered = forced and not ctx.check_type
        rebuild = ctx.rebuild
        first = not unfiltered and not rebuild and ctx.instance_index == 0
        known = self.masks.static_class(ctx, n) if first else None
        known_masks = known[0] if known is not None else ()
        at = 0  # the next of ``known_masks``
        layout = table.layout
        for flt in self.filters:
            if rebuild and flt.name not in RUN_ON_REBUILD:
                continue
            if unfiltered and not flt.always_on:
                continue
            applied.append(flt)
            if known is not None and flt.static and not flt.refines:
                step = known_masks[at]
                at += 1
                static_steps.add(len(steps))
                if flt.once_per_request:  # what MaskCache.filter_mask leaves for the request's later instances
                    ctx.scratch[("once", flt.name)] = (step, layout)
            elif lazy and flt.refines:
                step = flt.prefilter(table, ctx)
                check = flt.exact(table, ctx) if step is not None else None
                if check is not None:
                    checks.append(check)
            else:
                before = len(static_keys)
                step = self.masks.filter_mask(flt, ctx, static_keys)
                if len(static_keys) > before and known is None:  # else ANDed on its own (not in ``known``)
                    static_steps.add(len(steps))
            steps.append((flt.name, step))
            if flt not in capping:
                continue
            flt_limits = flt.limits(table, ctx)
            if flt_limits:
                for rc, arr in flt_limits.items():
                    limits[rc] = arr if rc not in limits else np.fmin(limits[rc], arr)
        combined = known[1] if known is not None else \
            self.masks.combine([steps[i][1] for i in sorted(static_steps)], n)
        usage = [m for i, (_, m) in enumerate(steps) if m is not None and i not in static_steps]
        counted: tuple[int, np.ndarray] | None = None
        if self._kept_candidates(ctx, lazy, known is not None and not checks, n) and (combined is not None or usage):
            mask, count, has = table.derived.candidate_mask(
                [*([combined] if combined is not None else []), *usage], seq)
            counted = (count, has)
        else:
            mask = combined.copy() if combined is not None else np.ones(n, dtype=np.bool_)
            for m in usage:
                np.logical_and(mask, m[:n], out=mask)
        if checks:
            ranking = self._settle(ctx, mask, steps, limits, checks)
        else:
            ranking = self._score(ctx, mask, steps, limits, contributions, lazy=lazy,
                                  static=[steps[i][1] for i in static_steps], counted=counted)
        ranking.applied = tuple(applied)
        return ranking

    def _kept_candidates(self, ctx: RequestContext, lazy: bool, first: bool, n: int) -> bool:
        """Whether a decision keeps its candidate mask (``Derived.candidate_mask``): by blocks, over its class's
        static mask (the first instance, no forced host, no refining filter), of a request for one instance (the
        later instances of a request read its first one's mask: it must not move under them)."""
        return (lazy and first and self.keep_candidates and self._by_blocks and n >= self.block_min_rows
                and TIES not in ctx.scratch)

    def _score(self, ctx: RequestContext, mask: np.ndarray, steps: Steps,
               limits: dict[str, np.ndarray], contributions: dict[str, np.ndarray] | None,
               bounds: Bounds | None = None, *, lazy: bool = False, static: Sequence[np.ndarray | None] = (),
               counted: tuple[int, np.ndarray] | None = None) -> Ranking:
        """``lazy`` (a decision): over ``BLOCK_MIN_ROWS`` rows, the ranking may read the kept weighted sum
        through a ``BlockPick`` instead of masking every row's score; ``static``: the static filters' masks,
        whose aggregate sets bound that read (``_class_bounds``); ``counted``: the mask's count and its blocks
        that hold a candidate, when known (a kept mask)."""
        table = self.table
        n = table.n
        count = counted[0] if counted is not None else int(np.count_nonzero(mask))
        by_blocks = lazy and self._by_blocks and contributions is None and n >= self.block_min_rows
        allowed: np.ndarray | None = None
        if by_blocks:
            rows = None
            allowed = self.masks.allowed_codes(static, n)
            extremes = Extremes(table, mask, None, by_blocks=True, allowed=allowed if self.code_extremes else None,
                                has=counted[1] if counted is not None else None)
        else:
            rows = np.flatnonzero(mask) if count > 0 and count * 3 < n else None
            extremes = Extremes(table, mask, rows)
        shared = False
        blockmax: np.ndarray | None = None
        if count > 1:  # Nova returns a lone candidate unweighed (weight 0): nothing to rank it against
            score, offset, shared, blockmax = self.weighing.weigh(self.weighers, ctx, extremes, rows, contributions,
                                                                  bounds, by_blocks)
        else:
            score, offset = np.zeros(count if rows is not None else n), 0.0
        if blockmax is not None and by_blocks:
            pick = BlockPick(score, mask, self._class_bounds(score, blockmax, allowed, n), extremes.has)
            return Ranking(mask=mask, score=score, count=count, steps=steps, limits=limits, offset=offset, pick=pick)
        top = float(blockmax.max()) if blockmax is not None else None  # every row a candidate (see Weighing.weigh)
        if rows is None and count < n:
            # One pass that also copies the table's kept sums (``shared``); a scatter of -inf over the excluded
            # rows would need their row numbers first (a pass of its own) and a copy.
            score = np.where(mask, score, -np.inf)
            shared = False
        # Still the kept sum (``shared``): the engine copies it only if it takes a row beyond the ties it draws,
        # the one pass of a decision over every row that is seldom needed.
        return Ranking(mask=mask, score=score, count=count, steps=steps, limits=limits, rows=rows, offset=offset,
                       shared=shared, top=top)

    def _class_bounds(self, total: np.ndarray, blockmax: np.ndarray, allowed: np.ndarray | None,
                      n: int) -> np.ndarray:
        """Bounds per block of the kept sum ``total`` over the rows of the aggregate sets ``allowed`` (the static
        masks', when they allow fewer than all: ``MaskCache.allowed_codes``); else its ``blockmax``. A class that
        aggregates restrict (a zone, an extra spec's aggregate) spread over every block often has its best rows
        below the maxima of every block, held by rows of other aggregates (a weight multiplier's aggregate): by
        those maxima the pick read its whole budget of blocks for nothing, then took a pass over every row."""
        if allowed is None:
            return blockmax
        table = self.table
        maxima = table.derived.weighted_sum_code_blocks(total, table.col("aggset_code")[:n], len(allowed))
        if maxima is None or not allowed.any():
            return blockmax
        return maxima[allowed].max(axis=0)  # type: ignore[no-any-return]  # numpy's stubs type max as Any

    def _settle(self, ctx: RequestContext, mask: np.ndarray, steps: Steps,
                limits: dict[str, np.ndarray], checks: list[Callable[[int], bool]]) -> Ranking:
        """Weights over a superset of the candidates, made exact: Nova normalizes each weigher by its lowest and
        highest value over the candidates, and a superset may stretch those. Each extreme over the superset is
        checked to be held by some row that passes the exact checks; the rows holding an extreme that all fail
        leave the mask and the weights are made again. Then the weights of the rows that pass are Nova's, and
        the engine skips the rows that fail as it walks the order (``Ranking.exact``)."""
        def exact(row: int) -> bool:
            return all(check(row) for check in checks)

        while True:
            bounds: Bounds = []
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

    def refusal(self, ctx: RequestContext, ranking: Ranking, reason: str = "") -> NoValidHost:
        """The NoValidHost for a request this ranking cannot place, explained with every filter's exact mask, and
        counted by its reason."""
        if ranking.exact is not None:  # a decision's ranking: explain with every filter's exact mask
            ranking = self.rank(ctx)
        explanation = self.explain(ctx, ranking, reason)
        with self.stats.lock:
            self.stats.no_valid_host[explanation.reason or "unknown"] += 1
        prefix = f"instance {ctx.instance_index + 1} of {ctx.spec.num_instances}: " if ctx.spec.num_instances > 1 \
            else ""
        return NoValidHost(prefix + explanation.summary(), explanation)
