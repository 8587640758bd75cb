"""What the simulator measures from the truth table: nodes ever over capacity, the capacity figures of one sample
(utilization per zone, stranded capacity, fragmentation), the timeline the samples make, and what the run cost on
this machine."""

from __future__ import annotations

import resource
from collections import Counter
from typing import Any

import numpy as np

from gantt.compute.state import HostTable
from gantt.sim.cloud import CloudLayout


class Overcommit:
    """The overcommit invariant, incrementally: only a claim or a report can push a node past its capacity, so the
    node it touched is checked at that moment (``check``: every class at once, one short row of each column). A
    node found over stays counted even if a release later brings it back; the run's end adds a full ``audit``."""

    def __init__(self, truth: HostTable) -> None:
        self.truth = truth
        self.rows: set[int] = set()  # rows ever seen past a capacity

    def check(self, row: int) -> None:
        truth = self.truth
        rc = truth.rc
        k = len(truth.rc_index)
        used = rc["reported"][row, :k] + rc["inflight"][row, :k]
        if bool((used > rc["capacity"][row, :k] + 1e-6).any()):
            self.rows.add(row)

    def audit(self) -> None:
        """Every node against its capacity, every class (the full pass ``check`` stands in for)."""
        truth = self.truth
        for rc in truth.rc_index:
            cap = truth.rc_col("capacity", rc)
            if cap is not None:
                self.rows.update(np.flatnonzero(truth.used(rc) > cap + 1e-6).tolist())


def capacity_sample(truth: HostTable, layout: CloudLayout, up: np.ndarray, classes: list[str],
                    min_flavor: dict[str, int], big_flavor: dict[str, int]) -> dict[str, Any]:
    """Utilization (per zone and overall), stranded capacity and fragmentation of the hosts really ``up``."""
    n = layout.n
    zones = len(layout.zones)
    az = layout.az
    # Every class some host has an inventory of (VCPU, MEMORY_MB, DISK_GB and any other), of hosts really up.
    utilization: dict[str, list[float]] = {}
    utilization_all: dict[str, float] = {}
    free: dict[str, np.ndarray] = {}
    for rc in classes:
        cap = truth.rc_col("capacity", rc)
        assert cap is not None
        used = truth.used(rc)
        held = up & truth.has_rc(rc)
        zone_used = np.bincount(az, weights=np.where(held, used, 0.0), minlength=zones)
        zone_cap = np.bincount(az, weights=np.where(held, cap, 0.0), minlength=zones)
        utilization[rc] = (zone_used / np.maximum(zone_cap, 1e-9)).tolist()
        utilization_all[rc] = float(zone_used.sum() / max(zone_cap.sum(), 1e-9))
        free[rc] = np.where(held, np.maximum(cap - used, 0.0), 0.0)
    # Stranded: free capacity of one class on hosts where another class cannot fit even the smallest flavor.
    short = {rc: free[rc] < min_flavor.get(rc, 0) for rc in free}
    stranded: dict[str, float] = {}
    for rc, values in free.items():
        others = np.zeros(n, dtype=np.bool_)
        for other, mask in short.items():
            if other != rc:
                others |= mask
        total = float(values.sum())
        stranded[rc] = float(values[others].sum()) / total if total else 0.0
    free_v = free["VCPU"]
    total_free_v = float(free_v.sum())
    fits = np.full(n, np.inf)
    for rc, amount in big_flavor.items():
        if amount > 0 and rc in free:
            fits = np.minimum(fits, floor_divide(free[rc], amount))
    fits[~np.isfinite(fits)] = 0
    frag = 1.0 - float(fits.sum()) * big_flavor["VCPU"] / total_free_v if total_free_v and big_flavor["VCPU"] \
        else 0.0
    return {"utilization": utilization, "utilization_all": utilization_all, "stranded": stranded,
            "fragmentation": max(frag, 0.0)}


