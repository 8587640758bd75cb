"""Reading a scenario: the TOML file decoded, converted to the Scenario types, and checked (names that point
elsewhere in it, host kinds a report would refuse, the policy's filters and weighers), each error a ScenarioError
naming its field as a path (``cloud.hosts_per_rack``)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from gantt.config import Config
from gantt.model import InvalidRequest
from gantt.sim.cloud import host_stats, rack_names
from gantt.sim.scenario import Scenario, ScenarioError

_OWN_FIELD_RE = re.compile(r"^([a-z_][a-z0-9_]*) must ")


def _field_of(message: str) -> str:
    start = message.find("`$")
    if start < 0:
        return ""
    where = message[start + 2: message.find("`", start + 1)].lstrip(".")
    # Our __post_init__ checks start with the field's name; msgspec reports them at the enclosing struct.
    own = _OWN_FIELD_RE.match(message)
    if own:
        where = f"{where}.{own.group(1)}" if where else own.group(1)
    return where


def parse_scenario(data: dict[str, Any], source: str = "scenario") -> Scenario:
    """Validate a decoded TOML document; raises ScenarioError naming the field."""
    try:
        scenario = msgspec.convert(data, Scenario, strict=False)
    except msgspec.ValidationError as exc:
        where = _field_of(str(exc))
        message = re.sub(r" - at `[^`]*`", "", str(exc))
        raise ScenarioError(f"{source}: {where or 'scenario'}: {message}", field=where or None) from None
    _check_references(scenario)
    _check_plugins(scenario.config())  # validates policy.config now rather than mid-run
    return scenario


def _check_plugins(config: Config) -> None:
    """Every filter and weigher the policy names exists: an unknown one is a bad scenario (exit status 2), not
    a traceback mid-run with the status of a broken invariant."""
    from gantt.compute import filters, weighers
    fs = config.filter_scheduler
    for field_name, resolve, names in (("enabled_filters", filters.pipeline, fs.enabled_filters),
                                       ("weight_classes", weighers.resolve, fs.weight_classes)):
        try:
            resolve(names)
        except ValueError as exc:
            raise ScenarioError(f"policy.config.filter_scheduler.{field_name}: {exc}",
                                field=f"policy.config.filter_scheduler.{field_name}") from None


def read_scenario_data(path: str | Path) -> dict[str, Any]:
    """The scenario file as decoded TOML, not yet validated (a sweep edits it before validating each point)."""
    p = Path(path)
    try:
        return tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise ScenarioError(f"{p}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{p}: not valid TOML: {exc}") from None


def load_scenario(path: str | Path) -> Scenario:
    return parse_scenario(read_scenario_data(path), str(path))


def _check_references(s: Scenario) -> None:
    """Names that point elsewhere in the scenario must exist (racks, zones, kinds, flavors, schedulers)."""
    racks = set(rack_names(s.cloud))
    kinds = {k.name for k in s.cloud.host_kinds}
    for i, kind in enumerate(s.cloud.host_kinds):
        try:
            host_stats(kind)  # a PCI pool or a topology a host report would refuse, named where it is
        except InvalidRequest as exc:
            where = f"cloud.host_kinds[{i}]" + (".pci" if "pci_stats" in (exc.field or "") else "")
            raise ScenarioError(f"{where}: {exc.message}", field=where) from None
    for i, agg in enumerate(s.cloud.aggregates):
        for attr, known in (("racks", racks), ("azs", set(s.cloud.azs)), ("host_kinds", kinds)):
            for j, name in enumerate(getattr(agg, attr) or ()):
                if name not in known:
                    raise ScenarioError(f"cloud.aggregates[{i}].{attr}[{j}]: unknown {attr[:-1]} {name!r}",
                                        field=f"cloud.aggregates[{i}].{attr}[{j}]")
    if s.workload.prefill.flavor is not None and s.workload.prefill.flavor not in {f.name for f in
                                                                                      s.workload.flavors}:
        raise ScenarioError(f"workload.prefill.flavor: unknown flavor {s.workload.prefill.flavor!r}",
                            field="workload.prefill.flavor")
    if s.volumes is not None and s.volumes.same_az:
        for i, backend in enumerate(s.volumes.backends):
            if backend.az not in s.cloud.azs:
                raise ScenarioError(f"volumes.backends[{i}].az: unknown zone {backend.az!r} (same_az puts a VM's "
                                    "volumes in its own zone)", field=f"volumes.backends[{i}].az")
    for i, failure in enumerate(s.failures):
        where = f"failures[{i}]"
        if failure.kind == "rack_lost" and failure.rack is None:
            raise ScenarioError(f"{where}.rack: rack_lost needs a rack", field=f"{where}.rack")
        if failure.rack is not None and failure.rack not in racks:
            raise ScenarioError(f"{where}.rack: unknown rack {failure.rack!r} (racks are named like "
                                f"{next(iter(sorted(racks)))!r})", field=f"{where}.rack")
        if failure.kind == "host_flap" and failure.rack is None and failure.hosts < 1:
            raise ScenarioError(f"{where}.hosts: host_flap needs hosts >= 1 or a rack", field=f"{where}.hosts")
        if failure.kind == "host_flap" and failure.hosts > s.cloud.hosts:
            raise ScenarioError(f"{where}.hosts: more than the {s.cloud.hosts} hosts of the cloud",
                                field=f"{where}.hosts")
        if failure.kind == "scheduler_crash" and not 0 <= failure.scheduler < s.control_plane.schedulers:
            raise ScenarioError(f"{where}.scheduler: no scheduler {failure.scheduler} (there are "
                                f"{s.control_plane.schedulers}, numbered from 0)", field=f"{where}.scheduler")
