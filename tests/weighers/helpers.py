"""Small helpers shared by the weigher tests."""

from __future__ import annotations

from typing import Any

from gantt import Scheduler


def ranking(sched: Scheduler, spec: dict[str, Any]) -> list[str]:
    """Node names, best first (ties keep row order, as ``candidates`` sorts stably)."""
    return [c.nodename for c in sched.candidates(spec)]


def weights(sched: Scheduler, spec: dict[str, Any], weigher: str) -> dict[str, float]:
    """One weigher's contribution (normalized weight × multiplier) per node."""
    return {c.nodename: c.weights.get(weigher, 0.0) for c in sched.candidates(spec)}


def totals(sched: Scheduler, spec: dict[str, Any]) -> dict[str, float]:
    return {c.nodename: c.weight for c in sched.candidates(spec)}