def timeline(samples: list[dict[str, Any]], zones: list[str], classes: list[str]) -> dict[str, Any]:
    """The samples as series, one list per figure (per class and zone for utilization)."""
    series: dict[str, Any] = {"t": [s["t"] for s in samples]}
    series["utilization"] = {rc: {z: [s["utilization"][rc][i] for s in samples] for i, z in enumerate(zones)}
                             for rc in classes}
    series["utilization_all"] = {rc: [s["utilization_all"][rc] for s in samples] for rc in classes}
    series["stranded"] = {rc: [s["stranded"][rc] for s in samples] for rc in classes}
    for key in ("hosts_up", "hosts_seen_up", "placed", "failed", "retries", "conflicts", "no_valid_host",
                "requests", "active", "queued", "schedulers_up", "fragmentation"):
        series[key] = [s[key] for s in samples]
    return series


def final_figures(samples: list[dict[str, Any]], zones: list[str], classes: list[str]) -> dict[str, Any]:
    """The last sample's capacity figures (utilization by zone name)."""
    final = samples[-1] if samples else {}
    return {"utilization": {rc: dict(zip(zones, final["utilization"][rc], strict=True))
                            for rc in classes} if final else {},
            "utilization_all": dict(final.get("utilization_all", {})),
            "stranded": dict(final.get("stranded", {})),
            "fragmentation": final.get("fragmentation", 0.0)}


def invariants(truth: HostTable, c: Counter[str], overcommitted: int) -> dict[str, Any]:
    """What must hold under any policy: no node over capacity, every instance asked for placed or failed, no claim
    on a host every table already knew lost, server groups kept, no CPU, huge page or PCI device booked twice."""
    return {
        "overcommitted_nodes": overcommitted,
        "conservation": c["instances_requested"] == c["instances_placed"] + c["instances_failed"],
        "claims_on_lost_hosts": c["claims_on_lost_hosts"],
        "claims_after_detection": c["claims_after_detection"],
        "builds_on_lost_hosts": c["builds_on_lost_hosts"],
        "server_group_violations": c["server_group_violations"],
        # a CPU pinned twice or huge pages over-used by the claims on a node; a PCI pool held over count
        "numa_overbooked_nodes": int(np.count_nonzero(truth.col("numa_overbooked"))),
        "pci_overbooked_nodes": sum(1 for row in range(truth.n) if truth.pci_overbooked(row))
        if truth.has_pci() else 0,  # no node with a PCI device: no pool to overbook (1M calls saved)
    }


def wall_clock(*, wall: float, cpu: float, build_wall: float, build_cpu: float, engine_ms: list[float],
               engine_wall: float) -> dict[str, Any]:
    """Real time on this machine: differs from run to run, so the results keep it apart from the rest."""
    eng = np.asarray(engine_ms) if engine_ms else np.zeros(1)
    engine_seconds = float(eng.sum()) / 1000.0
    return {
        "note": "real time of this run on this machine; differs between runs (everything else does not, "
                "unless decision_time is 'measured')",
        "wall_seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "simulator_overhead_cpu_seconds": round(max(cpu - engine_seconds, 0.0), 3),
        "build_wall_seconds": round(build_wall, 3),
        "build_cpu_seconds": round(build_cpu, 3),
        "peak_rss_mb": peak_rss_mb(),
        "engine": {"engine_seconds": round(engine_seconds, 3),
                   "engine_wall_seconds": round(engine_wall, 3),
                   "note": "engine CPU time per decision (thread time): immune to other processes' load",
                   "decisions_per_second": round(len(engine_ms) / engine_seconds, 1) if engine_seconds else 0.0,
                   "p50_ms": round(float(np.percentile(eng, 50)), 4),
                   "p99_ms": round(float(np.percentile(eng, 99)), 4),
                   "mean_ms": round(float(eng.mean()), 4)},
    }


def floor_divide(values: np.ndarray, by: int) -> np.ndarray:
    """``values // by`` for finite ``values`` and a whole ``by`` > 0 (a flavor's amount), bit for bit, at a
    fraction of its cost: numpy's float ``//`` goes through fmod (~20-28 ms per 1,000,000 values, three classes
    per timeline sample). A correctly rounded ``values / by`` could only err by rounding up onto the next integer
    (no such value was found for whole divisors: tests/sim); the check for it costs one pass, and is exact
    (``quotient * by`` is a product of whole numbers)."""
    quotient = np.floor(values / by)
    quotient -= quotient * by > values
    return quotient


def peak_rss_mb() -> float:
    """This process's peak resident set so far (everything it ran, not this simulation alone), in MiB."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)  # kB on Linux
