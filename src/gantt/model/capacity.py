"""Capacity questions (``POST /v1/capacity``): how many more of each request fit, and what taking hosts away
displaces."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, Struct, field

from gantt.model.limits import MAX_LIST, Name, Text
from gantt.model.prepare import prepare_types
from gantt.model.request_spec import RequestSpec

MAX_CAPACITY_REQUESTS = 20
MAX_CAPACITY_TOP = 1000


class Without(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Hosts taken away: by name, by aggregate (its id, uuid or name: a rack, a power domain) or by zone."""

    hosts: Annotated[list[Name], Meta(max_length=MAX_LIST)] = field(default_factory=list)
    aggregates: Annotated[list[Text], Meta(max_length=MAX_LIST)] = field(default_factory=list)
    zones: Annotated[list[Text], Meta(max_length=MAX_LIST)] = field(default_factory=list)


class CapacityQuestion(Struct, forbid_unknown_fields=True, omit_defaults=True):
    requests: Annotated[list[RequestSpec], Meta(min_length=1, max_length=MAX_CAPACITY_REQUESTS)]
    without: Without | None = None
    # how many of the nodes with the most room each answer lists
    limit: Annotated[int, Meta(ge=0, le=MAX_CAPACITY_TOP)] = 10


class NodeRoom(Struct):
    host: str
    nodename: str
    instances: int


class RequestCapacity(Struct, omit_defaults=True):
    flavor: str | None
    resources: dict[str, int]
    instances: int  # more instances of the request that fit, on the nodes left
    nodes: int  # nodes with room for at least one
    by_zone: dict[str, int]
    by_aggregate: dict[str, int]  # aggregates with room, by name
    top: list[NodeRoom]  # the nodes with the most room, most first
    instances_before: int | None = None  # with ``without``: what fitted with those hosts in
    nodes_before: int | None = None


class DisplacedShape(Struct):
    resources: dict[str, int]  # what one displaced consumer holds on the nodes taken away
    consumers: int
    fit_again: int  # of those, how many the nodes left have room for (this shape alone)


class Displaced(Struct):
    nodes: int
    consumers: int
    resources: dict[str, int]  # the sum of what they hold there
    shapes: list[DisplacedShape]


class CapacityAnswer(Struct, omit_defaults=True):
    requests: list[RequestCapacity]
    displaced: Displaced | None = None


prepare_types(globals())
