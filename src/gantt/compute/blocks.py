"""Blocks of rows: a column's highest or lowest value per block of ``BLOCK`` rows (built, and patched on changed
rows), and the searches that use them: the candidates' extreme of a column (``masked_extreme``) or the best few of a
score (``masked_best``) read only the blocks that can hold it instead of every candidate. Arrays in, arrays out: the
caches that keep block bounds current from the row journal are gantt.compute.journal's.
"""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Set as AbstractSet

import numpy as np

BLOCK = 1024  # rows per block: the unit of the block bounds below
EXTREME_BUDGET = 84  # blocks ``masked_extreme`` reads (chunks of 4, 16, 64) before it takes a full pass instead


def block_reduce(values: np.ndarray, *, highest: bool) -> np.ndarray:
    """The highest (lowest) of ``values`` per block of ``BLOCK`` rows, the last block possibly shorter."""
    n = len(values)
    full = n - n % BLOCK
    reduce = np.maximum if highest else np.minimum
    out = reduce.reduce(values[:full].reshape(-1, BLOCK), axis=1)
    if full < n:
        out = np.append(out, reduce.reduce(values[full:]))
    return out  # type: ignore[no-any-return]  # numpy's stubs type a ufunc's reduce as Any


def patch_blocks(bounds: np.ndarray, values: np.ndarray, changed: np.ndarray, *, highest: bool) -> None:
    """Recompute ``bounds`` (from ``block_reduce``) on the blocks holding the ``changed`` rows."""
    touched = _blocks_of(changed)
    if len(touched) * 8 > len(bounds):
        # Past an eighth of the blocks one contiguous pass costs less than a reduction per block (a stale kept
        # sum caught up after many decisions; a gather of those blocks' rows cost more than either, 2-6 ms).
        bounds[:] = block_reduce(values, highest=highest)
        return
    reduce = np.maximum if highest else np.minimum
    for block in touched:
        bounds[block] = reduce.reduce(values[block * BLOCK:(block + 1) * BLOCK])


