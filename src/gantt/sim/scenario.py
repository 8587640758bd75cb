"""A simulation scenario: the cloud, the workload, the control plane, failures and the policy (read from TOML by
gantt.sim.loader).

Every section is a msgspec Struct with ``forbid_unknown_fields`` so a typo is an error, and every error names the
offending field as a path (``cloud.hosts_per_rack``), never just "invalid scenario".
"""

from __future__ import annotations

from typing import Any, Literal

from msgspec import Struct, field

from gantt.config import Config
from gantt.model import InvalidRequest, prepare_types
from gantt.sim.volumes import Volumes

__all__ = ["Scenario", "ScenarioError"]


class ScenarioError(InvalidRequest):
    """A scenario that cannot run; ``field`` names where (``workload.flavors[1].vcpus``)."""

    title = "Invalid scenario"


class NUMALayout(Struct, forbid_unknown_fields=True, kw_only=True):
    """A host kind's NUMA topology, as libvirt would report it: ``cells`` equal cells sharing the kind's CPUs and
    memory, cores of ``threads`` siblings, the last ``dedicated`` share of each cell's cores in the dedicated set
    (PCPU, for pinned guests; the rest shared, VCPU), and per cell ``page_2m_mb`` MiB of 2 MiB pages and
    ``pages_1g`` 1 GiB pages (the rest in 4 KiB pages)."""

    cells: int = 2
    threads: int = 2
    dedicated: float = 0.5
    page_2m_mb: int = 0
    pages_1g: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.cells <= 16 or not 1 <= self.threads <= 8:
            raise ValueError("cells must be in 1..16 and threads in 1..8")
        if not 0 <= self.dedicated <= 1:
            raise ValueError("dedicated must be in [0, 1]")
        if self.page_2m_mb < 0 or self.page_2m_mb % 2 or self.pages_1g < 0:
            raise ValueError("page_2m_mb must be an even number of MiB >= 0 and pages_1g >= 0")


class HostKind(Struct, forbid_unknown_fields=True, kw_only=True):
    """One kind of hardware; racks are homogeneous and take a kind by ``weight``. ``numa``: its NUMA topology
    (none: the kind reports none); ``pci``: its PCI device pools, in a host report's ``pci_stats`` shape."""

    name: str
    weight: float = 1.0
    vcpus: int
    memory_mb: int
    local_gb: int
    cpu_allocation_ratio: float = 4.0
    ram_allocation_ratio: float = 1.0
    disk_allocation_ratio: float = 1.0
    hypervisor_type: str = "QEMU"
    hypervisor_version: int = 8002000
    traits: list[str] = field(default_factory=list)
    numa: NUMALayout | None = None
    pci: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.weight < 0:
            raise ValueError("weight must be >= 0")
        if min(self.vcpus, self.memory_mb, self.local_gb) <= 0:
            raise ValueError("vcpus, memory_mb and local_gb must be > 0")
        numa = self.numa
        if numa is not None:
            if self.vcpus % (numa.cells * numa.threads):
                raise ValueError("vcpus must split into numa.cells cells of whole cores of numa.threads threads")
            if self.memory_mb % numa.cells:
                raise ValueError("memory_mb must split evenly into numa.cells cells")
            if numa.page_2m_mb + numa.pages_1g * 1024 > self.memory_mb // numa.cells:
                raise ValueError("numa: a cell's huge pages exceed its memory")


class AggregateSpec(Struct, forbid_unknown_fields=True, kw_only=True):
    """Hosts chosen by rack, zone and/or kind (all given selectors must match), then a random ``fraction``."""

    name: str
    metadata: dict[str, str] = field(default_factory=dict)
    racks: list[str] | None = None
    azs: list[str] | None = None
    host_kinds: list[str] | None = None
    fraction: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.fraction <= 1:
            raise ValueError("fraction must be in (0, 1]")


class Cloud(Struct, forbid_unknown_fields=True, kw_only=True):
    azs: list[str] = field(default_factory=lambda: ["az1"])
    racks_per_az: int = 1
    hosts_per_rack: int = 10
    host_kinds: list[HostKind] = field(default_factory=list)
    aggregates: list[AggregateSpec] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.azs or len(set(self.azs)) != len(self.azs):
            raise ValueError("azs must be a non-empty list of distinct names")
        if self.racks_per_az < 1 or self.hosts_per_rack < 1:
            raise ValueError("racks_per_az and hosts_per_rack must be >= 1")
        if not self.host_kinds:
            raise ValueError("host_kinds must name at least one kind of host")
        if sum(k.weight for k in self.host_kinds) <= 0:
            raise ValueError("host_kinds weights must not all be 0")

    @property
    def hosts(self) -> int:
        return len(self.azs) * self.racks_per_az * self.hosts_per_rack


