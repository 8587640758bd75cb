"""Compute nodes read from every cell's database, as Gantt host reports: host state without touching nova-compute.

Nova's HostManager reads every compute node and service of every cell on each request. Gantt reads them once per
``[gantt] cell_poll_interval`` (and before a decision when a cheap check sees a change), turns each node into the
host report of Gantt's data contract (the fields Nova's filters read, by Nova's names), and writes only the nodes
whose report differs from the last one written; the others are heartbeats (Gantt's liveness: a node nobody has
reported for ``service_down_time`` is down, so a reader that stops makes the cloud unschedulable instead of stale).

The periodic pass is incremental (``CellReader.poll``): per cell, one cheap query for the nodes whose ``updated_at``
is within ``OVERLAP`` of the latest one seen (uuid and time only), and the services' few columns (their heartbeat
moves every report_interval, and Nova's "is up" verdict is time's, so it is judged again on every pass). Only the
nodes whose row moved, or whose service's state (disabled, reason, up) changed, are read and decoded; the others
of every cell that answered are heartbeaten from the reports the reader holds, one liveness batch for all (each by
a token while its record holds, ``gantt.nova.heartbeats``: no merge or comparison per node). A node
created or deleted, a service created or deleted, a cell come or gone, or more changes than a full read costs,
take the full read; so do every ``FULL_READ_EVERY``-th pass and ``reset`` (SIGHUP), as a safety net for a change no
query above can see (a row rewritten with its old ``updated_at``).

Liveness, as Nova judges it: a node is a candidate when its nova-compute service is up by Nova's servicegroup
driver (``service_is_up``: recent ``last_seen_up`` and not forced down) and not disabled. Gantt's report carries the
service as ``service {disabled, disabled_reason, forced_down}``; ``forced_down`` there is Nova's verdict "not up"
(a forced-down service, or one whose heartbeats stopped), which ComputeFilter reads as Nova's does.

A cell that does not answer keeps its nodes as they were, unheartbeaten: they go down in Gantt after
``service_down_time``, as Nova's HostManager leaves an unreachable cell's hosts out. A node that disappears from
its cell (deleted) is deleted from Gantt, its allocations with it.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, TypeVar, cast

import sqlalchemy as sa
from nova import context as nova_context
from nova import exception, objects, servicegroup
from nova.db.main import api as main_db
from nova.db.main import models
from oslo_utils import timeutils

from gantt.model import GanttError, HostReport, HostStats, decode
from gantt.nova.heartbeats import Heartbeats

log = logging.getLogger(__name__)
_F = TypeVar("_F", bound=Callable[..., Any])


def reads_cell(fn: _F) -> _F:
    """Nova's ``pick_context_manager_reader``, typed (nova is untyped to mypy): ``fn`` runs in a reader session of
    its context's cell database, called as it was."""
    return cast(_F, main_db.pick_context_manager_reader(fn))

NodeKey = tuple[str, str]
CHECK_TIMEOUT = 5.0  # seconds the cheap check waits for a cell before deciding without it
# Nodes updated since the last read are read one by one up to this many (or a tenth of the cell); more, and the
# whole cell is read, which costs about as much
INCREMENTAL_MIN = 100
# The periodic pass reads the nodes whose updated_at is at most this older than the latest it has seen, and
# re-reads those whose time differs from the one it read: a writer's clock behind another's, or a transaction
# committed after a later one, lands a row behind the latest time and is still seen
OVERLAP = datetime.timedelta(seconds=60)
# A node whose updated_at is within this of the time a pass began is read again by the next pass even if its time
# did not move: MySQL keeps whole seconds, so an update in the same second as the one read carries the same time
TIE = datetime.timedelta(seconds=1)
# Every this many periodic passes read every node again (5 minutes at the default 10 s): the safety net
FULL_READ_EVERY = 30


