"""Nova's test-only weigher, for Gantt: most of Nova's functional tests make the scheduler's choice deterministic
with ``nova.tests.fixtures.nova.HostNameWeigherFixture``, which sets ``[filter_scheduler] weight_classes`` to
``HostNameWeigher`` alone and gives it a weight per host name (``{'host1': 100, 'host2': 50, 'host3': 10}`` unless
the test says otherwise). Registered in the test worker only (swap.py), never in a deployment's Gantt: its weights
are the fixture's, read when Gantt's scheduler builds the weigher (the fixture is in place before the test starts
its scheduler service)."""

from __future__ import annotations

from typing import Any

import numpy as np

from gantt.compute.weighers.base import WEIGHERS, Weigher, register


class HostNameWeigher(Weigher):
    """Raw value: the fixture's weight for the node's host, 0 for a host it does not name (as Nova's)."""

    name = "HostNameWeigher"

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        from nova.tests.fixtures import HostNameWeigher as NovaHostNameWeigher

        # Nova's class raises unless the fixture patched get_weights: the same refusal here.
        self.weights: dict[str, float] = dict(NovaHostNameWeigher().weights)

    def multiplier(self) -> float:
        return 1.0  # Nova's BaseHostWeigher default; the fixture sets no multiplier option

    def raw(self, table: Any, ctx: Any, mask: np.ndarray | None = None) -> np.ndarray | None:
        hosts = table.host_names
        return np.fromiter((self.weights.get(hosts[row], 0) for row in range(table.n)), dtype=np.float64,
                           count=table.n)


def install() -> None:
    if HostNameWeigher.name not in WEIGHERS:
        register(HostNameWeigher)
