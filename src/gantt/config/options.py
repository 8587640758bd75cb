"""Config: every option of one file, section by section, with the namespaces it declares; a worker's share of it,
and a copy with some options changed."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import Struct, field

from gantt.config.novaconf import set_aside_unused
from gantt.config.pci import PciSection
from gantt.config.placement import CorsSection, OsloPolicySection
from gantt.config.scheduling import (
    ComputeSection,
    DefaultSection,
    FilterSchedulerSection,
    MetricsSection,
    SchedulerSection,
    WorkaroundsSection,
)
from gantt.config.service import GanttSection
from gantt.config.tuning import TuningSection
from gantt.config.volume import VolumeOptions
from gantt.model.errors import InvalidRequest
from gantt.model.namespaces import check_name
from gantt.model.prepare import prepare_types


class Config(Struct, forbid_unknown_fields=True, kw_only=True, rename={"default": "DEFAULT"}):
    filter_scheduler: FilterSchedulerSection = field(default_factory=FilterSchedulerSection)
    scheduler: SchedulerSection = field(default_factory=SchedulerSection)
    metrics: MetricsSection = field(default_factory=MetricsSection)
    default: DefaultSection = field(default_factory=DefaultSection)
    compute: ComputeSection = field(default_factory=ComputeSection)
    workarounds: WorkaroundsSection = field(default_factory=WorkaroundsSection)
    gantt: GanttSection = field(default_factory=GanttSection)
    pci: PciSection = field(default_factory=PciSection)
    oslo_policy: OsloPolicySection = field(default_factory=OsloPolicySection)
    cors: CorsSection = field(default_factory=CorsSection)
    tuning: TuningSection = field(default_factory=TuningSection)  # how a worker is sized (gantt.config.tuning)
    # ``[namespace.<name>]`` tables (``[namespace:<name>]`` in INI): the namespaces served beside the default one
    # (``gantt.model.namespaces``), each as written in the file; ``namespaces()`` reads them, refusing what is wrong.
    namespace: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        data = _gather_namespaces(dict(data))
        set_aside_unused(data)  # Nova's options that change nothing here: read, not used
        try:
            config = msgspec.convert(data, cls, strict=False)
        except msgspec.ValidationError as exc:
            raise InvalidRequest(f"configuration: {exc}", field=_path(str(exc))) from None
        config.namespaces()  # refuse a bad namespace section at load, not when its first request arrives
        try:  # the aliases as [filter_scheduler] pci_in_placement wants them (Nova's API checks at start too)
            config.pci.check(config.filter_scheduler.pci_in_placement)
        except ValueError as exc:
            raise InvalidRequest(f"configuration: {exc}", field="pci.alias") from None
        return config

    def namespaces(self) -> dict[str, Namespace]:
        """Every namespace served, the default (``compute``, this Config's own sections) first. A compute-kind
        namespace gets its own Config: its nested sections, Nova's defaults for the rest, and this file's
        service-wide ``[gantt]``; a volume-kind one its ``VolumeOptions`` (gantt.config.volume)."""
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
_NAMESPACE_SECTIONS = {"filter_scheduler", "scheduler", "metrics", "DEFAULT", "compute", "pci", "workarounds"}


class Namespace(Struct, kw_only=True):
    """A namespace as configured: its name, kind, and what its kind's engine reads."""

    name: str
    kind: str
    config: Config | None = None  # kind compute
    options: VolumeOptions | None = None  # kind volume


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
        set_aside_unused(options)
        data = {**options, "gantt": msgspec.to_builtins(base.gantt)}
        try:
            config = msgspec.convert(data, Config, strict=False)
        except (msgspec.ValidationError, InvalidRequest) as exc:
            message = exc.message if isinstance(exc, InvalidRequest) else str(exc)
            field_ = exc.field if isinstance(exc, InvalidRequest) else _path(str(exc))
            raise InvalidRequest(f"{where}: {message}", field=_option(name, field_)) from None
        return Namespace(name=name, kind=kind, config=config)
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


prepare_types(globals())  # build msgspec type info before any thread decodes (see gantt.model.prepare)