@dataclass
class CellView:
    """What the reader last took from one cell."""

    uuid: str
    name: str
    signature: tuple[Any, ...] | None = None
    nodes: dict[NodeKey, HostReport] = field(default_factory=dict)
    uuids: dict[str, NodeKey] = field(default_factory=dict)  # each node's key by its uuid
    stamps: dict[str, datetime.datetime] = field(default_factory=dict)  # each node's row time as last read
    services: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # each host's ``_service_state``
    watermark: datetime.datetime | None = None  # the latest row time read
    ties_from: datetime.datetime | None = None  # rows of this time or later may change again with the same time

    def took(self, report: HostReport, stamp: datetime.datetime | None) -> None:
        key = (report.host, report.nodename)
        self.nodes[key] = report
        if report.stats.uuid:
            self.uuids[report.stats.uuid] = key
            if stamp is not None:
                self.stamps[report.stats.uuid] = stamp
                self.watermark = stamp if self.watermark is None else max(self.watermark, stamp)


def report_of(node: Any, service: Any | None, up: bool) -> HostReport | None:
    """The host report of one ``objects.ComputeNode`` and its nova-compute ``objects.Service`` (None: no service
    row, which Nova's HostManager also skips). None for a node nova-compute has not filled in yet (Nova skips it:
    "has not been updated yet")."""
    if service is None or any(_v(node, name) is None for name in ("vcpus", "memory_mb", "local_gb")):
        return None
    stats: dict[str, Any] = {}
    for name in ("uuid", "vcpus", "vcpus_used", "memory_mb", "memory_mb_used", "local_gb", "local_gb_used",
                 "disk_available_least", "cpu_allocation_ratio", "ram_allocation_ratio", "disk_allocation_ratio",
                 "hypervisor_type", "hypervisor_version", "hypervisor_hostname", "running_vms", "current_workload"):
        if (value := _v(node, name)) is not None:
            stats[name] = str(value) if name == "uuid" else value
    if (ip := _v(node, "host_ip")) is not None:
        stats["host_ip"] = str(ip)
    if (cpu_info := _v(node, "cpu_info")) is not None:
        stats["cpu_info"] = cpu_info  # the JSON text the compute stored
    specs = _v(node, "supported_hv_specs") or []
    stats["supported_instances"] = [spec.to_list() for spec in specs]
    node_stats = dict(_v(node, "stats") or {})
    stats["stats"] = node_stats
    # HostState reads these three from the stats dict, not from columns
    stats["num_instances"] = int(node_stats.get("num_instances", 0))
    stats["num_io_ops"] = int(node_stats.get("io_workload", 0))
    stats["failed_builds"] = int(node_stats.get("failed_builds", 0))
    if metrics := _v(node, "metrics"):
        stats["metrics"] = [{k: m[k] for k in ("name", "value", "source", "timestamp") if k in m}
                            for m in json.loads(metrics)]
    if numa := _v(node, "numa_topology"):
        stats["numa_topology"] = numa  # the NUMATopology primitive's JSON text
    pools = _v(node, "pci_device_pools")
    if pools is not None:
        stats["pci_stats"] = pools.obj_to_primitive()
    stats["service"] = {"disabled": bool(service.disabled), "forced_down": not up}
    if service.disabled and service.disabled_reason:
        stats["service"]["disabled_reason"] = service.disabled_reason
    return HostReport(host=node.host, node=node.hypervisor_hostname, stats=decode(stats, HostStats))


def _v(obj: Any, name: str) -> Any:
    return getattr(obj, name) if obj.obj_attr_is_set(name) else None


@reads_cell
def _signature(context: Any) -> tuple[Any, ...]:
    """What changes when a compute node or a service's state does, in one cheap query per cell: counts and the
    latest times (a node created, updated or deleted), and the services' disabled and forced-down sets (as sums of
    their ids). A service's heartbeat is left out: it moves every report_interval, and liveness is time's, read by
    the periodic pass."""
    # SQLAlchemy's expressions, not SQL text: the cells' databases are MySQL or PostgreSQL in production
    node, service = models.ComputeNode, models.Service
    nodes = context.session.execute(sa.select(
        sa.func.count(), sa.func.max(node.created_at), sa.func.max(node.updated_at),
        sa.func.max(node.deleted_at))).one()
    services = context.session.execute(sa.select(
        sa.func.count(), sa.func.max(service.created_at),
        sa.func.sum(sa.case((service.disabled == sa.true(), service.id), else_=0)),
        sa.func.sum(sa.case((service.forced_down == sa.true(), service.id), else_=0)))
        .where(service.deleted == 0, service.binary == "nova-compute")).one()
    return (*tuple(nodes), *tuple(services))


