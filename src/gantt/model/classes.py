"""Resource classes and traits: the standard classes, the rules a class or trait name follows, and the catalog's
records of custom ones."""

from __future__ import annotations

import re
from typing import Literal

from msgspec import Struct

from gantt.model.limits import Text
from gantt.model.prepare import prepare_types

TRAIT_RE = re.compile(r"^[A-Z0-9_]+$")  # a trait name: upper-case letters, digits, underscores
_CUSTOM_RE = re.compile(r"^CUSTOM_[A-Z0-9_]+$")


def _standard_classes() -> frozenset[str]:
    try:
        import os_resource_classes as orc  # untyped: pyproject lets mypy skip it

        return frozenset(orc.STANDARDS)
    except ImportError:  # pragma: no cover - os-resource-classes is a hard dependency
        return frozenset({"VCPU", "MEMORY_MB", "DISK_GB", "PCPU"})


STANDARD_CLASSES = _standard_classes()


def check_resource_class(name: str, where: str) -> None:
    if name in STANDARD_CLASSES or _CUSTOM_RE.match(name):
        return
    raise ValueError(f"{where} must name standard resource classes or CUSTOM_* ones, not {name!r}")


RecordKind = Literal["resource_class", "trait"]


# gc=False: carried by store changes, never in a cycle (model.hosts; tests/test_untracked.py).
class Record(Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """A named record of the catalog beside the nodes: a custom resource class or a custom trait (Placement's
    CRUD). Standard classes and traits come from os-resource-classes and os-traits and are never stored."""

    kind: RecordKind
    name: Text
    created_at: float = 0.0

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.name)


prepare_types(globals())
