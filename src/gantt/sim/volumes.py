"""The volume namespace in a simulation: VMs that boot with volumes, placed by the real VolumeScheduler.

A scenario's ``[volumes]`` section lays out storage backends (each a cinder-volume service with pools, thin or
thick, in a zone) and what the VMs ask for (how many volumes, their sizes and volume types). When a VM's build
starts on its host, its volumes are created as Nova's compute creates a boot volume: one Cinder request each, in
the VM's zone, decided by ``VolumeScheduler`` over a ``PoolTable`` (Cinder's scheduler cache) and consumed from it
as Cinder does. A volume that finds no pool fails the VM's build (Nova aborts, it does not reschedule); a VM's
deletion deletes its volumes.

Two views, as in a real cloud:
- the backends' own books (``PoolBook``): what each pool really holds (our volumes, space taken outside the
  scheduler's sight, whether the pool still exists). Each backend reports them every ``report_period``;
- the scheduler's cache (the PoolTable), which learns them from those reports and consumes on each decision in
  between (a deleted volume's space comes back at the next report, as in Cinder).

Events: ``pool_filled`` (something outside the scheduler fills a pool up to a share of its physical capacity;
the backend reports at once), ``pool_lost`` (the backend stops listing the pool: the scheduler drops it at the
backend's next report) and ``backend_lost`` (the service stops reporting: the scheduler drops its pools once the
service is seen down, after ``service_down_time``). Volumes on a lost pool are lost; the VMs attached to them
are counted. A volume placed on a lost pool before the scheduler knows fails its VM's build (the create never
completes).

Invariants, checked on the backends' books after every claim (not on the cache the decision read): no pool
provisioned past what Cinder's CapacityFilter allows for the volume placed (a thick volume: the pool's capacity
less its reserve; a thin one on a thin pool: that times max_over_subscription_ratio), and no volume placed on a
pool the scheduler had been told was gone.
"""

from __future__ import annotations

import functools
import math
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
import numpy as np
from msgspec import Struct
from msgspec import field as sfield

from gantt.config import VolumeOptions
from gantt.model import NoValidHost, prepare_types
from gantt.volume import BackendReport, PoolService, VolumeRequest, VolumeScheduler
from gantt.volume.model import VolumeProperties, VolumeType
from gantt.volume.table import PoolTable, max_over_subscription_ratio