def _updates_only(old: tuple[Any, ...] | None, new: tuple[Any, ...]) -> bool:
    """Whether two signatures differ only by nodes updated in place (the latest ``updated_at``, index 2): no node
    created or deleted, no service changed. That is what nova-compute's resource tracker does after each claim."""
    return old is not None and old[:2] == new[:2] and old[3:] == new[3:]


@reads_cell
def _updated_since(context: Any, since: Any) -> list[str]:
    node = models.ComputeNode
    # ``>=``: MySQL keeps whole seconds, so a node updated in the same second as the last one read is read again
    changed = node.updated_at.isnot(None) if since is None else node.updated_at >= since
    return [row[0] for row in context.session.execute(sa.select(node.uuid).where(node.deleted == 0, changed))]


def _read_updated(context: Any, since: Any, limit: int) -> tuple[list[Any], list[Any]] | None:
    """The nodes updated since ``since`` and their services; None when more than ``limit`` were."""
    uuids = _updated_since(context, since)
    if len(uuids) > limit:
        return None
    nodes = list(objects.ComputeNodeList.get_all_by_uuids(context, uuids)) if uuids else []
    services = []
    for host in {node.host for node in nodes}:
        # a node without its service makes no report: the full read then skips it, as Nova does
        with contextlib.suppress(exception.ComputeHostNotFound):
            services.append(objects.Service.get_by_compute_host(context, host))
    return nodes, services


def _naive(stamp: datetime.datetime | None) -> datetime.datetime | None:
    """A row time without its zone: Nova's objects carry UTC, the database's rows none (both are UTC)."""
    return None if stamp is None else stamp.replace(tzinfo=None)


def _now() -> datetime.datetime:
    now: datetime.datetime = timeutils.utcnow()
    return now.replace(tzinfo=None)


def _stamp(node: Any) -> datetime.datetime | None:
    return _naive(_v(node, "updated_at") or _v(node, "created_at"))


def _service_state(disabled: Any, reason: Any, up: bool) -> tuple[Any, ...]:
    """What a node's report takes from its service (``report_of``): equal states make equal reports."""
    return bool(disabled), reason if disabled and reason else None, up


# The services' columns the periodic pass reads: its state and what Nova's servicegroup judges "is up" by
_SERVICE_COLUMNS = ("host", "binary", "topic", "disabled", "disabled_reason", "forced_down", "last_seen_up",
                    "created_at", "updated_at")


@reads_cell
def _poll_cell(context: Any, since: dict[str, datetime.datetime | None]) -> tuple[Any, ...]:
    """One cell's share of a periodic pass: its signature, the (uuid, time) of its nodes whose row time is not
    older than ``since`` (by cell; None: every node), and every nova-compute service's few columns. Tuples, never
    Nova's objects: decoding 1,000 of those is what the pass avoids."""
    node, service = models.ComputeNode, models.Service
    signature = _signature(context)
    start = since.get(context.cell_uuid)
    query = sa.select(node.uuid, node.updated_at, node.created_at).where(node.deleted == 0)
    if start is not None:
        query = query.where(sa.or_(node.updated_at >= start,
                                   sa.and_(node.updated_at.is_(None), node.created_at >= start)))
    rows = [(row[0], _naive(row[1] or row[2])) for row in context.session.execute(query)]
    services = [SimpleNamespace(**dict(zip(_SERVICE_COLUMNS, row, strict=True))) for row in context.session.execute(
        sa.select(*(getattr(service, c) for c in _SERVICE_COLUMNS))
        .where(service.deleted == 0, service.binary == "nova-compute"))]
    return signature, rows, services


