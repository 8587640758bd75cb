"""``HostTable.fits`` (the claim's compare and the alternates' check) reads Python floats instead of numpy scalars
for speed: its verdicts must be those of the same rules evaluated on the numpy columns, row by row."""

from __future__ import annotations

import random

import numpy as np

from gantt.model import Allocation
from tests.conftest import make_scheduler


def _reference(table: object, row: int, resources: dict[str, int], limits: dict[str, float] | None) -> str | None:
    rc = table.rc  # type: ignore[attr-defined]
    for name, amount in resources.items():
        if amount <= 0:
            continue
        j = table.rc_index.get(name)  # type: ignore[attr-defined]
        if j is None or not table.has_inventory[row, j]:  # type: ignore[attr-defined]
            return name
        if rc["free"][row, j] < np.float64(amount) - 1e-9:
            return name
        if np.float64(amount) < rc["min_unit"][row, j] or np.float64(amount) > rc["max_unit"][row, j]:
            return name
        if np.remainder(np.float64(amount), rc["step_size"][row, j]):
            return name
        if limits and name in limits and rc["reported"][row, j] + rc["inflight"][row, j] + amount > \
                limits[name] + 1e-9:
            return name
    return None


def test_fits_gives_the_verdicts_of_the_numpy_columns() -> None:
    rng = random.Random(5)
    sched = make_scheduler({f"h{i}": {"vcpus": 8 + i % 5, "memory_mb": 16384 + 512 * i, "local_gb": 100 + i}
                            for i in range(30)})
    table = sched.table
    n, k = table.n, len(table.rc_index)
    for step in range(120):  # usage near the edges, so that "free" decides some verdicts
        host = f"h{rng.randrange(30)}"
        resources = {"VCPU": rng.choice([1, 2, 3]), "MEMORY_MB": rng.choice([512, 1024, 4096])}
        table.put_allocation(Allocation(consumer_uuid=f"c{step}", host=host, nodename=host, resources=resources))
    rcs = table.rc
    for row in range(n):  # unit bounds and steps of every kind, some of which refuse many amounts
        rcs["min_unit"][row, :k] = rng.choice([1, 2, 4])
        rcs["max_unit"][row, :k] = rng.choice([2, 8, 4096, 1 << 20])
        rcs["step_size"][row, :k] = rng.choice([1, 1, 2, 3, 512])
    verdicts: set[str | None] = set()
    for _ in range(3000):
        row = rng.randrange(n)
        resources = {"VCPU": rng.choice([0, 1, 2, 3, 4, 6, 9, 40]),
                     "MEMORY_MB": rng.choice([1, 2, 512, 1024, 1536, 40000])}
        if rng.random() < 0.1:
            resources["CUSTOM_NONE"] = 1
        limits = {"VCPU": float(rng.choice([4, 8, 12, 20]))} if rng.random() < 0.5 else None
        got = table.fits(row, resources, limits)
        assert got == _reference(table, row, resources, limits), (row, resources, limits)
        verdicts.add(got)
    assert verdicts == {None, "VCPU", "MEMORY_MB", "CUSTOM_NONE"}  # every kind of answer was asked
