"""Gantt as nova-scheduler: the manager Nova's service framework runs in place of
``nova.scheduler.manager.SchedulerManager``, serving Nova 34's scheduler RPC API (4.0-4.5) over oslo.messaging.

``select_destinations`` translates the RequestSpec (``gantt.nova.translate``), lets Gantt's replica decide and
claim (one compare-and-set in Gantt's store, which every manager sharing ``[gantt] store`` sees: several schedulers
never double-book), and answers Nova's Selections. Nova's HostManager, filters, weighers and Placement's allocation
candidates are never called. What Gantt cannot honour is a NoValidHost saying why, never a field dropped.

Host state comes from the cell databases (``gantt.nova.cells``), aggregates from the API database at start and then
from the ``update_aggregates`` / ``delete_aggregate`` fanout, instance lists from the instance-info casts.

Use: ``nova.service.SERVICE_MANAGERS['nova-scheduler'] = 'gantt.nova.manager.SchedulerManager'`` in process, or
``gantt nova-scheduler --config-file /etc/nova/nova.conf`` (``gantt.nova.cmd``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar, cast

import nova.conf
import oslo_messaging as messaging
from nova import context as nova_context
from nova import exception, manager, objects
from nova.compute import vm_states
from nova.scheduler import utils as scheduler_utils

from gantt.compute.pci import take
from gantt.model import GanttError, NotFound, Selection
from gantt.model import NoValidHost as GanttNoValidHost
from gantt.nova import cells, conf, confirm, instances, prefilters, refusal, translate
from gantt.replication.replica import Replica

CONF = nova.conf.CONF
log = logging.getLogger(__name__)
# How long a stopping service waits for a cell read in flight (each cell's read has its own, shorter timeout).
READER_STOP_TIMEOUT = 30.0

_sentinel = object()
# A migration's states while the conductor asks for its destination: the conductor's own record of a cold move
# (pre-migrating), and the API's of a live migration or evacuation (accepted, queued); preparing just after.
MOVING = ("pre-migrating", "accepted", "queued", "preparing")

_F = TypeVar("_F", bound=Callable[..., Any])


class _Move(NamedTuple):
    """The migration a move is made under, and whether it is an evacuation's (the source host is down: Nova
    books the destination beside the source in the instance's own allocation, and the migration holds nothing)."""

    uuid: str
    evacuation: bool


def _expected(*exceptions: type[Exception]) -> Callable[[_F], _F]:
    """oslo.messaging's ``expected_exceptions``, typed (oslo is untyped to mypy): the method raises ``exceptions``
    to its caller without the server logging them as its own failure, and is called as it was."""
    return cast(Callable[[_F], _F], messaging.expected_exceptions(*exceptions))