@reads_cell
def _read_nodes(context: Any, uuids: dict[str, list[str]]) -> list[Any]:
    wanted = uuids.get(context.cell_uuid) or []
    return list(objects.ComputeNodeList.get_all_by_uuids(context, wanted)) if wanted else []


def _structural(old: tuple[Any, ...] | None, new: tuple[Any, ...]) -> bool:
    """Whether a node or a service was created or deleted between two signatures (not only updated): the
    periodic pass then reads the cell in full."""
    return old is None or old[:2] != new[:2] or old[3:6] != new[3:6]


def _read_cell(context: Any) -> tuple[tuple[Any, ...], list[Any], list[Any]]:
    # the signature first: a change landing between it and the lists is seen again by the next check
    signature = _signature(context)
    nodes = list(objects.ComputeNodeList.get_all(context))
    services = list(objects.ServiceList.get_by_binary(context, "nova-compute", include_disabled=True))
    return signature, nodes, services


class CellReader:
    """Reads every cell's compute nodes into a replica. ``replica``: a ``gantt`` Replica (its ``report_many``,
    ``heartbeat``, ``flush_liveness``, ``delete_host``). Thread-safe: one read at a time."""

    def __init__(self, replica: Any, *, timeout: float = nova_context.CELL_TIMEOUT,
                 on_cells: Callable[[dict[str, CellView]], None] | None = None) -> None:
        self.replica = replica
        self.timeout = timeout
        self.cells: dict[str, CellView] = {}
        self.servicegroup = servicegroup.API()
        self._lock = threading.Lock()
        self.reads = 0  # full reads done
        self.partial_reads = 0  # reads of the nodes updated since the last read
        self.passes = 0  # periodic passes (``poll``), incremental or full
        self.nodes_read = 0  # node rows read and decoded, by every kind of read
        self.heartbeats = 0  # nodes heartbeaten without a write of their report
        self.slow_heartbeats = 0  # of which taken the long way (no token yet, or it no longer held)
        self._beats = Heartbeats()
        self.full_every = FULL_READ_EVERY
        self.written = 0  # node reports written (changed)
        self.deleted = 0
        self._on_cells = on_cells
        self._began = _now()  # when the running periodic pass began

    def cell_of(self, host: str) -> str | None:
        for cell in self.cells.values():
            if any(key[0] == host for key in cell.nodes):
                return cell.uuid
        return None

    def host_cells(self) -> dict[str, str]:
        return {key[0]: cell.uuid for cell in self.cells.values() for key in cell.nodes}

    def mappings(self, context: Any) -> list[Any]:
        """The enabled cells Nova maps (cell0, which holds no hosts, left out)."""
        return [cm for cm in objects.CellMappingList.get_all(context)
                if not cm.is_cell0() and not cm.disabled]

    def changed(self, context: Any) -> bool:
        """The cheap check: has any cell's signature moved since the last read (or a cell come or gone)?"""
        mappings = self.mappings(context)
        if {cm.uuid for cm in mappings} != set(self.cells):
            return True
        # short: it runs before every decision, and a cell that hangs must not hold each one for a full timeout
        results = nova_context.scatter_gather_cells(context, mappings, min(self.timeout, CHECK_TIMEOUT), _signature)
        for uuid, result in results.items():
            if nova_context.is_cell_failure_sentinel(result):
                continue  # the periodic read logs it; nothing to read from it now
            if tuple(result) != self.cells[uuid].signature:
                return True
        return False

    def refresh_if_changed(self, context: Any) -> int:
        """Before a decision: nothing when no cell's signature moved; the nodes updated since the last read when
        that is all that happened (nova-compute's usage after a claim: one row, not the whole cell); else a full
        read. Returns how many reports were written."""
        with self._lock:
            if not self.cells:
                return self._read(context)
            mappings = self.mappings(context)
            if {cm.uuid for cm in mappings} != set(self.cells):
                return self._read(context)
            results = nova_context.scatter_gather_cells(context, mappings, min(self.timeout, CHECK_TIMEOUT),
                                                        _signature)
            moved = {uuid: tuple(result) for uuid, result in results.items()
                     if not nova_context.is_cell_failure_sentinel(result)
                     and tuple(result) != self.cells[uuid].signature}
            if not moved:
                return 0
            if all(_updates_only(self.cells[uuid].signature, sig) for uuid, sig in moved.items()):
                written = self._read_updates(context, [cm for cm in mappings if cm.uuid in moved], moved)
                if written is not None:
                    return written
            return self._read(context)

    def _read_updates(self, context: Any, mappings: list[Any], moved: dict[str, tuple[Any, ...]]) -> int | None:
        """The nodes updated since each cell's last read, written when their report changed; None (nothing
        written) when a cell must be read in full instead: it did not answer, too many nodes changed, or a node is
        not one the last read kept."""
        results = {}
        for mapping in mappings:
            view = self.cells[mapping.uuid]
            limit = max(INCREMENTAL_MIN, len(view.nodes) // 10)
            got = nova_context.scatter_gather_cells(context, [mapping], self.timeout, _read_updated,
                                                    view.signature[2] if view.signature else None, limit)
            result = got.get(mapping.uuid)
            if result is None or nova_context.is_cell_failure_sentinel(result):
                return None
            results[mapping.uuid] = result
        changed: dict[str, dict[NodeKey, HostReport]] = {}
        for uuid, (nodes, services) in results.items():
            view, by_host = self.cells[uuid], {s.host: s for s in services}
            changed[uuid] = {}
            for node in nodes:
                service = by_host.get(node.host)
                try:
                    report = report_of(node, service, service is not None and self.servicegroup.service_is_up(service))
                except (GanttError, ValueError):
                    return None  # the full read logs it and leaves the node out
                if report is None or (report.host, report.nodename) not in view.nodes:
                    return None
                if view.nodes[(report.host, report.nodename)] != report:
                    changed[uuid][(report.host, report.nodename)] = report
                view.took(view.nodes[(report.host, report.nodename)], _stamp(node))
                self.nodes_read += 1
        reports = [report for fresh in changed.values() for report in fresh.values()]
        if reports:
            self.replica.report_many([_copy(r) for r in reports])
            self.written += len(reports)
        for uuid, fresh in changed.items():
            self.cells[uuid].nodes.update(fresh)
            self.cells[uuid].signature = moved[uuid]
        self.partial_reads += 1
        if self._on_cells is not None:
            self._on_cells(self.cells)
        return len(reports)

    def refresh(self, context: Any) -> int:
        """Read every cell; write the nodes whose report changed, heartbeat the others, delete the gone ones.
        Returns how many reports were written."""
        with self._lock:
            return self._read(context)

    def _read(self, context: Any) -> int:
        began = _now()
        mappings = self.mappings(context)
        results = nova_context.scatter_gather_cells(context, mappings, self.timeout, _read_cell)
        changed: list[HostReport] = []
        unchanged: list[HostReport] = []
        gone: list[NodeKey] = []
        views: dict[str, CellView] = {}
        for mapping in mappings:
            view = self.cells.get(mapping.uuid) or CellView(mapping.uuid, mapping.name or mapping.uuid)
            views[mapping.uuid] = view
            result = _answer(view, results)
            if result is None:
                continue
            signature, nodes, services = result
            by_host = {s.host: s for s in services}
            old, fresh = view.nodes, {}
            view.nodes, view.uuids, view.stamps, view.services, view.watermark = {}, {}, {}, {}, None
            self.nodes_read += len(nodes)
            for node in nodes:
                if (uuid := _v(node, "uuid")) is not None and (stamp := _stamp(node)) is not None:
                    # kept for a node left out too: the periodic pass reads it again only when its row moves
                    view.stamps[str(uuid)] = stamp
                service = by_host.get(node.host)
                up = service is not None and self.servicegroup.service_is_up(service)
                try:
                    report = report_of(node, service, up)
                except (GanttError, ValueError) as exc:
                    log.error("compute node %s/%s of cell %s cannot be read as a Gantt host report, left out: %s",
                              node.host, _v(node, "hypervisor_hostname"), view.name, exc)
                    continue
                if report is None or service is None:
                    continue
                key = (report.host, report.nodename)
                if old.get(key) == report:
                    report = old[key]  # the one held: the node's heartbeat token names it
                fresh[key] = report
                view.took(report, _stamp(node))
                view.services[node.host] = _service_state(service.disabled, service.disabled_reason, up)
                (unchanged if old.get(key) is report else changed).append(report)
            gone.extend(key for key in old if key not in fresh)
            view.signature = tuple(signature)
            view.ties_from = began - TIE
        # a cell whose mapping is gone (deleted) takes its nodes with it
        for uuid, view in self.cells.items():
            if uuid not in views:
                gone.extend(view.nodes)
        self.cells = views
        if changed:
            self.replica.report_many([_copy(r) for r in changed])
            self.written += len(changed)
        self._heartbeat(unchanged)
        for host, node in gone:
            self._beats.forget((host, node))
            try:
                self.replica.delete_host(host, node, force=True)
                self.deleted += 1
            except GanttError as exc:
                log.info("compute node %s/%s is gone from its cell; Gantt had no record to delete: %s",
                         host, node, exc)
        self.reads += 1
        if self._on_cells is not None:
            self._on_cells(views)
        return len(changed)


    def _heartbeat(self, reports: list[HostReport]) -> None:
        """The nodes whose report did not change are alive: their reports, as held, taken by the replica's liveness
        batch (written as touches, one batch for all), or written when the replica's record differs; by each
        node's token while its record holds (``gantt.nova.heartbeats``)."""
        self.slow_heartbeats += self._beats.beat(self.replica, reports)
        self.heartbeats += len(reports)

    def poll(self, context: Any) -> int:
        """The periodic pass: the nodes changed since the last pass read, the others heartbeaten; every
        ``full_every``-th pass, a new or gone cell, a node or service created or deleted, or too many changes
        take the full read. Returns how many reports were written."""
        with self._lock:
            self.passes += 1
            if not self.cells or self.passes % self.full_every == 0:
                return self._read(context)
            mappings = self.mappings(context)
            if {cm.uuid for cm in mappings} != set(self.cells):
                return self._read(context)
            since = {uuid: None if view.watermark is None else view.watermark - OVERLAP
                     for uuid, view in self.cells.items()}
            self._began = _now()
            results = nova_context.scatter_gather_cells(context, mappings, self.timeout, _poll_cell, since)
            plan = self._plan(mappings, results)
            if plan is None:
                return self._read(context)
            return self._apply(context, mappings, plan)

    def _plan(self, mappings: list[Any], results: dict[str, Any]) -> dict[str, tuple[Any, ...]] | None:
        """By cell that answered: (signature, services by host, their states, uuids to read); None when a cell
        must be read in full."""
        plan: dict[str, tuple[Any, ...]] = {}
        for mapping in mappings:
            view = self.cells[mapping.uuid]
            result = _answer(view, results)
            if result is None:
                continue
            signature, rows, services = result
            if _structural(view.signature, tuple(signature)):
                return None
            by_host = {s.host: s for s in services}
            states = {host: _service_state(s.disabled, s.disabled_reason,
                                           self.servicegroup.service_is_up(vars(s))) for host, s in by_host.items()}
            hosts = {host for host, state in states.items() if view.services.get(host) != state}
            if any(key[0] not in by_host for key in view.nodes):
                return None  # a node's service is gone: the full read drops the node, as Nova skips it
            tie = view.ties_from
            read = {uuid for uuid, stamp in rows
                    if stamp != view.stamps.get(uuid) or (tie is not None and stamp is not None and stamp >= tie)}
            read |= {uuid for uuid, key in view.uuids.items() if key[0] in hosts}
            if not read <= view.uuids.keys() or len(read) > max(INCREMENTAL_MIN, len(view.nodes) // 10):
                return None  # a node the last read did not keep (or did not decode), or a cell's worth of changes
            plan[mapping.uuid] = (tuple(signature), by_host, states, read)
        return plan

    def _apply(self, context: Any, mappings: list[Any], plan: dict[str, tuple[Any, ...]]) -> int:
        wanted = {uuid: sorted(step[3]) for uuid, step in plan.items() if step[3]}
        got: dict[str, Any] = {}
        if wanted:
            got = nova_context.scatter_gather_cells(context, [cm for cm in mappings if cm.uuid in wanted],
                                                    self.timeout, _read_nodes, wanted)
        changed: list[HostReport] = []
        unchanged: list[HostReport] = []
        for uuid, (signature, by_host, states, read) in plan.items():
            view, nodes = self.cells[uuid], got.get(uuid, [])
            if read and nova_context.is_cell_failure_sentinel(nodes):
                log.error("cell %s (%s) did not answer its nodes' read (%s): not heartbeaten", view.name, uuid,
                          nodes)
                continue
            fresh: dict[NodeKey, HostReport] = {}
            for node in nodes:
                service = by_host.get(node.host)
                try:
                    report = report_of(node, service, service is not None and states[node.host][2])
                except (GanttError, ValueError):
                    return self._read(context)  # the full read logs it and leaves the node out
                if report is None or view.uuids.get(_v(node, "uuid")) != (report.host, report.nodename):
                    return self._read(context)
                fresh[(report.host, report.nodename)] = report
                view.took(view.nodes[(report.host, report.nodename)], _stamp(node))
            self.nodes_read += len(nodes)
            for key, report in view.nodes.items():
                (changed if key in fresh and fresh[key] != report else unchanged).append(fresh.get(key, report))
            view.nodes.update(fresh)
            view.services = {host: states[host] for host in view.services if host in states}
            view.signature = signature
            view.ties_from = self._began - TIE
        if changed:
            self.replica.report_many([_copy(r) for r in changed])
            self.written += len(changed)
        self._heartbeat(unchanged)
        if self._on_cells is not None:
            self._on_cells(self.cells)
        return len(changed)


def _answer(view: CellView, results: dict[str, Any]) -> Any | None:
    """The cell's answer to a scatter-gather, or None (logged) when it did not answer: its nodes are left as they
    were, unheartbeaten, and go down in Gantt after service_down_time."""
    result = results.get(view.uuid, nova_context.did_not_respond_sentinel)
    if nova_context.is_cell_failure_sentinel(result):
        log.error("cell %s (%s) did not answer (%s): its %d node(s) are not heartbeaten and go down after "
                  "service_down_time", view.name, view.uuid,
                  "timeout" if result is nova_context.did_not_respond_sentinel else result, len(view.nodes))
        return None
    return result


def _copy(report: HostReport) -> HostReport:
    """A report to hand the replica, which stamps it: the reader keeps its own unstamped one to compare with."""
    return HostReport(host=report.host, node=report.node, stats=report.stats)


def load_aggregates(context: Any) -> list[dict[str, Any]]:
    """Every host aggregate of Nova's API database, as Gantt aggregates."""
    return [aggregate_of(agg) for agg in objects.AggregateList.get_all(context)]


def aggregate_of(aggregate: Any) -> dict[str, Any]:
    """A ``nova.objects.Aggregate`` as Gantt's Aggregate (builtins): Nova's id, uuid, name, hosts and metadata."""
    out: dict[str, Any] = {"id": int(aggregate.id)}
    for name in ("uuid", "name"):
        if aggregate.obj_attr_is_set(name) and getattr(aggregate, name) is not None:
            out[name] = str(getattr(aggregate, name))
    out["hosts"] = list(aggregate.hosts or []) if aggregate.obj_attr_is_set("hosts") else []
    metadata = dict(aggregate.metadata or {}) if aggregate.obj_attr_is_set("metadata") else {}
    out["metadata"] = {str(k): str(v) for k, v in metadata.items()}
    return out

