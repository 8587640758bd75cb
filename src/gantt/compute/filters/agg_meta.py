"""Aggregate metadata as Nova's filters read it, evaluated once per aggregate set (not per host).

Every node carries an aggregate-set code (``aggset_code``): nodes in the same aggregates share it. A predicate over
a set's metadata therefore runs once per distinct set and reaches the rows through one lookup table.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gantt.compute.state import HostTable

Metadata = dict[str, frozenset[str]]


def metadata_by_aggset(table: HostTable) -> list[Metadata]:
    """Per aggregate-set code, Nova's aggregate_metadata_get_by_host: key -> every value across the set's
    aggregates, each value split on commas and stripped."""

    def build() -> list[Metadata]:
        out: list[Metadata] = []
        for aggset in table.factor("aggregates").values:
            merged: dict[str, set[str]] = {}
            for key in aggset:
                agg = table.aggregate(key)
                if agg is None:
                    continue
                for name, value in agg.metadata.items():
                    merged.setdefault(name, set()).update(part.strip() for part in value.split(","))
            out.append({name: frozenset(values) for name, values in merged.items()})
        return out

    return table.static_cache(("nova_metadata_by_aggset",), build)


def rows_where(table: HostTable, predicate: Callable[[Metadata], bool]) -> np.ndarray:
    """Bool mask over live rows: ``predicate`` of each node's merged aggregate metadata."""
    sets = metadata_by_aggset(table)
    lut = np.fromiter((bool(predicate(meta)) for meta in sets), dtype=np.bool_, count=len(sets))
    mask: np.ndarray = lut[table.col("aggset_code")]
    return mask


def limit_per_node(table: HostTable, key: str, default: float) -> float | np.ndarray:
    """A per-node integer limit: the lowest value of ``key`` across the node's aggregates, else ``default``.

    As Nova's validate_num_values(cast_to=int): one value that is not an integer voids the node's whole set, and
    the default applies.
    """
    per_aggregate = table.metadata_min(key, int)
    return default if per_aggregate is None else np.where(np.isnan(per_aggregate), default, per_aggregate)