class SchedulerManager(manager.Manager):  # type: ignore[misc]  # nova is untyped: its Manager is Any to mypy
    """Nova's scheduler manager, deciding with Gantt. Built with no arguments by ``nova.service.Service.create``;
    reads ``nova.conf.CONF`` (its ``[gantt]`` section, and Nova's scheduler options Gantt implements)."""

    target = messaging.Target(version="4.5")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        conf.register(CONF)
        objects.register_all()
        # read (and refused if wrong) here, at construction; the store is opened by the process that serves
        # (init_host): a launcher may fork after building the manager, and threads and connections do not survive it
        self.gantt_config = conf.gantt_config(CONF)
        self._options = conf.RequestOptions(CONF)  # the options Nova reads at each request, followed from here on
        self.store_url = conf.store_url(CONF)
        self._replica: Replica | None = None
        self._reader: cells.CellReader | None = None
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        self._started = False
        self._closed = False
        self._start_lock = threading.Lock()
        super().__init__(*args, service_name="scheduler", **kwargs)
        log.info("Gantt scheduler manager on store %s", self.store_url)

    # ------------------------------------------------------------------------------------------ lifecycle

    @property
    def replica(self) -> Replica:
        if self._replica is None:
            with self._start_lock:
                if self._replica is None:
                    self._replica = Replica.open(self.store_url, self.gantt_config)
                    self._reader = cells.CellReader(self._replica)
        return self._replica

    @property
    def reader(self) -> cells.CellReader:
        self.replica  # noqa: B018 - opens the store and makes the reader
        assert self._reader is not None
        return self._reader

    def init_host(self, service_ref: Any = None) -> None:
        try:
            self._ensure_started()
        except Exception:  # Nova's databases not reachable yet: serve anyway, as nova-scheduler does, and retry
            log.exception("reading Nova's databases at start failed; retried by the periodic read and by each "
                          "request (answered NoValidHost until then)")

    def post_start_hook(self) -> None:
        if self._poller is None:
            self._poller = threading.Thread(target=self._poll, name="gantt-nova-cells", daemon=True)
            self._poller.start()

    def set_shutdown_in_progress(self) -> None:
        """Service.stop's first call, made in the stopping thread: the cell reader stops here, before the stop
        goes on. graceful_shutdown runs in a thread of its own that the stop waits for only
        ``manager_shutdown_timeout`` seconds (0 in Nova's tests), and a reader still running after the stop reads
        the cells through Nova's scatter-gather pool again, re-creating a pool the stop has shut down."""
        super().set_shutdown_in_progress()
        self._stop_reader(READER_STOP_TIMEOUT)

    def graceful_shutdown(self, timeout: float) -> None:
        """In-progress RPC tasks may finish (some seconds kept for the rest, as Nova's scheduler keeps), then the
        store is closed. Nova's thread pools are left to the process's exit: Nova's scheduler shuts them down here,
        but this runs in a thread the stop may have stopped waiting for (``manager_shutdown_timeout``), and a
        shutdown after the stop returned marks the process's pool factory shut for good (in Nova's tests, for every
        later test of the worker); the pools' threads do not hold the process."""
        reserved = min(20.0, timeout)
        self._wait_for_in_progress_tasks(max(0.0, timeout - reserved))
        self._stop_reader(reserved)  # stopped already when Service.stop called us
        self._close()

    def cleanup_host(self) -> None:
        self._stop_reader(READER_STOP_TIMEOUT)
        self._close()

    def _stop_reader(self, timeout: float) -> None:
        self._stop.set()
        poller = self._poller
        if poller is not None and poller is not threading.current_thread() and poller.is_alive():
            poller.join(timeout=timeout)  # a read in flight ends within its cells' own timeouts
            if poller.is_alive():
                log.warning("the cell reader did not stop within %.0f s", timeout)

    def _close(self) -> None:
        if self._replica is not None and not self._closed:  # graceful_shutdown, then cleanup_host in a launcher
            self._closed = True
            self._replica.close()

    def _ensure_started(self) -> None:
        """Aggregates from the API database, then a first read of every cell: once, before the first decision."""
        if self._started:
            return
        reader = self.reader
        with self._start_lock:
            if self._started:
                return
            context = nova_context.get_admin_context()
            self._load_aggregates(context)
            reader.refresh(context)
            self._seed_instance_info(context)
            self._started = True

    def _load_aggregates(self, context: Any) -> None:
        nova_aggs = cells.load_aggregates(context)
        keep = {str(a["id"]) for a in nova_aggs}
        for agg in nova_aggs:
            self.replica.update_aggregate(agg)
        for held in self.replica.aggregates():
            if held.key not in keep:  # deleted while no scheduler listened to the fanout
                self.replica.delete_aggregate(held.key)
        log.info("loaded %d aggregate(s) from Nova's API database", len(nova_aggs))

    def _seed_instance_info(self, context: Any) -> None:
        try:
            seeded = instances.seed_instance_info(self.reader, context)
        except Exception:  # the lists then wait for the computes' sync_instance_info, as before
            log.exception("seeding the hosts' instance lists from the cells failed")
            return
        if seeded:
            log.info("instance lists of %d host(s) read from the cells' databases", seeded)

    def _poll(self) -> None:
        interval = self.gantt_config.gantt.cell_poll_interval
        while not self._stop.wait(interval):
            try:
                self._ensure_started()
                # the nodes changed since the last pass; every cells.FULL_READ_EVERY-th pass reads them all
                self.reader.poll(nova_context.get_admin_context())
            except Exception:  # the next pass tries again; nodes not heartbeaten go down on their own
                log.exception("reading the cells' compute nodes failed")

    def reset(self) -> None:
        """SIGHUP: read the cell mappings and every node again (Nova refreshes its cell caches): the periodic
        pass's safety net on demand."""
        self.reader.refresh(nova_context.get_admin_context())

    # ------------------------------------------------------------------------------------ select_destinations

    @_expected(exception.NoValidHost)
    def select_destinations(self, context: Any, request_spec: Any = None, filter_properties: Any = None,
                            spec_obj: Any = _sentinel, instance_uuids: Any = None, return_objects: bool = False,
                            return_alternates: bool = False) -> Any:
        """As Nova's: one list of Selections per instance (the claimed host, then alternates when
        ``return_objects`` and ``return_alternates``), or without ``return_objects`` the legacy host dicts."""
        if spec_obj is _sentinel:  # a 4.0-4.2 caller: the legacy dicts
            spec_obj = objects.RequestSpec.from_primitives(context, request_spec, filter_properties)
        instances = list(instance_uuids) if instance_uuids else None
        try:
            self._ensure_started()
            self.reader.refresh_if_changed(nova_context.get_admin_context())
        except Exception as exc:  # a cell or API database down: a clear refusal, never a hung conductor
            log.exception("select_destinations for %s: cannot read Nova's databases", instances)
            raise exception.NoValidHost(reason=f"Gantt cannot read Nova's databases: {exc}") from exc
        # the options Nova reads at each request ([pci] alias and max_attempts among them) into the Config: this
        # request reads them there, once
        try:
            if self._options.follow(self.gantt_config):
                self.replica.scheduler.engine.retune()
        except GanttError as exc:
            log.warning("select_destinations for %s refused: %s", instances, exc.message)
            raise exception.NoValidHost(reason=f"Gantt: {exc.message}") from exc
        cell_uuid = self._only_cell()
        cells = self._cell_hosts()
        # a rebuild's check (the instance's own host, the new image) claims nothing: never a move
        rebuild = scheduler_utils.request_is_rebuild(spec_obj)
        move = None if rebuild else self._migration_of(instances)
        try:
            spec = translate.request_spec(spec_obj, instances, cell_uuid=cell_uuid, cells=cells,
                                          migration_uuid=move.uuid if move else None,
                                          evacuation=move.evacuation if move else False,
                                          request_id=getattr(context, "request_id", None), ports_asked=True)
        except translate.Unsupported as exc:
            log.warning("select_destinations for %s refused: %s", instances, exc)
            raise exception.NoValidHost(reason=str(exc)) from exc
        # Nova gathers no alternates it does not return. It fills each instance's alternates from the chosen host's
        # cell, walking on down the weighed list; the seam keeps only that cell's, so the core gathers a cell's worth
        max_attempts = self.gantt_config.scheduler.max_attempts
        wanted = max(max_attempts - 1, 0) if return_objects and return_alternates else 0
        spec["alternates"] = wanted * max(len(cells), 1)
        placed = self.replica.providers.placed_roots
        if placed:  # providers made through Placement that no cell has a compute node for: no host Nova has
            spec["ignore_hosts"] = [*(spec.get("ignore_hosts") or []), *sorted(placed)]
        if not rebuild:  # as Nova's: a rebuild's check runs no request filter
            self._request_filters(context, spec_obj, spec, instances)
        try:
            answer = self.replica.select_destinations(spec)
        except GanttNoValidHost as exc:
            log.info("select_destinations for %s: no valid host: %s", instances, exc.message)
            # Nova's words for its users; Gantt's explanation, chained, reaches the fault's admin-only details
            raise exception.NoValidHost(reason=refusal.reason(self.replica, spec, exc, rebuild=rebuild)) from exc
        except GanttError as exc:  # a request Gantt refuses (bad input), or a store that failed
            log.error("select_destinations for %s failed in Gantt: %s", instances, exc.message)
            raise exception.NoValidHost(reason=f"Gantt: {exc.message}") from exc
        host_cells = self.reader.host_cells()
        try:
            return translate.selections(
                answer, return_objects=return_objects, return_alternates=return_alternates,
                max_attempts=max_attempts,
                cell_uuid={s.host: host_cells.get(s.host, cell_uuid or "") for c in answer for s in c},
                groups=translate.request_groups(spec), claimed=not rebuild,
                placement=self._pci_placement(spec_obj, answer))
        except ValueError as exc:
            # booked, but not answerable (a node without a compute node uuid): give the claims back, refuse
            for choices in answer:
                if choices and choices[0].consumer_uuid:
                    self.replica.release(choices[0].consumer_uuid)
            log.error("select_destinations for %s: Gantt's answer cannot be given to Nova: %s", instances, exc)
            raise exception.NoValidHost(reason=f"Gantt: {exc}") from exc

    def _pci_placement(self, spec_obj: objects.RequestSpec, answer: list[list[Selection]]
                       ) -> dict[Any, tuple[dict[str, Any], dict[str, list[str]]]]:
        """pci_in_placement: what each claim holds on its PCI devices' providers (by consumer), and what each
        alternate would (by node: the devices its pools would give now), with the flavor's PCI groups mapped to
        them, for the allocation requests (Nova's conductor claims an alternate's, and maps the groups of both)."""
        out: dict[Any, tuple[dict[str, Any], dict[str, list[str]]]] = {}
        groups = translate.pci_groups(spec_obj)
        if not groups:
            return out
        requests, table = translate.alias_requests(spec_obj), self.replica.table
        for choices in answer:
            consumer = choices[0].consumer_uuid if choices else None
            if consumer and (held := table.allocation(consumer)) is not None and held.extra:
                out[consumer] = translate.pci_placement([(t.pool, t.count) for t in held.pci], requests, groups)
            for alt in choices[1:]:
                row = table.row_of((alt.host, alt.nodename))
                taken = take(table.node_pci_pools(row), requests, rooms=table.pci_rooms(row)) \
                    if row is not None else None
                if taken:
                    out[(alt.host, alt.nodename)] = translate.pci_placement(taken, requests, groups)
        return out

    def _request_filters(self, context: Any, spec_obj: Any, spec: dict[str, Any], instances: Any) -> None:
        """Nova's request filters that ask Neutron and the cells (``gantt.nova.prefilters``); a failure to ask is a
        NoValidHost saying so."""
        try:
            prefilters.apply(context, spec_obj, spec)
        except prefilters.Unanswered as exc:
            log.warning("select_destinations for %s refused: %s", instances, exc)
            raise exception.NoValidHost(reason=f"Gantt: {exc}") from exc
        except Exception as exc:  # the cells' services tables could not be read
            log.exception("select_destinations for %s: cannot read Nova's databases", instances)
            raise exception.NoValidHost(reason=f"Gantt cannot read Nova's databases: {exc}") from exc

    def _migration_of(self, instances: list[str] | None) -> _Move | None:
        """The migration a move is made under, for an instance that already holds a Gantt allocation: the
        conductor (nova-api, for an evacuation) made it in the instance's cell before asking, and the RequestSpec
        does not name it. Without one the request repeats a boot, which Gantt answers with the allocation it made
        (never a second one)."""
        if not instances or len(instances) != 1:
            return None
        uuid = instances[0]
        try:
            self.replica.allocation(uuid)
        except NotFound:
            return None
        context = nova_context.get_admin_context()
        try:
            mapping = objects.InstanceMapping.get_by_instance_uuid(context, uuid)
        except exception.InstanceMappingNotFound:
            return None
        if mapping.cell_mapping is None:
            return None
        with nova_context.target_cell(context, mapping.cell_mapping) as cctxt:
            moving = objects.MigrationList.get_by_filters(cctxt, {"instance_uuid": uuid, "status": list(MOVING)})
        if not moving:
            return None
        latest = max(moving, key=lambda m: (m.created_at is not None, m.created_at, m.id))
        kind = latest.migration_type if latest.obj_attr_is_set("migration_type") else None
        log.info("select_destinations for %s: a move (%s, migration %s)", uuid, kind or "?", latest.uuid)
        return _Move(str(latest.uuid), kind == "evacuation")

    def _cell_hosts(self) -> dict[str, set[str]]:
        """Each cell's hosts, as last read: a requested destination's cell keeps only its own as candidates."""
        return {uuid: {key[0] for key in cell.nodes} for uuid, cell in self.reader.cells.items()}

    def _only_cell(self) -> str | None:
        """The cell a requested destination may name: the one cell when there is exactly one."""
        uuids = list(self.reader.cells)
        return uuids[0] if len(uuids) == 1 else None

    # ------------------------------------------------------------------------------------ fanout casts

    def update_aggregates(self, ctxt: Any, aggregates: Any) -> None:
        many = aggregates if isinstance(aggregates, list | objects.AggregateList) else [aggregates]
        for agg in many:
            self.replica.update_aggregate(cells.aggregate_of(agg))

    def delete_aggregate(self, ctxt: Any, aggregate: Any) -> None:
        try:
            self.replica.delete_aggregate(str(aggregate.id))
        except NotFound:
            log.debug("aggregate %s deleted in Nova was not in Gantt", aggregate.id)

    def update_instance_info(self, context: Any, host_name: str, instance_info: Any) -> None:
        many = instance_info.objects if isinstance(instance_info, objects.InstanceList) else [instance_info]
        uuids = [str(i.uuid) for i in many]
        self._instances(self.replica.update_instance_info, host_name, uuids)
        try:  # the compute has applied these claims to its node's row: a read from now on shows them
            confirm.confirm_listed(self.reader, nova_context.get_admin_context(), host_name, uuids)
        except Exception:  # the claims stay counted on top of the row (safe) until claim_timeout
            log.exception("instance info from %s: its claims could not be confirmed", host_name)

    def delete_instance_info(self, context: Any, host_name: str, instance_uuid: str) -> None:
        """The instance left the host (deleted, shelved, or the source of a finished move). Its Gantt claim on that
        host goes too: Nova drops its allocation in Placement then, which Gantt's store does not see yet. A claim
        on another host (the instance moved) stays."""
        uuid = str(instance_uuid)
        try:
            self.replica.delete_instance_info(host_name, uuid)
        except NotFound as exc:
            log.debug("delete_instance_info(%s, %s): %s", host_name, uuid, exc.message)
        try:
            held = self.replica.allocation(uuid)
        except NotFound:
            return
        if held.host == host_name and not self._lives_on(uuid, host_name):
            try:
                self.replica.release(uuid)
            except GanttError as exc:  # released meanwhile (another scheduler got the same cast)
                log.debug("releasing %s on %s: %s", uuid, host_name, exc.message)

    def _lives_on(self, uuid: str, host: str) -> bool:
        """Whether the instance's cell still has it on ``host``, undeleted and not offloaded: then the cast is a
        same-host resize's confirm (Nova casts from the source, which is the destination too) and its new claim
        stays. Deleted or offloaded, Nova has dropped its Placement allocation already."""
        context = nova_context.get_admin_context()
        try:
            mapping = objects.InstanceMapping.get_by_instance_uuid(context, uuid)
            if mapping.cell_mapping is None:
                return False
            with nova_context.target_cell(context, mapping.cell_mapping) as cctxt:
                instance = objects.Instance.get_by_uuid(cctxt, uuid, expected_attrs=[])
        except (exception.InstanceMappingNotFound, exception.InstanceNotFound):
            return False
        return bool(instance.host == host and instance.vm_state != vm_states.SHELVED_OFFLOADED)

    def sync_instance_info(self, context: Any, host_name: str, instance_uuids: list[str]) -> None:
        self._instances(self.replica.sync_instance_info, host_name, [str(u) for u in instance_uuids])

    def _instances(self, write: Any, host: str, uuids: list[str]) -> None:
        try:
            write(host, uuids)
        except NotFound:
            # A compute that starts casts before the reader saw its node: read now and try once more.
            self.reader.refresh(nova_context.get_admin_context())
            try:
                write(host, uuids)
            except NotFound:
                log.info("instance info from host %s, which has no compute node Gantt knows: not kept", host)