def _blocks_of(changed: np.ndarray) -> list[int]:
    """The distinct blocks holding the ``changed`` rows (which may repeat)."""
    if len(changed) <= 64:
        return list({row // BLOCK for row in changed.tolist()})
    return np.unique(changed // BLOCK).tolist()  # type: ignore[no-any-return]  # numpy's stubs: tolist is Any


def code_block_max(values: np.ndarray, codes: np.ndarray, ncodes: int, *, highest: bool = True) -> np.ndarray:
    """The highest (lowest) of ``values`` per (code, block of ``BLOCK`` rows): ``out[c, b]`` over the rows of block
    ``b`` whose code is ``c`` (-inf, +inf, where none is). The maxima of a class of rows whose codes are ``allowed``
    are then ``out[allowed].max(axis=0)``: bounds for that class alone, where ``block_reduce`` bounds every row."""
    n = len(values)
    nblocks = -(-n // BLOCK)
    # each row's cell, code * nblocks + block, in place: the block added per row of a (blocks, BLOCK) view (an
    # arange of every row and its division cost twice the reduction at 1,000,000 rows)
    cell = codes[:n].astype(np.intp)
    cell *= nblocks
    full = n - n % BLOCK
    cell[:full].reshape(-1, BLOCK)[...] += np.arange(full // BLOCK, dtype=np.intp)[:, None]
    cell[full:] += full // BLOCK
    out = np.full(ncodes * nblocks, -np.inf if highest else np.inf)
    reduce = np.maximum if highest else np.minimum
    reduce.at(out, cell, values[:n])
    return out.reshape(ncodes, nblocks)


def patch_code_blocks(maxima: np.ndarray, values: np.ndarray, codes: np.ndarray, changed: np.ndarray, *,
                      highest: bool = True) -> None:
    """Recompute ``maxima`` (from ``code_block_max``) on the (code, block) cells of the ``changed`` rows."""
    nblocks = maxima.shape[1]
    if len(changed) <= 64:
        cells = list({int(codes[row]) * nblocks + row // BLOCK for row in changed.tolist()})
    else:
        cells = np.unique(codes[changed].astype(np.intp) * nblocks + changed // BLOCK).tolist()
    if len(cells) * 2 * BLOCK > len(values):
        # a cell costs a pass over its block (~12 us): past half as many cells as blocks, one build over every
        # row costs less (a burst of reports; a kept sum caught up after many decisions: at 1,000,000 rows a
        # build is ~6 ms, and was ~11-20 ms when a fixed limit of 256 changed rows paid it for 3 ms of cells)
        maxima[...] = code_block_max(values, codes, maxima.shape[0], highest=highest)
        return
    for cell in cells:
        code, block = divmod(cell, nblocks)
        start = block * BLOCK
        part = values[start:start + BLOCK][codes[start:start + BLOCK] == code]
        maxima[code, block] = part.max() if highest else part.min()


def class_bounds(cells: np.ndarray, allowed: np.ndarray, *, highest: bool) -> np.ndarray:
    """Per block, the bound over the rows whose codes are ``allowed`` (``cells`` from ``code_block_max``)."""
    part = cells[allowed]
    return part.max(axis=0) if highest else part.min(axis=0)  # type: ignore[no-any-return]  # numpy stubs: Any


def blocks_with(mask: np.ndarray) -> np.ndarray:
    """Per block of ``BLOCK`` rows: does ``mask`` mark any row of it (a pass over the mask's bytes as words)."""
    n = len(mask)
    full = n - n % BLOCK
    head = np.ascontiguousarray(mask[:full]).view(np.uint64).reshape(-1, BLOCK // 8)
    out = np.bitwise_or.reduce(head, axis=1) != 0
    if full < n:
        out = np.append(out, bool(mask[full:].any()))
    return out  # type: ignore[no-any-return]  # numpy's stubs type np.append as Any


def _chunks(order: np.ndarray, bounds: np.ndarray) -> Iterator[tuple[float, int, np.ndarray]]:
    """The blocks of ``order`` in growing chunks (few first: the best few rows usually lie in the first blocks):
    (bound of the chunk's first block, that block, the chunk's blocks)."""
    start, size = 0, 4
    while start < len(order):
        first = int(order[start])
        yield float(bounds[first]), first, order[start:start + size]
        start += size
        size = min(size * 4, 256)


def rows_of(blocks: np.ndarray, n: int) -> np.ndarray:
    rows = (blocks[:, None] * BLOCK + np.arange(BLOCK)).ravel()
    return rows[rows < n] if len(blocks) and int(blocks.max()) * BLOCK + BLOCK > n else rows


def masked_extreme(values: np.ndarray, mask: np.ndarray, bounds: np.ndarray, has: np.ndarray, *,
                   highest: bool) -> float | None:
    """max (min) of ``values`` over the rows ``mask`` marks, or None when it marks none. ``bounds`` is
    ``block_reduce(values)``, ``has`` is ``blocks_with(mask)``. Blocks are read in order of their bound, most
    extreme first, until no block left can hold a more extreme value than the one found."""
    done, best = search_extreme(values, mask, bounds, has, highest=highest, budget=EXTREME_BUDGET)
    if not done:
        # the extreme rows are not candidates (down, another aggregate): one pass over every row instead
        return extreme_by_pass(values, mask, highest=highest)
    return best


def search_extreme(values: np.ndarray, mask: np.ndarray, bounds: np.ndarray, has: np.ndarray, *, highest: bool,
                   budget: int) -> tuple[bool, float | None]:
    """``masked_extreme``'s search by blocks: (True, the extreme), or (False, None) when it would read more than
    ``budget`` blocks."""
    n = len(mask)
    if highest:
        keyed = np.where(has, bounds, -np.inf)
        order = np.argsort(-keyed, kind="stable")
    else:
        keyed = np.where(has, bounds, np.inf)
        order = np.argsort(keyed, kind="stable")
    best: float | None = None
    visited = 0
    for bound, _, chunk in _chunks(order, keyed):
        if bound in (np.inf, -np.inf):
            break  # no candidate in this block nor in any after it
        if best is not None and (bound <= best if highest else bound >= best):
            break
        if visited >= budget:
            return False, None
        visited += len(chunk)
        rows = rows_of(chunk, n)
        picked = values.take(rows[mask.take(rows)])
        if len(picked):
            value = float(picked.max() if highest else picked.min())
            if best is None or (value > best if highest else value < best):
                best = value
    return True, best


def extreme_by_pass(values: np.ndarray, mask: np.ndarray, *, highest: bool) -> float | None:
    """max (min) of ``values`` over the rows ``mask`` marks, by a pass over every row (None: it marks none)."""
    shadow = np.where(mask, values, -np.inf if highest else np.inf)
    value = float(shadow.max() if highest else shadow.min())
    return None if value in (np.inf, -np.inf) else value


def masked_best(values: np.ndarray, mask: np.ndarray, blockmax: np.ndarray, has: np.ndarray, k: int,
                taken: AbstractSet[int] = frozenset(), *, budget: int | None = None) -> list[int] | None:
    """The ``k`` rows ``mask`` marks (``taken`` left out) with the highest ``values``, highest first, the lowest
    row first among equals: the order repeated ``argmax`` gives. ``blockmax`` is an upper bound of the marked
    values per block of ``BLOCK`` rows (``block_reduce(values)``, or of the masked values), ``has`` is
    ``blocks_with(mask)``. Blocks are read in order of their bound (the lower block first among equals) until no
    block left can hold a row that beats the k-th found: one whose bound is lower, or equal and whose first row
    lies past the k-th found. None when that takes more than ``budget`` blocks (the bounds are too loose: the
    caller tightens them)."""
    n = len(mask)
    keyed = np.where(has, blockmax, -np.inf)
    order = np.argsort(-keyed, kind="stable")
    best_rows = np.empty(0, dtype=np.intp)
    best_values = np.empty(0, dtype=values.dtype)
    excluded = np.fromiter(taken, dtype=np.intp, count=len(taken)) if taken else None
    visited = 0
    for bound, first, chunk in _chunks(order, keyed):
        if bound == -np.inf:
            break
        if len(best_rows) >= k:
            kth = float(best_values[k - 1])
            if bound < kth or (bound == kth and first * BLOCK > int(best_rows[k - 1])):
                break
        if budget is not None and visited >= budget:
            return None
        visited += len(chunk)
        rows = rows_of(np.sort(chunk), n)  # ascending: the first of equal values is the lowest row
        rows = rows[mask.take(rows)]
        if excluded is not None:
            rows = rows[~np.isin(rows, excluded)]
        if not len(rows):
            continue
        found = values.take(rows)
        if len(best_rows) >= k:  # only rows that can still enter the best k
            keep = found >= best_values[k - 1]
            rows, found = rows[keep], found[keep]
        rows, found = _top(rows, found, k)
        rows = np.concatenate((best_rows, rows))
        found = np.concatenate((best_values, found))
        keep = np.lexsort((rows, -found))[:k]
        best_rows, best_values = rows[keep], found[keep]
    return best_rows.tolist()


def _top(rows: np.ndarray, values: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The (at most) ``k`` of ``rows`` (ascending) with the highest ``values`` (a copy of the caller's, consumed),
    the lowest rows among equals: ``k`` argmax passes, far cheaper than a partition for the few rows a pick
    wants."""
    if len(values) <= k:
        return rows, values
    picked = np.empty(k, dtype=np.intp)
    best = np.empty(k, dtype=values.dtype)
    for j in range(k):
        i = int(values.argmax())
        picked[j] = i
        best[j] = values[i]
        values[i] = -np.inf
    return rows[picked], best
