"""Cinder's backend filters, each a mask over a PoolTable's rows (True: the pool passes).

A filter returns None when the request does not concern it (everything passes). Numbers are columns; what Cinder
CapabilitiesFilter reads from the pools' free-form capabilities is evaluated once per distinct reported value
(``PoolTable.factor``, kept until a pool reports again); DriverFilter and JsonFilter, whose expressions read usage
too, evaluate per pool.
What Cinder would raise on (a malformed query, an instance hint that is not a UUID) is the caller's mistake:
InvalidRequest, naming the field.
"""

from __future__ import annotations

import json
import operator
import uuid
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from gantt.base.registry import Registry
from gantt.model import InvalidRequest
from gantt.volume import capacity, expression, specs
from gantt.volume.model import VolumeRequest
from gantt.volume.table import INFINITE, MISSING, NONE, NUMBER, UNKNOWN, PoolTable, pool_state


class Request:
    """One decision's request, with what several filters and weighers derive from it computed once."""

    def __init__(self, spec: VolumeRequest) -> None:
        self.spec = spec
        self.size = spec.size
        requested = spec.new_size - spec.size if spec.new_size else spec.size
        self.requested = requested
        self.thin = spec.thin
        vp = spec.volume_properties
        self.volume_stats: dict[str, Any] = {f: getattr(vp, f) for f in vp.__struct_fields__}
        self.qos = vp.qos_specs
        self.extra = spec.extra_specs


class VolumeFilter:
    name: ClassVar[str] = ""
    # ``mask`` takes ``within`` (the rows every other filter passes) and may leave the rows outside it False:
    # such a filter runs last in a decision and computes on the survivors only.
    narrows: ClassVar[bool] = False
    per_pool: ClassVar[bool] = False  # evaluates Python per pool: runs after every vectorized filter

    def mask(self, table: PoolTable, req: Request, within: np.ndarray | None = None) -> np.ndarray | None:
        raise NotImplementedError


FILTERS: Registry[VolumeFilter] = Registry("volume filter")
register = FILTERS.register


@register
class AvailabilityZoneFilter(VolumeFilter):
    """The pool's service is in the requested zone (or one of the requested zones)."""

    name = "AvailabilityZoneFilter"

    def mask(self, table: PoolTable, req: Request, within: np.ndarray | None = None) -> np.ndarray | None:
        zones = req.spec.availability_zones or (
            [req.spec.volume_properties.availability_zone] if req.spec.volume_properties.availability_zone else [])
        if not zones:
            return None
        wanted = np.zeros(len(table.az_names) + 1, dtype=np.bool_)  # the last entry: a free row's -1
        for zone in zones:
            if zone in table.az_names:
                wanted[table.az_names[zone]] = True
        passing: np.ndarray = wanted[table.az[:table.n]]
        return passing