class FlavorSpec(Struct, forbid_unknown_fields=True, kw_only=True):
    name: str
    vcpus: int
    memory_mb: int
    root_gb: int = 0
    ephemeral_gb: int = 0
    weight: float = 1.0
    extra_specs: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.vcpus < 0 or self.memory_mb < 0 or self.root_gb < 0 or self.ephemeral_gb < 0:
            raise ValueError("vcpus, memory_mb, root_gb and ephemeral_gb must be >= 0")
        if self.weight < 0:
            raise ValueError("weight must be >= 0")


class Burst(Struct, forbid_unknown_fields=True, kw_only=True):
    """During [at, at + duration) requests arrive at ``rate`` per second instead of the base rate."""

    at: float
    duration: float
    rate: float

    def __post_init__(self) -> None:
        if self.duration <= 0 or self.rate < 0 or self.at < 0:
            raise ValueError("at and rate must be >= 0, duration > 0")


class Lifetime(Struct, forbid_unknown_fields=True, kw_only=True):
    distribution: Literal["exponential", "lognormal", "fixed", "uniform", "forever"] = "exponential"
    mean: float = 3600.0  # seconds; for uniform the range is [min, max]
    sigma: float = 1.0  # lognormal shape
    min: float = 0.0
    max: float = 0.0

    def __post_init__(self) -> None:
        if self.mean <= 0:
            raise ValueError("mean must be > 0")
        if self.distribution == "uniform" and not 0 <= self.min <= self.max:
            raise ValueError("uniform lifetime needs 0 <= min <= max")


class MultiInstance(Struct, forbid_unknown_fields=True, kw_only=True):
    probability: float = 0.0
    min: int = 2
    max: int = 4

    def __post_init__(self) -> None:
        if not 0 <= self.probability <= 1:
            raise ValueError("probability must be in [0, 1]")
        if not 1 <= self.min <= self.max:
            raise ValueError("need 1 <= min <= max")


class ServerGroups(Struct, forbid_unknown_fields=True, kw_only=True):
    """A fraction of requests boot a whole server group in one multi-instance request."""

    probability: float = 0.0
    anti_affinity: float = 0.7  # share of groups that are anti-affinity; the rest are affinity
    min: int = 2
    max: int = 4

    def __post_init__(self) -> None:
        if not 0 <= self.probability <= 1 or not 0 <= self.anti_affinity <= 1:
            raise ValueError("probability and anti_affinity must be in [0, 1]")
        if not 1 <= self.min <= self.max:
            raise ValueError("need 1 <= min <= max")


class Prefill(Struct, forbid_unknown_fields=True, kw_only=True):
    """Load already running when the simulation starts: allocations put straight on the truth (not scheduled)."""

    vcpu_fraction: float = 0.0  # target share of the cloud's vCPU capacity
    flavor: str | None = None  # default: drawn from the workload's mix

    def __post_init__(self) -> None:
        if not 0 <= self.vcpu_fraction < 1:
            raise ValueError("vcpu_fraction must be in [0, 1)")


class Workload(Struct, forbid_unknown_fields=True, kw_only=True):
    rate: float  # base Poisson arrival rate, requests per virtual second
    requests: int | None = None  # stop after this many arrivals ...
    duration: float | None = None  # ... or after this many virtual seconds (whichever first)
    bursts: list[Burst] = field(default_factory=list)
    flavors: list[FlavorSpec] = field(default_factory=list)
    lifetime: Lifetime = field(default_factory=Lifetime)
    multi_instance: MultiInstance = field(default_factory=MultiInstance)
    server_groups: ServerGroups = field(default_factory=ServerGroups)
    projects: int = 10
    az_fraction: float = 0.0  # share of requests that ask for a specific zone
    prefill: Prefill = field(default_factory=Prefill)

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError("rate must be > 0")
        if self.requests is None and self.duration is None:
            raise ValueError("give requests and/or duration, or the simulation never ends")
        if self.requests is not None and self.requests < 1:
            raise ValueError("requests must be >= 1")
        if self.duration is not None and self.duration <= 0:
            raise ValueError("duration must be > 0")
        if not self.flavors:
            raise ValueError("flavors must list at least one flavor")
        if sum(f.weight for f in self.flavors) <= 0:
            raise ValueError("flavors weights must not all be 0")
        if self.projects < 1:
            raise ValueError("projects must be >= 1")
        if not 0 <= self.az_fraction <= 1:
            raise ValueError("az_fraction must be in [0, 1]")


