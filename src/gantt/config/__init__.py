"""Configuration: one file whose sections and option names match nova.conf where an option exists there.

TOML (``gantt.toml``) is the native form; a nova.conf is read too, with oslo.config's rules (``gantt.config.novaconf``),
so an operator can point Gantt at the file Nova runs with. Options Gantt adds live in ``[gantt]``. An unknown
option in a section whose options decide placements is an error (a typo must not silently change placement);
Nova's options that change nothing Gantt decides are read, not used (listed at start), and those that would
change a placement but that Gantt does not implement are refused unless at Nova's default.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import Struct, field

from gantt.compute.pci import Alias, parse_aliases
from gantt.config import novaconf
from gantt.model import InvalidRequest, prepare_types

if TYPE_CHECKING:
    from gantt.placement.api.policy import Policy

log = logging.getLogger(__name__)

NOVA_DEFAULT_FILTERS = [
    "ComputeFilter",
    "ComputeCapabilitiesFilter",
    "ImagePropertiesFilter",
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
]

NOVA_ALL_WEIGHERS = ["nova.scheduler.weights.all_weighers"]


class FilterSchedulerSection(Struct, forbid_unknown_fields=True, kw_only=True):
    enabled_filters: list[str] = field(default_factory=lambda: list(NOVA_DEFAULT_FILTERS))
    available_filters: list[str] = field(default_factory=lambda: ["nova.scheduler.filters.all_filters"])
    weight_classes: list[str] = field(default_factory=lambda: list(NOVA_ALL_WEIGHERS))
    host_subset_size: int = 1
    shuffle_best_same_weighed_hosts: bool = False
    max_io_ops_per_host: int = 8
    max_instances_per_host: int = 50
    isolated_images: list[str] = field(default_factory=list)
    isolated_hosts: list[str] = field(default_factory=list)
    restrict_isolated_hosts_to_isolated_images: bool = True
    aggregate_image_properties_isolation_namespace: str | None = None
    aggregate_image_properties_isolation_separator: str = "."
    image_properties_default_architecture: str | None = None  # ImagePropertiesFilter: arch of images without one
    ram_weight_multiplier: float = 1.0
    cpu_weight_multiplier: float = 1.0
    disk_weight_multiplier: float = 1.0
    io_ops_weight_multiplier: float = -1.0
    num_instances_weight_multiplier: float = 0.0
    hypervisor_version_weight_multiplier: float = 1.0
    soft_affinity_weight_multiplier: float = 1.0
    soft_anti_affinity_weight_multiplier: float = 1.0
    build_failure_weight_multiplier: float = 1000000.0
    pci_weight_multiplier: float = 1.0
    # Nova options Gantt does not implement: see _FILTER_SCHEDULER_WITHOUT_EFFECT.
    image_props_weight_multiplier: float = 0.0
    pci_in_placement: bool = False

    def __post_init__(self) -> None:
        _refuse_without_effect("filter_scheduler", self, _FILTER_SCHEDULER_WITHOUT_EFFECT)
        _finite_floats(self)
        available = [name.rsplit(".", 1)[-1] for name in self.available_filters]
        if "all_filters" not in available:
            missing = [n for n in self.enabled_filters if n.rsplit(".", 1)[-1] not in available]
            if missing:
                raise ValueError(f"enabled_filters names {', '.join(missing)}, which available_filters does not "
                                 "make available")
        arch = self.image_properties_default_architecture
        if arch is not None:
            from gantt.compute.filters.image_meta import ARCHITECTURES  # the filters import this module

            if arch not in ARCHITECTURES:  # Nova's option takes one of its architectures (oslo.config choices)
                raise ValueError(f"image_properties_default_architecture {arch!r} is not one of Nova's "
                                 f"architectures ({', '.join(sorted(ARCHITECTURES))})")
        # Nova 34's own bounds on these options (oslo.config refuses a value outside them at start).
        for name, least in (("host_subset_size", 1), ("max_io_ops_per_host", 0), ("max_instances_per_host", 1),
                            ("soft_affinity_weight_multiplier", 0.0), ("soft_anti_affinity_weight_multiplier", 0.0),
                            ("pci_weight_multiplier", 0.0)):
            if getattr(self, name) < least:
                raise ValueError(f"{name} must be >= {least}")


class SchedulerSection(Struct, forbid_unknown_fields=True, kw_only=True):
    max_attempts: int = 3
    query_placement_for_availability_zone: bool = True
    limit_tenants_to_placement_aggregate: bool = False
    placement_aggregate_required_for_tenants: bool = False
    enable_isolated_aggregate_filtering: bool = False
    query_placement_for_image_type_support: bool = False
    workers: int | None = None
    image_metadata_prefilter: bool = False
    # Nova options Gantt does not implement: see _SCHEDULER_WITHOUT_EFFECT.
    driver: str = "filter_scheduler"
    max_placement_results: int = 1000
    query_placement_for_routed_network_aggregates: bool = False

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if self.workers is not None and self.workers < 1:
            raise ValueError("workers must be >= 1")
        _refuse_without_effect("scheduler", self, _SCHEDULER_WITHOUT_EFFECT)


# Nova options that would change a placement in Nova and that Gantt does not implement: accepted at Nova's default
# (so a nova.conf that merely repeats it loads), refused otherwise, so that no operator believes a setting is in
# force when it is not. (Those that change nothing Gantt decides: gantt.config.novaconf.NOT_USED.)
_FILTER_SCHEDULER_WITHOUT_EFFECT = {
    "pci_in_placement": "Gantt matches PCI requests against the hosts' pci_stats pools, not Placement inventories",
    "image_props_weight_multiplier": "Gantt has no ImagePropertiesWeigher (it needs the images of the instances "
                                     "on each host, which hosts do not report)",
}
_SCHEDULER_WITHOUT_EFFECT = {
    "driver": "Gantt is the filter scheduler",
    "max_placement_results": "Gantt filters and weighs every host itself; there is no Placement query to cap",
    "query_placement_for_routed_network_aggregates": "Gantt has no routed-network prefilter (it does not know "
                                                     "the ports' segments)",
}
_OSLO_POLICY_WITHOUT_EFFECT = {
    "policy_default_rule": "Gantt's Placement rules are all defined; there is no default rule to fall back to",
    "policy_dirs": "Gantt reads policy_file alone, no directory of rule files",
}


def _finite_floats(values: Struct) -> None:
    for name in values.__struct_fields__:
        value = getattr(values, name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number")


def _refuse_without_effect(section: str, values: Struct, options: dict[str, str]) -> None:
    defaults = {f.name: f.default if f.default is not msgspec.NODEFAULT else f.default_factory()
                for f in msgspec.structs.fields(type(values))}
    for name, why in options.items():
        if getattr(values, name) != defaults[name]:
            raise ValueError(f"[{section}] {name} = {getattr(values, name)!r} would change decisions in Nova, and "
                             f"Gantt does not implement it ({why}); remove it or leave Nova's default "
                             f"({defaults[name]!r})")


def parse_weight_setting(entries: list[str]) -> list[tuple[str, float]]:
    """``[metrics] weight_setting``: ``["cpu.percent=-1.0", …]`` → ``[("cpu.percent", -1.0), …]``.

    Read by MetricsFilter and MetricsWeigher alike, as in Nova (``utils.parse_options``): an entry that is not
    ``name=number`` is logged and skipped, not an error at start.
    """
    good: list[tuple[str, float]] = []
    bad: list[str] = []
    for entry in entries:
        name, sep, ratio = entry.partition("=")
        name = name.strip()
        try:
            value = float(ratio)
        except ValueError:
            bad.append(entry)
            continue
        if not name or not sep:
            bad.append(entry)
            continue
        good.append((name, value))
    if bad:
        log.warning("ignoring invalid [metrics] weight_setting entries: %s", ", ".join(bad))
    return good


class MetricsSection(Struct, forbid_unknown_fields=True, kw_only=True):
    weight_multiplier: float = 1.0
    weight_setting: list[str] = field(default_factory=list)
    required: bool = True
    weight_of_unavailable: float = -10000.0

    def __post_init__(self) -> None:
        _finite_floats(self)


class DefaultSection(Struct, forbid_unknown_fields=False, kw_only=True):
    default_availability_zone: str = "nova"
    allow_resize_to_same_host: bool = False  # a move may land on the host it leaves (Nova's option, same default)
    service_down_time: float = 60.0
    cpu_allocation_ratio: float | None = None
    ram_allocation_ratio: float | None = None
    disk_allocation_ratio: float | None = None
    initial_cpu_allocation_ratio: float = 4.0
    initial_ram_allocation_ratio: float = 1.0
    initial_disk_allocation_ratio: float = 1.0


class ComputeSection(Struct, forbid_unknown_fields=False, kw_only=True):
    """nova.conf's ``[compute]``: most of it is nova-compute's own and ignored (as ``[DEFAULT]``'s is)."""

    # NUMATopologyFilter: when a guest needs fewer cells than the host has, try the fullest cells first (True)
    # or the emptiest (False, Nova's default).
    packing_host_numa_cells_allocation_strategy: bool = False


class PciSection(Struct, forbid_unknown_fields=True, kw_only=True):
    """nova.conf's ``[pci]``: ``alias`` (one JSON object per entry, as Nova's MultiStrOpt) is the scheduler's.
    ``device_spec`` and ``report_in_placement`` are nova-compute's, which the scheduler never reads (a nova.conf
    shared with the computes loads)."""

    alias: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.alias = [entry for entry in self.alias if entry.strip()]  # the sample's uncommented `alias =`
        self.aliases  # noqa: B018  refuse a bad alias at start, not at the first request that names it

    @property
    def aliases(self) -> dict[str, Alias]:
        """The aliases by name."""
        return _parsed_aliases(tuple(self.alias))


@functools.lru_cache(maxsize=16)
def _parsed_aliases(entries: tuple[str, ...]) -> dict[str, Alias]:
    # Every request that names an alias reads them: parse each distinct [pci] alias list once.
    return parse_aliases(entries)


class GanttSection(Struct, forbid_unknown_fields=True, kw_only=True):
    """Gantt's own options."""

    claim_timeout: float = 600.0  # an allocation a reporting host has not confirmed by then is released
    claim_retries: int = 8  # how many store conflicts one request may absorb before it gives up
    mask_cache_size: int = 256
    seed: int | None = None  # for reproducible random choices (tests, the simulator)
    # Several instances sharing one store: instance ``subset_slot`` of ``subset_slots`` takes its random pick of the
    # best ``host_subset_size`` among those whose host name hashes to its slot, counting hosts tied with the
    # subset's last weight as in it (Nova orders equal weights arbitrarily), so instances deciding at once claim
    # different hosts. The pick stays one Nova's random choice could make: the weights are Nova's, and a host of
    # another slot is taken when none of this one is that good. 1 slot, the default: Nova's uniform pick.
    subset_slots: int = 1
    subset_slot: int = 0
    store: str = "sqlite:///gantt.sqlite"
    # gantt.nova's manager (nova.conf's [gantt]): seconds between reads of the cell databases' compute nodes
    cell_poll_interval: float = 10.0
    bind: str = "127.0.0.1"
    port: int = 8780
    token: str | None = None
    max_body_bytes: int = 4 * 1024 * 1024
    # Where the Placement face is served: a path prefix, or "/" for the server's root (Placement's own routes and
    # version document there; Gantt's /v1, /health, /metrics, /openapi.json and /ui stay where they are).
    placement_mount: str = "/placement"

    def __post_init__(self) -> None:
        if self.subset_slots < 1:
            raise ValueError("[gantt] subset_slots must be >= 1")
        if not 0 <= self.subset_slot < self.subset_slots:
            raise ValueError(f"[gantt] subset_slot must be from 0 to subset_slots - 1 ({self.subset_slots - 1})")
        mount = self.placement_mount
        if not mount.startswith("/") or (mount != "/" and mount.endswith("/")) or "//" in mount \
                or any(c.isspace() or c in "?#%" for c in mount):
            raise InvalidRequest(f"[gantt] placement_mount {mount!r}: a path such as /placement, or / for the root",
                                 field="gantt.placement_mount")
        first = mount.split("/")[1]
        if mount != "/" and first in GANTT_PATHS:
            raise InvalidRequest(f"[gantt] placement_mount {mount!r} is under Gantt's own /{first}",
                                 field="gantt.placement_mount")


# The first segments of Gantt's own paths (gantt.service.app): the Placement face may not be mounted under them.
GANTT_PATHS = {"v1", "health", "metrics", "openapi.json", "ui"}


class OsloPolicySection(Struct, forbid_unknown_fields=True, kw_only=True):
    """The Placement face's policy, with oslo.policy's option names and defaults (placement.conf's section)."""

    enforce_new_defaults: bool = True  # False: Placement's deprecated rules (role:admin) also grant
    enforce_scope: bool = True  # a system-scoped token is refused by Placement's project-scoped rules
    # A YAML or JSON file of rule overrides (rule name -> check string), read at start; a relative path is taken
    # from the configuration file's directory. None: Placement's default rules.
    policy_file: str | None = None
    # oslo.policy's options Gantt does not implement: see _OSLO_POLICY_WITHOUT_EFFECT.
    policy_default_rule: str = "default"
    policy_dirs: list[str] = field(default_factory=lambda: ["policy.d"])

    def __post_init__(self) -> None:
        _refuse_without_effect("oslo_policy", self, _OSLO_POLICY_WITHOUT_EFFECT)
        # Refuse an unreadable file or rule at start, naming it. Placement's default rules cannot fail, so a
        # configuration without a file does not load the Placement package (the engine, the simulator and the
        # benchmarks build Configs too).
        if self.policy_file is not None:
            self.policy  # noqa: B018

    @property
    def policy(self) -> Policy:
        """Placement's rules as these options set them (gantt.placement.api.policy)."""
        return _policy(self.enforce_new_defaults, self.enforce_scope, self.policy_file, _version(self.policy_file))


def _version(path: str | None) -> tuple[int, int]:
    try:
        stat = os.stat(path) if path else None
    except OSError:
        return (0, 0)  # the read that follows names the problem
    return (stat.st_mtime_ns, stat.st_size) if stat else (0, 0)


@functools.lru_cache(maxsize=8)
def _policy(enforce_new_defaults: bool, enforce_scope: bool, path: str | None, version: tuple[int, int]) -> Policy:
    from gantt.placement.api.policy import Policy  # the Placement package imports this module

    # Config copies (with_overrides, a worker's load after the start-up check) share one parse of the file as it
    # is; a load after the file was edited reads it anew (a running app keeps the Policy it was built with).
    return Policy.from_file(path, enforce_new_defaults=enforce_new_defaults, enforce_scope=enforce_scope)


class CorsSection(Struct, forbid_unknown_fields=True, kw_only=True):
    """oslo.middleware's ``[cors]`` for the Placement face (placement.conf's section: the same names, and the
    defaults Placement's WSGI application sets): off until ``allowed_origin`` names an origin (``*`` for any)."""

    allowed_origin: list[str] = field(default_factory=list)
    allow_credentials: bool = True
    expose_headers: list[str] = field(default_factory=lambda: [
        "X-Auth-Token", "X-Openstack-Request-Id", "X-Subject-Token", "X-Service-Token", "OpenStack-API-Version"])
    max_age: int = 3600
    allow_methods: list[str] = field(default_factory=lambda: ["GET", "PUT", "POST", "DELETE", "PATCH"])
    allow_headers: list[str] = field(default_factory=lambda: [
        "X-Auth-Token", "X-Openstack-Request-Id", "X-Identity-Status", "X-Roles", "X-Service-Catalog", "X-User-Id",
        "X-Tenant-Id", "OpenStack-API-Version"])


class Config(Struct, forbid_unknown_fields=True, kw_only=True, rename={"default": "DEFAULT"}):
    filter_scheduler: FilterSchedulerSection = field(default_factory=FilterSchedulerSection)
    scheduler: SchedulerSection = field(default_factory=SchedulerSection)
    metrics: MetricsSection = field(default_factory=MetricsSection)
    default: DefaultSection = field(default_factory=DefaultSection)
    compute: ComputeSection = field(default_factory=ComputeSection)
    gantt: GanttSection = field(default_factory=GanttSection)
    pci: PciSection = field(default_factory=PciSection)
    oslo_policy: OsloPolicySection = field(default_factory=OsloPolicySection)
    cors: CorsSection = field(default_factory=CorsSection)
    # ``[namespace.<name>]`` tables (``[namespace:<name>]`` in INI): the namespaces served beside the default one
    # (``gantt.model.namespaces``), each as written in the file; ``namespaces()`` reads them, refusing what is wrong.
    namespace: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        data = _gather_namespaces(dict(data))
        _set_aside_unused(data)  # Nova's options that change nothing here: read, not used
        try:
            config = msgspec.convert(data, cls, strict=False)
        except msgspec.ValidationError as exc:
            raise InvalidRequest(f"configuration: {exc}", field=_path(str(exc))) from None
        config.namespaces()  # refuse a bad namespace section at load, not when its first request arrives
        return config

    def namespaces(self) -> dict[str, Namespace]:
        """Every namespace served, the default (``compute``, this Config's own sections) first. A compute-kind
        namespace gets its own Config: its nested sections, Nova's defaults for the rest, and this file's
        service-wide ``[gantt]``; a volume-kind one its ``gantt.volume.VolumeOptions``."""
        out = {DEFAULT_NAMESPACE: Namespace(name=DEFAULT_NAMESPACE, kind="compute", config=self)}
        for name, raw in self.namespace.items():
            out[name] = _namespace(name, raw, self)
        return out

    def for_worker(self, index: int, workers: int) -> Config:
        """The configuration of worker ``index`` of the ``workers`` processes of one instance (``gantt serve
        --workers N``). Each worker is a replica of its own, deciding and claiming as an instance does, so each
        takes its own share of the instance's subset slot (slot s of S becomes slot s + S * index of S * N: the
        hosts whose hash is s modulo S, split N ways), and, with a seed, its own random draws (seed + index):
        workers alike would pick the same hosts at the same moment and lose claims to one another, as instances
        without slots do (bench/RESULTS-cluster.md)."""
        if workers == 1:
            return self
        if not 0 <= index < workers:
            raise ValueError(f"worker {index} of {workers}")
        gantt = self.gantt
        return msgspec.structs.replace(self, gantt=msgspec.structs.replace(
            gantt, subset_slots=gantt.subset_slots * workers,
            subset_slot=gantt.subset_slot + gantt.subset_slots * index,
            seed=None if gantt.seed is None else gantt.seed + index))

    def with_overrides(self, **sections: dict[str, Any]) -> Config:
        """A copy with some options changed: ``cfg.with_overrides(filter_scheduler={"host_subset_size": 3})``."""
        data = msgspec.to_builtins(self)
        for section, values in sections.items():
            name = "DEFAULT" if section == "default" else section
            data.setdefault(name, {}).update(values)
        return Config.from_dict(data)


DEFAULT_NAMESPACE = "compute"
NAMESPACE_KINDS = ("compute", "volume")
# A compute-kind namespace's own sections: what decides placements. [gantt] (store, token, limits),
# [oslo_policy] and [cors] (the Placement face, default namespace only) are the service's, set once at the top.
_NAMESPACE_SECTIONS = {"filter_scheduler", "scheduler", "metrics", "DEFAULT", "compute", "pci"}


class Namespace(Struct, kw_only=True):
    """A namespace as configured: its name, kind, and what its kind's engine reads."""

    name: str
    kind: str
    config: Config | None = None  # kind compute
    options: Any = None  # kind volume: gantt.volume.VolumeOptions


def _gather_namespaces(data: dict[str, Any]) -> dict[str, Any]:
    """``"namespace:<name>"`` and ``"namespace:<name>:<section>"`` top-level tables (the INI spelling, or TOML's
    quoted keys) folded into ``namespace.<name>`` (and its ``<section>`` table)."""
    flat = [key for key in data if isinstance(key, str) and key.startswith("namespace:")]
    if not flat:
        return data
    data = dict(data)
    given = data.get("namespace", {})
    if not isinstance(given, dict):
        raise InvalidRequest("[namespace] must hold one table per namespace ([namespace.<name>])", field="namespace")
    tables = {name: dict(raw) if isinstance(raw, dict) else raw for name, raw in given.items()}
    for key in sorted(flat, key=lambda k: k.count(":")):  # a namespace's own table before its sections
        values = data.pop(key)
        _, name, *section = key.split(":", 2)
        table = tables.setdefault(name, {})
        if section:
            table[section[0]] = values
        else:
            table.update(values if isinstance(values, dict) else {})
    data["namespace"] = tables
    return data


def _namespace(name: str, raw: Any, base: Config) -> Namespace:
    from gantt.model.namespaces import check_name

    where = f"[namespace.{name}]"
    try:
        check_name(name)
    except ValueError as exc:
        raise InvalidRequest(f"{where}: {exc}", field=f"namespace.{name}") from None
    if name == DEFAULT_NAMESPACE:
        raise InvalidRequest(f"{where}: the default namespace is configured by the file's top-level sections",
                             field=f"namespace.{name}")
    if not isinstance(raw, dict):
        raise InvalidRequest(f"{where} must be a table of options", field=f"namespace.{name}")
    options = dict(raw)
    kind = options.pop("kind", None)
    if kind not in NAMESPACE_KINDS:
        raise InvalidRequest(f"{where} kind must be one of {', '.join(NAMESPACE_KINDS)} (got {kind!r})",
                             field=f"namespace.{name}.kind")
    if kind == "compute":
        unknown = sorted(set(options) - _NAMESPACE_SECTIONS)
        if unknown:
            raise InvalidRequest(
                f"{where}: {unknown[0]!r} is not a section a compute namespace has: it takes "
                f"{', '.join(sorted(_NAMESPACE_SECTIONS))} as [namespace.{name}.<section>] "
                "([gantt], [oslo_policy] and [cors] are the whole service's, set at the top level)",
                field=f"namespace.{name}.{unknown[0]}")
        _set_aside_unused(options)
        data = {**options, "gantt": msgspec.to_builtins(base.gantt)}
        try:
            config = msgspec.convert(data, Config, strict=False)
        except (msgspec.ValidationError, InvalidRequest) as exc:
            message = exc.message if isinstance(exc, InvalidRequest) else str(exc)
            field_ = exc.field if isinstance(exc, InvalidRequest) else _path(str(exc))
            raise InvalidRequest(f"{where}: {message}", field=_option(name, field_)) from None
        return Namespace(name=name, kind=kind, config=config)
    try:
        from gantt.volume import VolumeOptions  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise InvalidRequest(f"{where}: kind volume needs the volume domain (gantt.volume), which this build of "
                             "Gantt does not have", field=f"namespace.{name}.kind") from None
    try:
        volume_options = msgspec.convert(options, VolumeOptions, strict=False)
    except msgspec.ValidationError as exc:
        raise InvalidRequest(f"{where}: {exc}", field=_option(name, _path(str(exc)))) from None
    return Namespace(name=name, kind=kind, options=volume_options)


def _option(namespace: str, path: str | None) -> str:
    """The config path of an option of a namespace's section, from msgspec's ``$.a.b`` (or ``$``: the section)."""
    rest = (path or "$").lstrip("$").lstrip(".")
    return f"namespace.{namespace}" + (f".{rest}" if rest else "")


def _path(message: str) -> str:
    start = message.find("`$")
    if start < 0:
        return "$"
    return message[start + 1: message.find("`", start + 1)]


def load_config(path: str | os.PathLike[str] | None = None, *, log_unused: bool = True) -> Config:
    """Read a TOML file (or a nova.conf, with oslo.config's rules); ``None`` gives Nova's defaults.

    ``GANTT_CONFIG`` names the file when ``path`` is None. ``log_unused``: list the options and sections read
    but not used by Gantt (INFO); ``gantt serve`` does it once, not in every worker.
    """
    if path is None:
        path = os.environ.get("GANTT_CONFIG")
        if not path:
            return Config()
    p = Path(path)
    text = p.read_text()
    if p.suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise InvalidRequest(f"{p}: {exc}") from None
        unused = _set_aside_unused(data)
    else:
        try:
            sections = novaconf.read_ini(text)
        except novaconf.IniError as exc:
            raise InvalidRequest(f"{p}: {exc}") from None
        data, unused = _ini_to_dict(sections)
    policy = data.get("oslo_policy")
    if isinstance(policy, dict) and isinstance(policy.get("policy_file"), str):
        named = p.parent / policy["policy_file"]  # relative: beside the configuration file
        # oslo.policy's default name, which a nova.conf carries: absent, oslo.policy uses the rules in code, and so
        # does Gantt. A file named otherwise must be there.
        policy["policy_file"] = None if policy["policy_file"] == OSLO_POLICY_FILE and not named.exists() \
            else str(named)
    config = Config.from_dict(data)
    if log_unused:
        _log_unused(p, unused)
    return config


OSLO_POLICY_FILE = "policy.yaml"  # oslo.policy's default [oslo_policy] policy_file


def _log_unused(path: Path, unused: dict[str, list[str]]) -> None:
    for section, names in unused.items():
        if section:
            log.info("%s: [%s] options read, not used by Gantt: %s", path, section, ", ".join(names))
    if unused.get(""):
        log.info("%s: sections read, not used by Gantt: %s", path, ", ".join(unused[""]))


def _set_aside_unused(data: dict[str, Any]) -> dict[str, list[str]]:
    """Take Nova's options that change nothing Gantt decides (``novaconf.NOT_USED``) out of ``data``'s sections;
    returns their names by section."""
    out: dict[str, list[str]] = {}
    for section, names in novaconf.NOT_USED.items():
        values = data.get(section)
        if isinstance(values, dict) and any(name in values for name in names):
            out[section] = [name for name in values if name in names]
            data[section] = {k: v for k, v in values.items() if k not in names}
    return out


_SECTIONS: dict[str, type[Struct]] = {
    "filter_scheduler": FilterSchedulerSection, "scheduler": SchedulerSection, "metrics": MetricsSection,
    "DEFAULT": DefaultSection, "compute": ComputeSection, "gantt": GanttSection, "pci": PciSection,
    "oslo_policy": OsloPolicySection, "cors": CorsSection,
}
# oslo.config's MultiStrOpt: the option is given once per value, and every value is kept.
_MULTI_OPTIONS = {("pci", "alias"), ("DEFAULT", "pci_alias"), ("oslo_policy", "policy_dirs")}


def _ini_to_dict(sections: novaconf.Sections) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The file's sections as Config.from_dict takes them, each option converted to its type as oslo.config would;
    and the options and sections (key ``""``) read but not used, by section."""
    data: dict[str, Any] = {}
    unused: dict[str, list[str]] = {}
    for section, options in sections.items():
        if section.startswith("namespace:"):
            data[section] = _ini_namespace(section, options, unused)
        elif section in _SECTIONS:
            data[section] = _typed_section(section, section, _SECTIONS[section], options, unused)
        else:
            unused.setdefault("", []).append(section)
    default = sections.get("DEFAULT", {})
    if "pci_alias" in default:  # the option's name before it moved to [pci] (Nova still reads it)
        pci = data.setdefault("pci", {})
        if "alias" in pci:
            raise InvalidRequest("[DEFAULT] pci_alias is the old name of [pci] alias: give one of them")
        pci["alias"] = default["pci_alias"]
        unused["DEFAULT"].remove("pci_alias")
        if not unused["DEFAULT"]:
            del unused["DEFAULT"]
    return data, unused


def _typed_section(label: str, section: str, cls: type[Struct], options: dict[str, list[str]],
                   unused: dict[str, list[str]]) -> dict[str, Any]:
    """One section's options by ``cls``'s fields: each converted to the field's type with oslo.config's spellings
    (the last value of an option given twice; all of a multi-valued one). A name that is not a field is read, not
    used (``novaconf.NOT_USED``, or any in ``[DEFAULT]`` and ``[compute]``), else refused as a typo."""
    fields = {f.name: f for f in msgspec.structs.fields(cls)}
    not_used = novaconf.NOT_USED.get(section, {})
    values: dict[str, Any] = {}
    for name, given in options.items():
        found = fields.get(name)
        if found is None:
            if name in not_used or section in novaconf.LENIENT:
                unused.setdefault(label, []).append(name)
                continue
            raise novaconf.unknown_option(label, name, set(fields) | set(not_used))
        if (section, name) in _MULTI_OPTIONS:
            values[name] = given
        else:
            values[name] = novaconf.convert(given[-1], found.type, f"[{label}] {name}")
    return values


def _ini_namespace(section: str, options: dict[str, list[str]], unused: dict[str, list[str]]) -> dict[str, Any]:
    """``[namespace:<name>]`` (its kind, a volume namespace's options) or ``[namespace:<name>:<section>]`` (one of
    a compute namespace's sections), converted as the top-level sections are."""
    own = section.split(":", 2)[2] if section.count(":") >= 2 else None
    if own is not None:
        cls = _SECTIONS.get(own)
        if cls is None:  # not a section a namespace has: Config.namespaces() says so
            return {name: given[-1] for name, given in options.items()}
        return _typed_section(section, own, cls, options, unused)
    values: dict[str, Any] = {name: given[-1] for name, given in options.items()}
    if values.get("kind") == "volume":
        try:
            from gantt.volume import VolumeOptions  # type: ignore[import-not-found,unused-ignore]
        except ImportError:  # Config.namespaces() says what is missing
            return values
        types_ = {f.name: f.type for f in msgspec.structs.fields(VolumeOptions)}
        for name, raw in values.items():
            if name in types_:
                values[name] = novaconf.convert(raw, types_[name], f"[{section}] {name}")
    return values


prepare_types(globals())  # build msgspec type info before any thread decodes (see model.prepare_types)
