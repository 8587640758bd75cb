"""Host aggregates as Nova keeps them: members and string metadata, the numeric keys held to finite numbers."""

from __future__ import annotations

import math
from typing import Annotated

from msgspec import Meta, Struct, field

from gantt.model.limits import MAX_HOSTS, MAX_LIST, AggregateId, Key, Name, Text
from gantt.model.prepare import prepare_types

NUMERIC_METADATA = frozenset({"cpu_allocation_ratio", "ram_allocation_ratio", "disk_allocation_ratio",
                              "max_io_ops_per_host", "max_instances_per_host"})


def _finite_text(key: str, value: str) -> None:
    """A numeric metadata value that parses must be finite (Nova ignores, with a warning, one that does not
    parse at all; Gantt keeps that); 'inf' or 'nan' would reach limits and weights as inf or NaN."""
    try:
        number = float(value)
    except ValueError:
        return
    if not math.isfinite(number) or abs(number) > 1e15:
        raise ValueError(f"metadata.{key} must be a finite number, not {value!r}")


# gc=False: carried by store changes, never in a cycle (model.hosts; tests/test_untracked.py).
class Aggregate(Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    id: AggregateId | Name
    name: Text | None = None
    uuid: Text | None = None
    hosts: Annotated[list[Name], Meta(max_length=MAX_HOSTS)] = field(default_factory=list)
    metadata: Annotated[dict[Key, Text], Meta(max_length=MAX_LIST)] = field(default_factory=dict)
    availability_zone: Text | None = None  # Nova's API shows it; it is the same as metadata['availability_zone']

    def __post_init__(self) -> None:
        if isinstance(self.id, str) and not self.id:
            raise ValueError("id must not be empty")
        if len(set(self.hosts)) != len(self.hosts):  # 3,000 x "c0" is one host: keep it once, in order
            self.hosts = list(dict.fromkeys(self.hosts))
        if self.availability_zone is not None and "availability_zone" not in self.metadata:
            self.metadata["availability_zone"] = self.availability_zone
        # Nova stores every metadata value as a string; accept what JSON gives and keep Nova's form.
        for key, value in list(self.metadata.items()):
            if not isinstance(value, str):
                raise ValueError(f"metadata must map keys to strings ({key!r} does not)")
            if key in NUMERIC_METADATA or key.endswith("_weight_multiplier"):
                _finite_text(key, value)

    @property
    def key(self) -> str:
        return str(self.id)


prepare_types(globals())