@register
class CapacityFilter(VolumeFilter):
    """Room for the volume: thick pools by free space less the reserve, thin ones by virtual free space under
    the over-subscription ratio (Cinder 29's CapacityFilter, to the rounding)."""

    name = "CapacityFilter"
    narrows = True

    def mask(self, table: PoolTable, req: Request, within: np.ndarray | None = None) -> np.ndarray | None:
        size = req.requested
        if size == 0:
            return None  # Cinder: a manage request
        rows = np.flatnonzero(within) if within is not None else np.arange(table.n)
        free_kind, total_kind = table.free_kind[rows], table.total_kind[rows]
        passes = np.zeros(len(rows), dtype=np.bool_)
        passes[(free_kind == INFINITE) | (free_kind == UNKNOWN)] = True
        special_total = (free_kind == NUMBER) & (total_kind != NUMBER)
        passes[special_total & (table.reserved[rows] == 0)] = True
        numeric = capacity.numeric(table, rows) & (table.total[rows] > 0)
        virtual_free, total_available = capacity.factors(table, req.thin, rows)
        thin = table.thin[rows] & req.thin
        ratio = table.ratio[rows]
        checked = numeric & thin & (ratio >= 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            provisioned_ratio = (table.provisioned[rows] + size) / total_available
        # Cinder divides by zero here (and fails the whole request); Gantt fails the pool
        fits_thin = (total_available != 0) & ~(provisioned_ratio > ratio) & (virtual_free >= size)
        passes[checked] = fits_thin[checked]
        thick = numeric & ~thin
        passes[thick] = (virtual_free >= size)[thick]
        passes[free_kind == NONE] = False
        out = np.zeros(table.n, dtype=np.bool_)
        out[rows] = passes
        return out


def _capabilities_specs(extra: dict[str, str]) -> list[tuple[list[str], str]]:
    out = []
    for key, requirement in extra.items():
        scope = key.split(":")
        if len(scope) > 1 and scope[0] != "capabilities":
            continue  # a vendor's or another filter's scope
        if scope[0] == "capabilities":
            scope = scope[1:]
        out.append((scope, requirement))
    return out


def capabilities_pass(caps: Any, scoped: list[tuple[list[str], str]]) -> bool:
    """Cinder's _satisfies_extra_specs for one pool; a requirement Cinder cannot evaluate fails the pool."""
    for scope, requirement in scoped:
        value = caps
        for part in scope:
            try:
                value = value[part]
            except (TypeError, KeyError, IndexError):
                return False
        values = value if isinstance(value, list) else [value]
        try:
            if not any(specs.match(v, requirement) for v in values):
                return False
        except specs.Unmatchable:
            return False
    return True


def _value_passes(value: Any, requirement: str) -> bool:
    values = value if isinstance(value, list) else [value]
    try:
        return any(specs.match(v, requirement) for v in values)
    except specs.Unmatchable:
        return False  # Cinder raises (the request fails); the pool fails here


@register
class CapabilitiesFilter(VolumeFilter):
    """The volume type's extra specs (unscoped or ``capabilities:``) hold against the pool's capabilities.

    Each requirement is evaluated once per distinct reported value (``PoolTable.factor``), not once per pool."""

    name = "CapabilitiesFilter"

    def mask(self, table: PoolTable, req: Request, within: np.ndarray | None = None) -> np.ndarray | None:
        if req.spec.operation == "extend_volume":
            return self._extend(table, req)
        scoped = _capabilities_specs(req.extra)
        if not scoped:
            return None
        out = np.ones(table.n, dtype=np.bool_)
        for scope, requirement in scoped:
            codes, values = table.factor(tuple(scope))
            lut = np.fromiter((v is not MISSING and _value_passes(v, requirement) for v in values),
                              dtype=np.bool_, count=len(values))
            out &= (codes >= 0) & lut[codes] if len(values) else np.zeros(table.n, dtype=np.bool_)
        return out

    def _extend(self, table: PoolTable, req: Request) -> np.ndarray | None:
        # An attached volume cannot grow on a pool that says it does not extend online.
        attached = req.spec.volume_properties.attach_status != "detached"
        scoped = _capabilities_specs(req.extra)
        n = table.n
        out = np.ones(n, dtype=np.bool_)
        for row in np.flatnonzero(table.live[:n]):
            caps = table.capabilities(int(row))
            if attached and caps.get("online_extend_support", True) is False:
                out[row] = False
            elif scoped:
                out[row] = capabilities_pass(caps, scoped)
        return out


def _names(table: PoolTable, row: int, req: Request) -> dict[str, Any]:
    """The variables of Cinder's expression language for one pool (DriverFilter's and GoodnessWeigher's)."""
    state = pool_state(table, row)
    stats = {key: state[key] for key in (
        "host", "cluster_name", "backend_id", "volume_backend_name", "vendor_name", "driver_version",
        "storage_protocol", "QoS_support", "total_capacity_gb", "allocated_capacity_gb", "free_capacity_gb",
        "reserved_percentage", "updated")}
    return {"extra": req.extra, "stats": stats, "capabilities": state["capabilities"], "volume": req.volume_stats,
            "qos": req.qos}


def function_results(table: PoolTable, row: int, req: Request, key: str) -> list[Any]:
    """The pool's ``filter_function`` / ``goodness_function`` evaluated as Cinder does: once, or once per
    spelling of the storage protocol when the expression names it; an EvaluationError item where it failed."""
    text = table.capabilities(row).get(key)
    if text is None:
        return [None]
    text = str(text)
    names = _names(table, row, req)
    protocol = names["stats"]["storage_protocol"]
    if "storage_protocol" not in text or not isinstance(protocol, list):
        return [_evaluate(text, names)]
    return [_evaluate(text, {**names, "stats": {**names["stats"], "storage_protocol": variant},
                             "capabilities": {**names["capabilities"], "storage_protocol": variant}})
            for variant in protocol]


def _evaluate(text: str, names: dict[str, Any]) -> Any:
    try:
        return expression.evaluate(text, **names)
    except expression.EvaluationError as exc:
        return exc


def with_function(table: PoolTable, key: str) -> np.ndarray:
    """The live rows whose capabilities name a ``key`` function (the others need no evaluation)."""
    codes, values = table.factor((key,))
    lut = np.fromiter((v is not MISSING and v is not None for v in values), dtype=np.bool_, count=len(values))
    has = (codes >= 0) & (lut[codes] if len(values) else np.zeros(table.n, dtype=np.bool_))
    return np.flatnonzero(has & table.live[:table.n])


@register
class DriverFilter(VolumeFilter):
    """The pool's own ``filter_function`` (an expression over the pool's stats and the request) must hold."""

    name = "DriverFilter"
    narrows = True
    per_pool = True

    def mask(self, table: PoolTable, req: Request, within: np.ndarray | None = None) -> np.ndarray | None:
        out = np.ones(table.n, dtype=np.bool_) if within is None else within.copy()
        rows = with_function(table, "filter_function")
        if within is not None:
            rows = rows[within[rows]]
        for row in rows.tolist():
            results = function_results(table, row, req, "filter_function")
            out[row] = any(not isinstance(r, Exception) and bool(r) for r in results)
        return out


def is_uuid_like(value: Any) -> bool:
    """oslo_utils.uuidutils.is_uuid_like."""
    try:
        text = str(value)
        bare = text.replace("urn:", "").replace("uuid:", "").strip("{}").replace("-", "").lower()
        return str(uuid.UUID(text)).replace("-", "") == bare
    except (TypeError, ValueError, AttributeError):
        return False


def _affinity_ids(hint: Any) -> list[str] | None:
    """The volume ids of a same_host / different_host hint; None: the hint is malformed (Cinder then fails
    every backend rather than guess)."""
    if isinstance(hint, list):
        return hint if all(is_uuid_like(h) for h in hint) else None
    if is_uuid_like(hint):
        return [hint]
    return None


class _AffinityFilter(VolumeFilter):
    hint: ClassVar[str] = ""
    same: ClassVar[bool] = True

    def mask(self, table: PoolTable, req: Request, within: np.ndarray | None = None) -> np.ndarray | None:
        hint = getattr(req.spec.scheduler_hints, self.hint)
        if hint is None:
            return None
        ids = _affinity_ids(hint)
        if ids is None:
            return np.zeros(table.n, dtype=np.bool_)
        if not ids:
            return None
        holding = np.zeros(table.n, dtype=np.bool_)
        for volume in ids:
            row = table.where(volume)
            if row is not None:
                holding[row] = True
        return holding if self.same else ~holding


@register
class SameBackendFilter(_AffinityFilter):
    """Only the pools holding one of the ``same_host`` volumes."""

    name = "SameBackendFilter"
    hint = "same_host"
    same = True


@register
class DifferentBackendFilter(_AffinityFilter):
    """No pool holding one of the ``different_host`` volumes."""

    name = "DifferentBackendFilter"
    hint = "different_host"
    same = False


@register
class InstanceLocalityFilter(VolumeFilter):
    """Only the backends on the host where the ``local_to_instance`` instance runs (the request's
    ``instance_hosts`` says where: Gantt does not call Nova)."""

    name = "InstanceLocalityFilter"

    def mask(self, table: PoolTable, req: Request, within: np.ndarray | None = None) -> np.ndarray | None:
        instance = req.spec.scheduler_hints.local_to_instance
        if not instance:
            return None
        field = "$.scheduler_hints.local_to_instance"
        if not is_uuid_like(instance):
            raise InvalidRequest(f"local_to_instance {instance!r} is not a UUID", field=field)
        hosts = req.spec.instance_hosts or {}
        if instance not in hosts:
            raise InvalidRequest(f"instance {instance} is not in instance_hosts: Gantt needs to be told where it "
                                 "runs", field="$.instance_hosts")
        where = hosts[instance]
        n = table.n
        out = np.zeros(n, dtype=np.bool_)
        for row in np.flatnonzero(table.live[:n]):
            # Cinder's extract_host(backend_id, 'host'): the host part, before '@'
            out[row] = table.report(int(row)).backend_id.partition("#")[0].partition("@")[0] == where
        return out


_JSON_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq, "<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge,
}
_JSON_COMMANDS = frozenset({*_JSON_COMPARE, "in", "not", "or", "and"})


