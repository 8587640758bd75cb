"""Block bounds patched on changed rows (``blocks.patch_blocks``, ``blocks.patch_code_blocks``) equal a fresh
build whichever way they are patched (a reduction per block or per (code, block) cell, or one pass over every row),
and a kept weighted sum caught up after many decisions patches its per-set maxima cell by cell while that costs
less than a build over every row (issue 35 item 2: the tail of a decision at 1,000,000 hosts)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gantt.compute import blocks as blocks_mod
from gantt.compute.blocks import block_reduce, code_block_max, patch_blocks, patch_code_blocks
from gantt.compute.journal import RowJournal, WeightedSums

BLOCK = 16


@pytest.fixture(autouse=True)
def _small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blocks_mod, "BLOCK", BLOCK)


def _counted(monkeypatch: pytest.MonkeyPatch, name: str) -> list[Any]:
    calls: list[Any] = []
    real = getattr(blocks_mod, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(blocks_mod, name, counted)
    return calls


def test_patched_bounds_equal_a_fresh_build_by_every_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Generated tables and changes from none to hundreds of rows (repeats included): both the per-block and the
    whole-column path of ``patch_blocks``, and the per-cell and whole-build path of ``patch_code_blocks``, run
    and give exactly what a fresh build gives."""
    whole = _counted(monkeypatch, "block_reduce")
    rebuilt = _counted(monkeypatch, "code_block_max")
    rng = np.random.default_rng(5)
    paths = {"blocks whole": 0, "blocks each": 0, "cells whole": 0, "cells each": 0}
    for _ in range(300):
        n = int(rng.integers(1, 3000))
        ncodes = int(rng.integers(1, 9))
        codes = rng.integers(0, ncodes, n).astype(np.int32)
        values = rng.integers(0, 50, n).astype(float)
        highest = bool(rng.random() < 0.5)
        bounds = block_reduce(values, highest=highest)
        cells = code_block_max(values, codes, ncodes, highest=highest)
        hot = rng.integers(0, n, int(rng.integers(1, 40)))  # a few rows changed again and again, or any rows
        size = int(rng.choice([0, 3, 20, 70, 300]))
        changed = rng.choice(hot, size) if rng.random() < 0.5 else rng.integers(0, n, size)
        values[changed] = rng.integers(-20, 70, len(changed))
        before = len(whole), len(rebuilt)
        patch_blocks(bounds, values, changed, highest=highest)
        patch_code_blocks(cells, values, codes, changed, highest=highest)
        paths["blocks whole" if len(whole) > before[0] else "blocks each"] += 1
        paths["cells whole" if len(rebuilt) > before[1] else "cells each"] += 1
        assert np.array_equal(bounds, block_reduce(values, highest=highest))
        assert np.array_equal(cells, code_block_max(values, codes, ncodes, highest=highest))
    assert all(paths.values()), paths


def test_a_stale_kept_sum_patches_its_per_set_maxima_cell_by_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kept sum a class reads once in many decisions catches up on every claim since: 300 journal entries on
    12 rows of 6,400 here. That is 12 cells to patch, not a build of every (set, block) over every row (at
    1,000,000 rows ~20 ms, the tail of the decisions: on main any catch-up past 256 entries rebuilt)."""
    n, ncodes = 400 * BLOCK, 6
    rng = np.random.default_rng(9)
    column = rng.random(n)
    codes = rng.integers(0, ncodes, n).astype(np.int32)
    journal = RowJournal()
    sums = WeightedSums()
    terms: list[Any] = [(column, 2.0, 0.0, None)]
    total, _ = sums.get_blocks("k", terms, n=n, static_revision=1, journal=journal)
    maxima = sums.code_blocks(total, codes, ncodes)
    assert maxima is not None
    rebuilt = _counted(monkeypatch, "code_block_max")
    rows = rng.choice(n, 12, replace=False)
    for step in range(300):
        row = int(rows[step % len(rows)])
        column[row] = rng.random()
        journal.append(row)
    total, blockmax = sums.get_blocks("k", terms, n=n, static_revision=1, journal=journal)
    assert not rebuilt
    assert np.array_equal(total, column * 2.0)
    assert np.array_equal(blockmax, block_reduce(total, highest=True))
    assert sums.code_blocks(total, codes, ncodes) is maxima
    assert np.array_equal(maxima, code_block_max(total, codes, ncodes))
