"""Structs the cyclic collector does not track (``gc=False``) cannot be part of a reference cycle.

An untracked object in a cycle is never collected: the collector cannot see the references it holds, so the
cycle's other members look referenced from outside for ever. ``gc=False`` is therefore allowed only on types whose
fields, by their declared types, can hold nothing that leads back: scalars, other untracked Structs, containers of
those, and free-form JSON (``model.limits.FreeForm``: decoded JSON, or checked by ``check_json`` to encode as JSON
at most MAX_DEPTH deep, so it holds no cycle of its own and no object of ours). The walk below is over every
Struct type of the package, so a new field of another kind on one of them fails here."""

from __future__ import annotations

import gc
import importlib
import pkgutil
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest

import gantt
from gantt.model import Allocation, AllocationPart, FreeForm, HostReport, HostStats, Inventory, Metric, Provider
from gantt.model.limits import MAX_JSON_BYTES
from gantt.resources.providers import view
from gantt.store.base import Batch, Change, RepeatOf, lifted

_SCALARS = (mi.NoneType, mi.BoolType, mi.IntType, mi.FloatType, mi.StrType, mi.BytesType, mi.LiteralType,
            mi.DateTimeType, mi.DateType, mi.TimeType, mi.UUIDType, mi.DecimalType, mi.EnumType)
_ITEMS = (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)


def _structs() -> list[type[msgspec.Struct]]:
    """Every Struct type the package defines (its modules imported; those needing an extra, such as nova, not)."""
    for info in pkgutil.walk_packages(gantt.__path__, "gantt.", onerror=lambda name: None):
        if info.name.endswith(".__main__"):
            continue  # a command, run when imported
        try:
            importlib.import_module(info.name)
        except ImportError:
            continue
    found: list[type[msgspec.Struct]] = []
    todo: list[type] = [msgspec.Struct]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("gantt."):
                found.append(sub)
    return found


def untracked(cls: type) -> bool:
    config = getattr(cls, "__struct_config__", None)
    return config is not None and config.gc is False


def why_not_acyclic(cls: type[msgspec.Struct]) -> list[str]:
    """What a gc=False Struct's fields may hold that could lead back to it ([] when nothing can)."""
    problems: list[str] = []

    def walk(t: Any, where: str, json: bool) -> None:
        if isinstance(t, mi.Metadata):
            # FreeForm's bound: decoded JSON, or a Python value check_json takes (JSON types, at most MAX_DEPTH)
            free = t.extra is not None and t.extra.get("max_bytes") == MAX_JSON_BYTES
            walk(t.type, where, json or free)
        elif isinstance(t, _SCALARS):
            pass
        elif isinstance(t, mi.AnyType):
            if not json:
                problems.append(f"{where}: Any outside free-form JSON")
        elif isinstance(t, _ITEMS):
            walk(t.item_type, f"{where}[]", json)
        elif isinstance(t, mi.DictType):
            walk(t.key_type, f"{where}{{key}}", json)
            walk(t.value_type, f"{where}{{}}", json)
        elif isinstance(t, mi.TupleType):
            for i, item in enumerate(t.item_types):
                walk(item, f"{where}[{i}]", json)
        elif isinstance(t, mi.UnionType):
            for option in t.types:
                walk(option, where, json)
        elif isinstance(t, mi.StructType):
            if not untracked(t.cls):
                problems.append(f"{where}: {t.cls.__name__}, a tracked Struct (it may hold anything leading back)")
            # its own fields are checked as a type of its own (every gc=False type is)
        else:
            problems.append(f"{where}: {type(t).__name__} {getattr(t, 'cls', '')}")

    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    for f in info.fields:
        walk(f.type, f"{cls.__name__}.{f.name}", False)
    return problems


class _Tracked(msgspec.Struct):
    x: int


class _Bad(msgspec.Struct, gc=False):
    fine: dict[str, list[tuple[int, str | None]]]
    json: FreeForm | None
    anything: Any
    deep: list[dict[str, _Tracked]]
    objects: list[object]


UNTRACKED = [cls for cls in _structs() if untracked(cls)]


def test_the_records_a_report_a_touch_and_a_claim_make_are_untracked() -> None:
    """The types the served paths make by the hundred thousand are among them (and the walk covers them)."""
    report = HostReport(host="h", node="n", reported_at=1.0, provider=Provider(uuid="u", name="n"),
                        stats=HostStats(vcpus=4, inventories={"VCPU": Inventory(total=4)}, traits=["HW_CPU_X86_AVX"],
                                        metrics=[Metric(name="cpu.percent", value=1.0)], stats={"a": [1, {"b": 2}]}))
    made = [report, report.stats, lifted(report, 2.0), Change(revision=1, kind="host", host=report),
            Allocation(consumer_uuid="c", host="h", nodename="n", resources={"VCPU": 1},
                       extra=[AllocationPart(host="h2", nodename="n2", resources={"DISK_GB": 1})]),
            RepeatOf("h", "n", 1, 1.0), Batch(reports=[report]), view(report)]
    for obj in made:
        assert not gc.is_tracked(obj), type(obj).__name__
        assert type(obj) in UNTRACKED


@pytest.mark.parametrize("cls", UNTRACKED, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_an_untracked_struct_holds_nothing_that_leads_back(cls: type[msgspec.Struct]) -> None:
    assert why_not_acyclic(cls) == []


def test_the_walk_finds_what_could_lead_back() -> None:
    """It is no walk that passes everything: a field of Any, of an object, or of a tracked Struct is found, at any
    depth of containers; Any inside free-form JSON is not."""
    assert why_not_acyclic(_Bad) == ["_Bad.anything: Any outside free-form JSON",
                                     "_Bad.deep[]{}: _Tracked, a tracked Struct (it may hold anything leading back)",
                                     "_Bad.objects[]: CustomType <class 'object'>"]