class _QueryError(Exception):
    """Cinder would raise evaluating the query on this pool."""


def _json_value(text: str, state: dict[str, Any]) -> Any:
    if not text:
        return None
    if not text.startswith("$"):
        return text
    path = text[1:].split(".")
    value = state.get(path[0])
    if value is None:
        return None
    for item in path[1:]:
        if not isinstance(value, dict):
            raise _QueryError(f"{'.'.join(path)}: not a dictionary")
        value = value.get(item)
        if value is None:
            return None
    return value


def _json_eval(query: list[Any], state: dict[str, Any]) -> Any:
    if not query:
        return True
    command = query[0]
    args = []
    for arg in query[1:]:
        if isinstance(arg, list):
            arg = _json_eval(arg, state)
        elif isinstance(arg, str):
            arg = _json_value(arg, state)
        if arg is not None:
            args.append(arg)
    if command == "not":
        return [not a for a in args]
    if command == "or":
        return any(args)
    if command == "and":
        return all(args)
    if len(args) < 2:
        return False
    if command == "in":
        return args[0] in args[1:]
    compare = _JSON_COMPARE[command]
    try:
        return all(compare(args[0], other) for other in args[1:])
    except TypeError as exc:
        raise _QueryError(str(exc)) from None


def parse_query(raw: str) -> list[Any] | None:
    field = "$.scheduler_hints.query"
    try:
        query = json.loads(raw)
    except ValueError as exc:
        raise InvalidRequest(f"query is not valid JSON: {exc}", field=field) from None
    if not query:
        return None
    if not isinstance(query, list):
        raise InvalidRequest("query must be a JSON list such as [\">=\", \"$free_capacity_gb\", 100]", field=field)
    stack = [query]
    while stack:
        node = stack.pop()
        if node and (not isinstance(node[0], str) or node[0] not in _JSON_COMMANDS):
            raise InvalidRequest(f"unknown query operator {node[0]!r}", field=field)
        stack.extend(a for a in node[1:] if isinstance(a, list))
    return query


@register
class JsonFilter(VolumeFilter):
    """The ``query`` hint, a JSON expression over the pool's PoolState attributes (``$free_capacity_gb``,
    ``$capabilities.key``), evaluated per pool without eval."""

    name = "JsonFilter"
    narrows = True
    per_pool = True

    def mask(self, table: PoolTable, req: Request, within: np.ndarray | None = None) -> np.ndarray | None:
        raw = req.spec.scheduler_hints.query
        if not raw:
            return None
        query = parse_query(raw)
        if query is None:
            return None
        n = table.n
        out = np.zeros(n, dtype=np.bool_)
        for row in np.flatnonzero(table.live[:n] if within is None else within):
            try:
                result = _json_eval(query, pool_state(table, int(row)))
            except _QueryError:
                continue  # Cinder raises (the request fails); the pool fails here
            out[row] = bool(any(result) if isinstance(result, list) else result)
        return out
