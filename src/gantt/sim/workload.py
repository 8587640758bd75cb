"""The simulated workload: when requests arrive (a Poisson process with bursts), what each asks for (flavor,
instances, server group, zone, project), how long each instance lives, and the instances already running at the
start (the prefill), all drawn from one random stream so a seed replays the same requests."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from gantt.compute.state import ClaimRejected, HostTable
from gantt.model import Allocation, Flavor, InstanceGroup, RequestSpec
from gantt.sim.scenario import FlavorSpec, Lifetime
from gantt.sim.scenario import Workload as WorkloadSpec


@dataclass(slots=True)
class Request:
    index: int
    arrival: float
    spec: RequestSpec
    consumers: list[str]
    resources: dict[str, int]
    policy: str | None  # server group policy
    scheduler: int = -1
    pending: int = 0  # instances not yet resolved
    hosts: list[int] = field(default_factory=list)  # rows of the placed instances
    failed: int = 0


class Arrivals:
    """A Poisson process whose rate is piecewise constant: the base rate, replaced during bursts."""

    def __init__(self, base: float, bursts: list[tuple[float, float, float]], rng: random.Random) -> None:
        self.rng = rng
        points = sorted({0.0, *(b[0] for b in bursts), *(b[0] + b[1] for b in bursts)})
        self.segments: list[tuple[float, float]] = []  # (start, rate) from each breakpoint on
        for start in points:
            rates = [rate for at, dur, rate in bursts if at <= start < at + dur]
            self.segments.append((start, max(rates) if rates else base))

    def next(self, t: float) -> float:
        need = self.rng.expovariate(1.0)
        segs = self.segments
        i = 0
        while i + 1 < len(segs) and segs[i + 1][0] <= t:
            i += 1
        while True:
            rate = segs[i][1]
            end = segs[i + 1][0] if i + 1 < len(segs) else math.inf
            if rate > 0 and rate * (end - t) >= need:
                return t + need / rate
            if end == math.inf:
                return math.inf
            need -= rate * (end - t)
            t = end
            i += 1


def lifetime_sampler(spec: Lifetime, rng: random.Random) -> Callable[[], float | None]:
    if spec.distribution == "forever":
        return lambda: None
    if spec.distribution == "fixed":
        return lambda: spec.mean
    if spec.distribution == "uniform":
        return lambda: rng.uniform(spec.min, spec.max)
    if spec.distribution == "lognormal":
        mu = math.log(spec.mean) - spec.sigma ** 2 / 2  # so that the mean is ``mean``
        return lambda: rng.lognormvariate(mu, spec.sigma)
    rate = 1.0 / spec.mean
    return lambda: rng.expovariate(rate)


def _needs(f: FlavorSpec) -> dict[str, int]:
    return {"VCPU": f.vcpus, "MEMORY_MB": f.memory_mb, "DISK_GB": f.root_gb + f.ephemeral_gb}


class Workload:
    """The scenario's workload on its random stream (``rng``, shared with nothing but the instances' lifetimes)."""

    def __init__(self, spec: WorkloadSpec, zones: list[str], rng: random.Random, start: float) -> None:
        self.spec = spec
        self.zones = zones
        self.rng = rng
        self.flavors = [Flavor(name=f.name, vcpus=f.vcpus, memory_mb=f.memory_mb, root_gb=f.root_gb,
                               ephemeral_gb=f.ephemeral_gb, extra_specs=dict(f.extra_specs)) for f in spec.flavors]
        self.flavor_weights = list(np.cumsum([f.weight for f in spec.flavors]))
        self.arrivals = Arrivals(spec.rate, [(start + b.at, b.duration, b.rate) for b in spec.bursts], rng)
        self.lifetime = lifetime_sampler(spec.lifetime, rng)
        self.projects = [f"project-{i}" for i in range(spec.projects)]
        # the smallest amount of each class any flavor asks (stranded capacity is what cannot hold even that), and
        # the biggest flavor (fragmentation is the room it loses to scattered free capacity)
        self.min_flavor = {rc: min(_needs(f)[rc] for f in spec.flavors) for rc in ("VCPU", "MEMORY_MB", "DISK_GB")}
        big = max(spec.flavors, key=lambda f: (f.vcpus, f.memory_mb))
        self.big_flavor = (big.name, _needs(big))

    def prefill(self, truth: HostTable, names: list[str], seed: int, depart: Callable[[float, str], None]) -> int:
        """Claim instances on random hosts of ``truth`` until the prefill's share of VCPU is used (or 200 claims in
        a row are refused); ``depart(lifetime, consumer)`` for each that does not live forever. How many claimed."""
        pf = self.spec.prefill
        if pf.vcpu_fraction <= 0:
            return 0
        cap = truth.rc_col("capacity", "VCPU")
        target = float(cap.sum()) * pf.vcpu_fraction if cap is not None else 0.0
        flavors = [f.name for f in self.flavors]
        rows = np.random.default_rng(seed + 1).integers(0, len(names), size=64)
        used = 0.0
        i = 0
        misses = 0
        claimed = 0
        while used < target and misses < 200:
            if i % 64 == 0:
                rows = np.random.default_rng(seed + 1 + i).integers(0, len(names), size=64)
            row = int(rows[i % 64])
            flavor = self.flavors[flavors.index(pf.flavor)] if pf.flavor else self.pick_flavor()
            resources = {"VCPU": flavor.vcpus, "MEMORY_MB": flavor.memory_mb,
                         "DISK_GB": flavor.root_gb + flavor.ephemeral_gb}
            key = (names[row], names[row])
            consumer = f"pre-{i}"
            i += 1
            try:
                truth.claim(key, Allocation(consumer_uuid=consumer, host=key[0], nodename=key[1],
                                            resources=resources, project_id="prefill"))
            except ClaimRejected:
                misses += 1
                continue
            misses = 0
            used += flavor.vcpus
            claimed += 1
            life = self.lifetime()
            if life is not None:
                depart(life, consumer)
        return claimed

    def pick_flavor(self) -> Flavor:
        x = self.rng.random() * self.flavor_weights[-1]
        for i, w in enumerate(self.flavor_weights):
            if x < w:
                return self.flavors[i]
        return self.flavors[-1]

    def request(self, index: int, t: float) -> Request:
        """Request number ``index``, arriving at ``t``."""
        wl = self.spec
        rng = self.rng
        flavor = self.pick_flavor()
        count = 1
        group: InstanceGroup | None = None
        policy: Literal["affinity", "anti-affinity"] | None = None
        if wl.server_groups.probability and rng.random() < wl.server_groups.probability:
            sg = wl.server_groups
            count = rng.randint(sg.min, sg.max)
            policy = "anti-affinity" if rng.random() < sg.anti_affinity else "affinity"
            group = InstanceGroup(uuid=f"group-{index}", policy=policy)
        elif wl.multi_instance.probability and rng.random() < wl.multi_instance.probability:
            count = rng.randint(wl.multi_instance.min, wl.multi_instance.max)
        zone = None
        if wl.az_fraction and rng.random() < wl.az_fraction:
            zone = self.zones[rng.randrange(len(self.zones))]
        consumers = [f"r{index}-{k}" for k in range(count)]
        project = self.projects[rng.randrange(len(self.projects))]
        spec = RequestSpec(flavor=flavor, project_id=project, user_id="sim", availability_zone=zone,
                           num_instances=count, instance_uuids=consumers, instance_group=group,
                           request_id=f"req-{index}")
        resources = {"VCPU": flavor.vcpus, "MEMORY_MB": flavor.memory_mb,
                     "DISK_GB": flavor.root_gb + flavor.ephemeral_gb}
        return Request(index=index, arrival=t, spec=spec, consumers=consumers, resources=resources,
                       policy=policy, pending=count)