class PoolSpec(Struct, forbid_unknown_fields=True, kw_only=True):
    """One pool of a backend: ``thin`` / ``thick`` are its provisioning supports (thin_provisioning_support,
    thick_provisioning_support); ``capabilities``: further keys it reports (vendor keys, what extra specs match)."""

    name: str
    total_gb: float
    thin: bool = False
    thick: bool = True
    max_over_subscription_ratio: float | Literal["auto"] | None = None  # None: the scheduler's option
    reserved_percentage: float = 0.0
    capabilities: dict[str, Any] = sfield(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.total_gb > 0 or not math.isfinite(self.total_gb):
            raise ValueError("total_gb must be a finite number > 0")
        if not self.thin and not self.thick:
            raise ValueError("thin and thick must not both be false (the pool could hold no volume)")
        if not 0 <= self.reserved_percentage <= 100:
            raise ValueError("reserved_percentage must be in [0, 100]")
        ratio = self.max_over_subscription_ratio
        if isinstance(ratio, float | int) and not (math.isfinite(ratio) and ratio >= 1):
            raise ValueError("max_over_subscription_ratio must be >= 1 or 'auto'")


class BackendSpec(Struct, forbid_unknown_fields=True, kw_only=True):
    """A cinder-volume service (``host@backend``) in zone ``az`` and its pools."""

    host: str
    az: str
    storage_protocol: str = "iSCSI"
    vendor_name: str = "Open Source"
    capabilities: dict[str, Any] = sfield(default_factory=dict)
    pools: list[PoolSpec]

    def __post_init__(self) -> None:
        if "@" not in self.host:
            raise ValueError("host must be a Cinder service host, 'node@backend'")
        if not self.pools:
            raise ValueError("pools must list at least one pool")
        if len({p.name for p in self.pools}) != len(self.pools):
            raise ValueError("pools must have distinct names")


class VolumeTypeSpec(Struct, forbid_unknown_fields=True, kw_only=True):
    name: str
    weight: float = 1.0
    extra_specs: dict[str, str] = sfield(default_factory=dict)

    def __post_init__(self) -> None:
        if self.weight < 0:
            raise ValueError("weight must be >= 0")


class PoolEvent(Struct, forbid_unknown_fields=True, kw_only=True):
    at: float
    kind: Literal["pool_filled", "pool_lost", "backend_lost"]
    backend: str
    pool: str | None = None  # pool_filled, pool_lost
    fill: float = 1.0  # pool_filled: the share of the pool's physical capacity then in use

    def __post_init__(self) -> None:
        if self.at < 0:
            raise ValueError("at must be >= 0")
        if not 0 < self.fill <= 1:
            raise ValueError("fill must be in (0, 1]")


class Volumes(Struct, forbid_unknown_fields=True, kw_only=True):
    """The storage side of a scenario. ``fraction``: the share of VMs that boot with volumes, each with
    ``per_vm_min``..``per_vm_max`` volumes of ``size_gb`` (a list drawn from uniformly). ``thin_written``: the
    share of a thin volume's size its data takes on the pool (what its physical fill reports)."""

    backends: list[BackendSpec]
    types: list[VolumeTypeSpec] = sfield(default_factory=lambda: [VolumeTypeSpec(name="default")])
    fraction: float = 1.0
    per_vm_min: int = 1
    per_vm_max: int = 1
    size_gb: list[int] = sfield(default_factory=lambda: [10, 20, 50, 100])
    same_az: bool = True  # Nova's cross_az_attach = False: a VM's volumes in its zone
    thin_written: float = 0.25
    report_period: float = 60.0
    service_down_time: float = 60.0
    scheduler: dict[str, Any] = sfield(default_factory=dict)  # VolumeOptions: Cinder's scheduler options
    events: list[PoolEvent] = sfield(default_factory=list)

    def __post_init__(self) -> None:
        if not self.backends:
            raise ValueError("backends must list at least one backend")
        if len({b.host for b in self.backends}) != len(self.backends):
            raise ValueError("backends must have distinct hosts")
        if not self.types or sum(t.weight for t in self.types) <= 0:
            raise ValueError("types must list at least one type with a weight > 0")
        if not 0 <= self.fraction <= 1:
            raise ValueError("fraction must be in [0, 1]")
        if not 1 <= self.per_vm_min <= self.per_vm_max <= 64:
            raise ValueError("per_vm_min must be in 1..per_vm_max, at most 64")
        if not self.size_gb or min(self.size_gb) < 1:
            raise ValueError("size_gb must list sizes >= 1")
        if not 0 <= self.thin_written <= 1:
            raise ValueError("thin_written must be in [0, 1]")
        if self.report_period <= 0 or self.service_down_time <= 0:
            raise ValueError("report_period and service_down_time must be > 0")
        try:
            msgspec.convert(self.scheduler, VolumeOptions, strict=False)
        except (msgspec.ValidationError, ValueError) as exc:
            raise ValueError(f"scheduler must hold Cinder's scheduler options: {exc}") from None
        pools = {b.host: {p.name for p in b.pools} for b in self.backends}
        for i, event in enumerate(self.events):
            if event.backend not in pools:
                raise ValueError(f"events must name known backends: events[{i}].backend {event.backend!r}")
            if event.kind != "backend_lost" and event.pool not in pools[event.backend]:
                raise ValueError(f"events must name a pool of their backend: events[{i}].pool {event.pool!r}")

    def options(self) -> VolumeOptions:
        return msgspec.convert(self.scheduler, VolumeOptions, strict=False)


# ------------------------------------------------------------------------------------------ the backends' books


@dataclass(slots=True)
class Volume:
    pool: tuple[str, str]
    size: int
    thin: bool
    vm: str


@dataclass
class PoolBook:
    """What a pool really holds, as its backend knows it."""

    backend: BackendSpec
    spec: PoolSpec
    ratio: float  # the max_over_subscription_ratio its reports imply
    volumes: dict[str, Volume] = field(default_factory=dict)
    outside_gb: float = 0.0  # space taken by what the scheduler did not place (a pool_filled event)
    lost_at: float = math.inf
    known_gone_at: float = math.inf  # when the scheduler's cache dropped it
    peak_oversubscription: float = 0.0
    violations: int = 0

    @property
    def available(self) -> float:
        """Total less the reserve, as Cinder's capacity factors compute it."""
        total = self.spec.total_gb
        return total - math.floor(total * self.spec.reserved_percentage / 100.0)

    def allocated(self) -> float:
        return float(sum(v.size for v in self.volumes.values()))

    def provisioned(self) -> float:
        return self.allocated() + self.outside_gb

    def physical(self, thin_written: float) -> float:
        return self.outside_gb + sum(v.size * (thin_written if v.thin else 1.0) for v in self.volumes.values())

    def limit(self, thin_volume: bool) -> float:
        """The most this pool may be provisioned to when it takes such a volume (Cinder's CapacityFilter)."""
        return self.available * self.ratio if thin_volume and self.spec.thin and self.ratio >= 1 else self.available


class VolumeSide:
    """The storage half of a simulation, driven by the simulator's hooks (attach, release, events)."""

    def __init__(self, spec: Volumes, seed: int, zones: list[str]) -> None:
        self.spec = spec
        self.rng = random.Random(seed * 7919 + 15)
        self.options = spec.options()
        self.scheduler = VolumeScheduler(self.options)
        self.table = PoolTable(self.options.max_over_subscription_ratio)
        self.zones = zones
        self.books: dict[tuple[str, str], PoolBook] = {}
        self.backend_lost: dict[str, float] = {}
        for backend in spec.backends:
            for pool in backend.pools:
                book = PoolBook(backend=backend, spec=pool, ratio=1.0)
                self.books[(backend.host, pool.name)] = book
                book.ratio = max_over_subscription_ratio(self._pool_caps(book),
                                                         self.options.max_over_subscription_ratio)
        self.types = [VolumeType(name=t.name, id=f"type-{i}", extra_specs=dict(t.extra_specs))
                      for i, t in enumerate(spec.types)]
        self.type_weights = list(np.cumsum([t.weight for t in spec.types]))
        self.vm_volumes: dict[str, list[str]] = {}
        self.c: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.no_valid_pool_by_filter: Counter[str] = Counter()
        self.decision_ms: list[float] = []
        self.events: list[dict[str, Any]] = []
        self.timeline: dict[str, Any] = {"t": [], "oversubscription": {f"{h}#{p}": [] for h, p in self.books},
                                         "physical_fill": {f"{h}#{p}": [] for h, p in self.books}}
        self.now = 0.0
        for backend in spec.backends:
            self.report(backend.host, 0.0)

    # -- reports ----------------------------------------------------------------------------------------------

    def _pool_caps(self, book: PoolBook) -> dict[str, Any]:
        pool = book.spec
        total = pool.total_gb
        caps: dict[str, Any] = {
            **pool.capabilities, "pool_name": pool.name, "total_capacity_gb": total,
            "free_capacity_gb": round(max(total - book.physical(self.spec.thin_written), 0.0), 2),
            "allocated_capacity_gb": book.allocated(), "provisioned_capacity_gb": book.provisioned(),
            "reserved_percentage": pool.reserved_percentage, "thin_provisioning_support": pool.thin,
            "thick_provisioning_support": pool.thick}
        if pool.max_over_subscription_ratio is not None:
            caps["max_over_subscription_ratio"] = pool.max_over_subscription_ratio
        return caps

    def report(self, host: str, now: float) -> None:
        """The backend's periodic report (Cinder's update_service_capabilities): its live pools, as its books
        say. A lost backend sends nothing."""
        if host in self.backend_lost:
            return
        backend = next(b for b in self.spec.backends if b.host == host)
        pools = [self._pool_caps(book) for (h, _), book in self.books.items() if h == host and book.lost_at > now]
        for (h, _), book in self.books.items():
            if h == host and book.lost_at <= now and book.known_gone_at == math.inf:
                book.known_gone_at = now
        caps = {**backend.capabilities, "volume_backend_name": host.partition("@")[2],
                "storage_protocol": backend.storage_protocol, "vendor_name": backend.vendor_name,
                "driver_version": "1.0"}
        report = BackendReport(host=host, capabilities=caps, pools=pools,
                               service=PoolService(availability_zone=backend.az))
        self.table.apply_backend(report, reported_at=now)

    def report_all(self, now: float) -> None:
        for backend in self.spec.backends:
            self.report(backend.host, now)

    # -- the workload's hooks ---------------------------------------------------------------------------------

    def schedule(self, call: Callable[[float, Callable[[float], None]], None], start: float) -> None:
        """Put the backends' periodic reports and the scenario's pool events on the simulator's clock: ``call(t,
        fn)`` runs ``fn(t)`` at virtual time ``t``, and ``start`` is the virtual time 0 the events count from."""
        period = self.spec.report_period

        def report(now: float) -> None:
            self.report_all(now - start)
            call(now + period, report)

        call(start + period, report)
        for event in self.spec.events:
            call(start + event.at, functools.partial(self._happen, event, start))
            if event.kind == "backend_lost":
                down = event.at + self.spec.service_down_time
                call(start + down, functools.partial(self._seen_down, event.backend, start))

    def _happen(self, event: PoolEvent, start: float, now: float) -> None:
        self.event(event, now - start)

    def _seen_down(self, host: str, start: float, now: float) -> None:
        self.service_down(host, now - start)

    def wants(self) -> int:
        """How many volumes the next VM boots with (0: none)."""
        spec = self.spec
        if spec.fraction < 1 and self.rng.random() >= spec.fraction:
            return 0
        return self.rng.randint(spec.per_vm_min, spec.per_vm_max)

    def _pick_type(self) -> VolumeType:
        x = self.rng.random() * self.type_weights[-1]
        for i, w in enumerate(self.type_weights):
            if x < w:
                return self.types[i]
        return self.types[-1]

    def attach(self, vm: str, count: int, zone: str, project: str | None, now: float) -> str | None:
        """Create the VM's ``count`` volumes; None when every one was placed, else the reason the build fails
        (the volumes created so far are deleted)."""
        self.now = now
        made: list[str] = []
        for i in range(count):
            volume_id = f"{vm}-vol{i}"
            vtype = self._pick_type()
            size = self.spec.size_gb[self.rng.randrange(len(self.spec.size_gb))]
            request = VolumeRequest(
                volume_id=volume_id, volume_type=vtype,
                volume_properties=VolumeProperties(size=size, project_id=project, volume_type_id=vtype.id,
                                                   availability_zone=zone if self.spec.same_az else None))
            self.c["requested"] += 1
            began = time.thread_time()
            try:
                pick = self.scheduler.select(self.table, request, limit=1)[0]
            except NoValidHost as exc:
                reason = _emptied_by(exc)
                self.decision_ms.append((time.thread_time() - began) * 1000.0)
                self.c["failed"] += 1
                self.failures["NoValidPool"] += 1
                self.no_valid_pool_by_filter[reason] += 1
                self._undo(made)
                return "VolumeNoValidPool"
            key = (pick.host, pick.pool)
            row = self.table.row(*key)
            assert row is not None
            if self.books[key].spec.max_over_subscription_ratio == "auto":
                # 'auto' moves with each report: the bound is the ratio the scheduler's last report implied
                self.books[key].ratio = float(self.table.ratio[row])
            self.table.claim(row, volume_id, size)
            self.decision_ms.append((time.thread_time() - began) * 1000.0)
            book = self.books[key]
            if book.lost_at <= now:
                # The create goes to a service or pool that is gone: it never completes, the build times out.
                self.c["placed_on_lost_pools"] += 1
                if now > book.known_gone_at:
                    self.c["claims_on_lost_pools_after_detection"] += 1
                self.table.release(volume_id)
                self.c["failed"] += 1
                self.failures["PoolLost"] += 1
                self._undo(made)
                return "VolumeCreateFailed"
            # A thin volume on a pool without thin support is provisioned in full (and checked as thick).
            self._book(book, volume_id, size, request.thin and book.spec.thin, vm)
            made.append(volume_id)
        self.c["placed"] += count
        if made:
            self.vm_volumes[vm] = made
        return None

    def _book(self, book: PoolBook, volume_id: str, size: int, thin: bool, vm: str) -> None:
        book.volumes[volume_id] = Volume(pool=(book.backend.host, book.spec.name), size=size, thin=thin, vm=vm)
        provisioned = book.provisioned()
        if provisioned > book.limit(thin) + 1e-6:
            book.violations += 1
            self.c["capacity_violations"] += 1
        book.peak_oversubscription = max(book.peak_oversubscription, provisioned / book.available
                                         if book.available > 0 else math.inf)
        self.c["gb_placed"] += size

    def _undo(self, made: list[str]) -> None:
        for volume_id in made:
            self._delete(volume_id)
            self.c["placed_then_deleted_for_failed_build"] += 1

    def _delete(self, volume_id: str) -> None:
        self.table.release(volume_id)
        for book in self.books.values():
            if book.volumes.pop(volume_id, None) is not None:
                return

    def release(self, vm: str) -> None:
        """The VM is deleted, and its volumes with it (delete_on_termination)."""
        for volume_id in self.vm_volumes.pop(vm, ()):
            self._delete(volume_id)
            self.c["deleted"] += 1

    # -- events -----------------------------------------------------------------------------------------------

    def event(self, event: PoolEvent, now: float) -> None:
        self.now = now
        record: dict[str, Any] = {"at": round(now, 3), "kind": event.kind,
                                  "target": event.backend + (f"#{event.pool}" if event.pool else "")}
        if event.kind == "pool_filled":
            book = self.books[(event.backend, str(event.pool))]
            used = book.physical(self.spec.thin_written)
            book.outside_gb += max(event.fill * book.spec.total_gb - used, 0.0)
            record["outside_gb"] = round(book.outside_gb, 2)
            book.peak_oversubscription = max(book.peak_oversubscription, book.provisioned() / book.available)
            self.report(event.backend, now)  # the backend notices its free space drop
        else:
            books = [b for (h, p), b in self.books.items() if h == event.backend and
                     (event.kind == "backend_lost" or p == event.pool) and b.lost_at == math.inf]
            volumes = [v for b in books for v in b.volumes.values()]
            vms = {v.vm for v in volumes}
            for book in books:
                book.lost_at = now
            if event.kind == "backend_lost":
                self.backend_lost[event.backend] = now
            record.update(pools=len(books), volumes_lost=len(volumes), gb_lost=sum(v.size for v in volumes),
                          vms_affected=len(vms))
            self.c["volumes_lost"] += len(volumes)
            self.c["vms_affected"] += len(vms)
            gone = {k for b in books for k in b.volumes}
            for vm in vms:  # the VMs keep running without those volumes
                self.vm_volumes[vm] = [x for x in self.vm_volumes.get(vm, []) if x not in gone]
            for book in books:
                for volume_id in list(book.volumes):
                    self.table.release(volume_id)
                book.volumes.clear()
        self.events.append(record)

    def service_down(self, host: str, now: float) -> None:
        """The scheduler sees the lost backend's service down: it stops offering its pools."""
        for (h, name), book in self.books.items():
            if h == host and self.table.remove(h, name) and book.known_gone_at == math.inf:
                book.known_gone_at = now

    def sample(self, now: float) -> None:
        """Each pool's over-subscription and physical fill, from its books (a lost pool: none)."""
        tl = self.timeline
        tl["t"].append(now)
        for (host, name), book in self.books.items():
            key = f"{host}#{name}"
            live = book.lost_at > now
            tl["oversubscription"][key].append(round(book.provisioned() / book.available, 4)
                                              if live and book.available else None)
            tl["physical_fill"][key].append(round(book.physical(self.spec.thin_written) / book.spec.total_gb, 4)
                                           if live else None)

    # -- results ----------------------------------------------------------------------------------------------

    def results(self) -> dict[str, Any]:
        c = self.c
        tw = self.spec.thin_written
        pools = {}
        for (host, name), book in self.books.items():
            total = book.spec.total_gb
            pools[f"{host}#{name}"] = {
                "az": book.backend.az, "thin": book.spec.thin, "thick": book.spec.thick,
                "max_over_subscription_ratio": round(book.ratio, 3),
                "total_gb": total, "reserved_percentage": book.spec.reserved_percentage,
                "volumes": len(book.volumes), "allocated_gb": book.allocated(),
                "provisioned_gb": round(book.provisioned(), 2), "physical_used_gb": round(book.physical(tw), 2),
                "allocated_fill": round(book.allocated() / total, 4),
                "provisioned_fill": round(book.provisioned() / total, 4),
                "physical_fill": round(book.physical(tw) / total, 4),
                "oversubscription": round(book.provisioned() / book.available, 4) if book.available else None,
                "peak_oversubscription": round(book.peak_oversubscription, 4),
                "lost": book.lost_at != math.inf, "capacity_violations": book.violations}
        ms = np.asarray(self.decision_ms) if self.decision_ms else np.zeros(1)
        return {
            "pools": len(self.books), "backends": len(self.spec.backends),
            "filters": list(self.options.scheduler_default_filters),
            "weighers": list(self.options.scheduler_default_weighers),
            "volumes": {"requested": c["requested"], "placed": c["placed"], "failed": c["failed"],
                        "deleted": c["deleted"],
                        "deleted_after_failed_build": c["placed_then_deleted_for_failed_build"],
                        "lost": c["volumes_lost"], "gb_placed": c["gb_placed"]},
            "failed_volumes": {"by_reason": dict(sorted(self.failures.items())),
                               "no_valid_pool_by_filter": dict(sorted(self.no_valid_pool_by_filter.items(),
                                                                      key=lambda kv: (-kv[1], kv[0])))},
            "placed_on_lost_pools": c["placed_on_lost_pools"],
            "vms_affected_by_lost_pools": c["vms_affected"],
            "events": self.events,
            "by_pool": pools,
            "timeline": self.timeline,
            "engine_cpu_ms": {"p50": round(float(np.percentile(ms, 50)), 4),
                              "p99": round(float(np.percentile(ms, 99)), 4)},
        }

    def invariants(self) -> dict[str, int]:
        return {"volume_pools_over_capacity": sum(1 for b in self.books.values() if b.violations),
                "volume_claims_on_lost_pools_after_detection": self.c["claims_on_lost_pools_after_detection"]}


def _emptied_by(exc: NoValidHost) -> str:
    """The filter that removed the last pools (as the compute side counts NoValidHost), not the one that
    removed the most: in a zoned cloud that is nearly always AvailabilityZoneFilter, whatever really failed."""
    explanation = exc.explanation
    if explanation is None:
        return "unknown"
    for step in explanation.steps:
        if step.after == 0 and step.before > 0:
            return step.name
    return explanation.reason or ("no pool" if not explanation.hosts else "unknown")


prepare_types(globals())  # build msgspec type info before any thread decodes (see model.prepare_types)