DEFAULT_DECISION_TIME = 0.001  # about the engine's time per decision on clouds of thousands of hosts


class ControlPlane(Struct, forbid_unknown_fields=True, kw_only=True):
    schedulers: int = 1
    feed_lag: float | list[float] = 0.5  # seconds each replica trails the truth (one value, or one per scheduler)
    report_period: float = 60.0  # hosts heartbeat this often
    service_down_time: float = 60.0
    build_time: float = 2.0  # from decision to the compute host starting the build (and checking, in Nova)
    # Virtual seconds one decision occupies a scheduler. A number keeps a run a function of its scenario and seed;
    # "measured" (opt-in) charges the engine's real time, which makes bursts queue as the real engine would but
    # makes runs differ from one another.
    decision_time: float | Literal["measured"] = DEFAULT_DECISION_TIME

    def __post_init__(self) -> None:
        if self.schedulers < 1:
            raise ValueError("schedulers must be >= 1")
        lags = self.feed_lag if isinstance(self.feed_lag, list) else [self.feed_lag]
        if isinstance(self.feed_lag, list) and len(self.feed_lag) != self.schedulers:
            raise ValueError("feed_lag as a list needs one value per scheduler")
        if any(lag < 0 for lag in lags):
            raise ValueError("feed_lag must be >= 0")
        if self.report_period <= 0 or self.service_down_time <= 0 or self.build_time < 0:
            raise ValueError("report_period and service_down_time must be > 0, build_time >= 0")
        if isinstance(self.decision_time, float | int) and self.decision_time < 0:
            raise ValueError("decision_time must be >= 0 or \"measured\"")

    def lag(self, scheduler: int) -> float:
        return float(self.feed_lag[scheduler] if isinstance(self.feed_lag, list) else self.feed_lag)


class Failure(Struct, forbid_unknown_fields=True, kw_only=True):
    """``rack_lost``: the rack's hosts die for good. ``host_flap``: hosts go down for ``down_for`` then up for
    ``up_for``, ``cycles`` times. ``scheduler_crash``: instance ``scheduler`` is gone for ``down_for``."""

    at: float
    kind: Literal["rack_lost", "host_flap", "scheduler_crash"]
    rack: str | None = None
    hosts: int = 0  # host_flap: how many hosts, drawn at random (or every host of ``rack``)
    down_for: float = 60.0
    up_for: float = 60.0
    cycles: int = 1
    scheduler: int = 0
    fenced: bool = False  # rack_lost: monitoring forces the services down at once (a report with forced_down)

    def __post_init__(self) -> None:
        if self.at < 0 or self.down_for <= 0 or self.up_for < 0 or self.cycles < 1:
            raise ValueError("at >= 0, down_for > 0, up_for >= 0 and cycles >= 1 are required")


class Policy(Struct, forbid_unknown_fields=True, kw_only=True):
    kind: Literal["gantt", "nova-classic"] = "gantt"
    config: dict[str, Any] = field(default_factory=dict)  # a Gantt config: {filter_scheduler = {...}, ...}


class Scenario(Struct, forbid_unknown_fields=True, kw_only=True):
    name: str = "scenario"
    description: str = ""
    seed: int = 0
    sample_interval: float = 0.0  # virtual seconds between metric samples; 0: about 200 samples
    cloud: Cloud
    workload: Workload
    control_plane: ControlPlane = field(default_factory=ControlPlane)
    failures: list[Failure] = field(default_factory=list)
    policy: Policy = field(default_factory=Policy)
    volumes: Volumes | None = None  # storage backends and the VMs' volumes (the volume namespace)

    def config(self) -> Config:
        """The engine config: the policy's dict, with the clock options the control plane decides."""
        data = {k: dict(v) if isinstance(v, dict) else v for k, v in self.policy.config.items()}
        defaults = data.setdefault("DEFAULT", {})
        defaults.setdefault("service_down_time", self.control_plane.service_down_time)
        data.setdefault("gantt", {}).setdefault("seed", self.seed)
        try:
            return Config.from_dict(data)
        except InvalidRequest as exc:
            where = (exc.field or "$").lstrip("$").lstrip(".")
            raise ScenarioError(f"policy.config: {exc.message}",
                                field="policy.config" + (f".{where}" if where else "")) from None


prepare_types(globals())  # build msgspec type info before any thread decodes (see model.prepare_types)
