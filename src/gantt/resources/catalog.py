"""Resource classes and traits: os-resource-classes' and os-traits' standard names, and custom ones as records.

Custom names (``CUSTOM_*``) are ``Record``s in the store, beside the nodes, and reach every replica through the
same change feed. The rules Placement applies to them live here; the replica holds the records.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import os_resource_classes
import os_traits

from gantt.model import STANDARD_CLASSES, Conflict, InvalidRequest, NotFound, Record, RecordKind

STANDARD_TRAITS = frozenset(os_traits.get_traits())
STANDARD_CLASS_ORDER = list(os_resource_classes.STANDARDS)
CUSTOM = re.compile(r"^CUSTOM_[A-Z0-9_]+$")
MAX_NAME = 255


class Catalog:
    """The custom records one replica knows (kept current from the feed, under the table lock)."""

    def __init__(self, records: Iterable[Record] = ()) -> None:
        self.records: dict[tuple[str, str], Record] = {r.key: r for r in records}

    def put(self, record: Record) -> None:
        self.records[record.key] = record

    def remove(self, key: tuple[str, str]) -> None:
        self.records.pop(key, None)

    def custom(self, kind: RecordKind) -> list[Record]:
        return sorted((r for r in self.records.values() if r.kind == kind), key=lambda r: r.name)

    def has(self, kind: RecordKind, name: str) -> bool:
        standard = STANDARD_CLASSES if kind == "resource_class" else STANDARD_TRAITS
        return name in standard or (kind, name) in self.records

    def resource_classes(self) -> list[str]:
        return [*STANDARD_CLASS_ORDER, *(r.name for r in self.custom("resource_class"))]

    def traits(self) -> list[str]:
        return sorted([*STANDARD_TRAITS, *(r.name for r in self.custom("trait"))])

    def missing(self, kind: RecordKind, names: Iterable[str]) -> list[str]:
        return sorted({name for name in names if not self.has(kind, name)})


def check_custom(kind: RecordKind, name: str) -> None:
    """A name a client may create: ``CUSTOM_`` and upper-case letters, digits and underscores, at most 255."""
    if len(name) > MAX_NAME or not CUSTOM.match(name):
        if kind == "trait":  # Placement's own words
            raise InvalidRequest('The trait is invalid. A valid trait must be no longer than 255 characters, start '
                                 'with the prefix "CUSTOM_" and use following characters: "A"-"Z", "0"-"9" and "_"',
                                 field="name")
        rule = "maxLength" if len(name) > MAX_NAME else "pattern"
        raise InvalidRequest(f"JSON does not validate: {name!r} is not a valid custom resource class name (at most "
                             f"{MAX_NAME} characters, '^CUSTOM_[A-Z0-9_]+$')\n\nFailed validating '{rule}'",
                             field="name")


def check_deletable(kind: RecordKind, name: str, catalog: Catalog, users: int, verb: str = "delete") -> None:
    """A standard name is never deleted (400); a custom one only if it exists (404) and nothing uses it (409)."""
    what = "resource class" if kind == "resource_class" else "trait"
    standard = STANDARD_CLASSES if kind == "resource_class" else STANDARD_TRAITS
    if name in standard:
        raise InvalidRequest(f"Cannot {verb} standard {what} {name}.", field="name")
    if (kind, name) not in catalog.records:
        raise NotFound(f"No such {what} {name}.", field="name")
    if users:  # Placement's words for each (clients and its tests match on them)
        if kind == "trait":
            raise Conflict(f"The trait {name} is in use by a resource provider.")
        raise Conflict(f"Error in {verb} resource class: Cannot {verb} resource class {name}. Class is in use in "
                       "inventory.")
