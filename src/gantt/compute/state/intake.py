"""Report intake: how host reports, touches and heartbeats land in the table's columns, the instance index and
the ledger (a report lists instances, confirms claims, settles or expires them), one by one or in bulk."""

from __future__ import annotations

import gc
import operator
import threading
from collections.abc import Callable, Container, Iterable
from typing import Any

import numpy as np

from gantt.compute.state.aggregates import AggregateIndex
from gantt.compute.state.changes import Changes
from gantt.compute.state.columns import Columns
from gantt.compute.state.instances import InstanceIndex
from gantt.compute.state.ledger import Ledger
from gantt.compute.state.reports import apply_new_rows, apply_stats, simple_for_new_row
from gantt.model import HostReport, NodeKey

# From this many rows, figures computed again for the rows together (numpy over an index array) cost less than
# row by row: one such pass costs about what a few rows do one at a time.
VECTOR_ROWS = 8
_KEY = operator.attrgetter("host", "nodename")  # a report's node key, (host, nodename)


class Intake:
    """Writes reports into the table's parts (``HostTable.update``, ``load``, ``touch_many``, ``heartbeat``)."""

    def __init__(self, *, lock: threading.RLock, clock: Callable[[], float], columns: Columns,
                 aggregates: AggregateIndex, instances: InstanceIndex, ledger: Ledger, changes: Changes,
                 default_ratios: dict[str, float], disabled_reasons: dict[NodeKey, str]) -> None:
        self._lock = lock
        self._clock = clock
        self._columns = columns
        self._aggregates = aggregates
        self._instances = instances
        self._ledger = ledger
        self._changes = changes
        self._default_ratios = default_ratios
        # Why an operator disabled a node (Nova's service.disabled_reason), shared with the table that shows it
        self._disabled_reasons = disabled_reasons

    def update(self, report: HostReport, *, now: float | None = None, whole: bool = False,
               observed: bool = False) -> int:
        """Apply one host report (a full replacement of what it names). Returns the node's row.

        ``whole``: the report is the node's whole stored record (from a store), so inventories it lacks are gone.
        The node's report time (``updated_at``) becomes ``now``; without it, the report's ``reported_at`` or,
        ``observed`` (a replica applying its store's feed), this table's clock: the stamp is another server's
        wall clock, which may be behind or ahead of ours, or have stepped since. Either way a record that carries
        the stamp the node holds already is no new report (an operator's change, a Placement write, rewriting
        the node's last report): its time stays."""
        with self._lock:
            columns = self._columns
            key = (report.host, report.nodename)
            row = columns.row_of.get(key)
            stamp = report.reported_at
            if now is None:
                if row is not None and stamp is not None and stamp == columns.cols["reported_at"].item(row):
                    now = columns.cols["updated_at"].item(row)
                elif observed or stamp is None:
                    now = self._clock()
                else:
                    now = stamp
            static = False
            if row is None:
                row = self._add_row(report.host, report.nodename)
                static = True
            columns.cols["reported_at"][row] = np.nan if stamp is None else stamp
            return self._apply_report(report, row, key, now, static=static, whole=whole)

    def load(self, reports: Iterable[HostReport], *, now: float | None = None, whole: bool = False) -> None:
        """``update`` with each of ``reports`` in turn, leaving the table as those updates would; a cold start's
        path. The reports of nodes the table does not hold yet are written column by column, in bulk (a
        million per-report updates cost ~30 s of Python); the others (and every report while a listener watches
        the table, which must see each change) go through ``update``.

        Two differences: a report without ``reported_at`` (and no ``now``) is stamped with one clock reading for
        the whole batch rather than one each; and without ``now`` no node's report time is later than that
        reading (a snapshot's stamps are other servers' wall clocks, or ours before a step back: a node stamped
        in the future is taken as reported now, and goes down ``service_down_time`` after it if it is silent)."""
        with self._lock:
            pending = list(reports)
            clock_now = self._clock()

            def at(report: HostReport) -> float:
                if now is not None:
                    return now
                return clock_now if report.reported_at is None else min(report.reported_at, clock_now)

            if self._changes.listeners:
                for report in pending:
                    self.update(report, now=at(report), whole=whole)
                return
            # The batch allocates a few objects per node (its keys first) and frees none, with no cycles among
            # them: the cyclic collector would walk the growing heap again and again for nothing (a third of the time).
            collecting = gc.isenabled()
            gc.disable()
            try:
                row_of = self._columns.row_of
                keys: list[NodeKey] = list(map(_KEY, pending))
                cut = len(keys)
                # a cold start's reports are all of new nodes, each named once: two checks in C instead of a loop
                if len(dict.fromkeys(keys)) != cut or not row_of.keys().isdisjoint(keys):
                    cut = _first_held_or_repeated(keys, row_of)
                if cut:
                    self._load_new(pending[:cut], keys[:cut], now, clock_now, whole)
            finally:
                if collecting:
                    gc.enable()
            for report in pending[cut:]:
                self.update(report, now=at(report), whole=whole)

    def _load_new(self, reports: list[HostReport], keys: list[NodeKey], now: float | None, clock_now: float,
                  whole: bool) -> None:
        """``load``'s bulk part: ``reports`` of nodes the table does not hold, ``keys`` theirs, all distinct; their
        report times ``now``, or their stamps no later than ``clock_now`` (see ``load``)."""
        columns = self._columns
        first = columns.add_rows(keys)
        end = first + len(keys)
        self._instances.add_rows(len(keys))
        columns.cols["aggset_code"][first:end] = self._aggregates.codes_of(host for host, _ in keys)
        held = self._ledger.holds
        simple_rows: list[int] = []
        simple_stats: list[Any] = []
        complex_rows: list[int] = []
        for row, report, key in zip(range(first, end), reports, keys, strict=True):
            stats = report.stats
            child = report.provider is not None and report.provider.parent_provider_uuid is not None
            placed = report.provider is not None and report.provider.inventories_set
            if simple_for_new_row(stats) and not child and not placed and not held(key):
                simple_rows.append(row)
                simple_stats.append(stats)
                service = stats.service
                if service is not None and service.disabled and service.disabled_reason:
                    self._disabled_reasons[key] = service.disabled_reason
            else:
                complex_rows.append(row)
        apply_new_rows(columns, simple_rows, simple_stats, self._default_ratios)
        # what ``update`` writes besides the stats: the report time; the usage version and the journal, once for
        # the new row (``Ledger.restore_row``), once for a whole record's cells (``Ledger.count_numa``) and once
        # for the report; a revision and a static revision (a new row) per report
        raw = np.fromiter((np.nan if r.reported_at is None else r.reported_at for r in reports), dtype=np.float64,
                          count=len(reports))
        columns.cols["reported_at"][first:end] = raw
        stamps = np.full(len(reports), now) if now is not None else np.fmin(raw, clock_now)  # fmin: NaN -> clock
        columns.cols["updated_at"][first:end] = stamps
        touches = 3 if whole else 2
        simple = np.asarray(simple_rows, dtype=np.intp)
        columns.cols["usage_version"][simple] += touches
        self._changes.journal.extend(np.repeat(simple, touches))
        self._changes.revision += len(simple_rows)
        self._changes.static_revision += len(simple_rows)
        for row in complex_rows:
            i = row - first
            self._ledger.restore_row(row, keys[i])
            self._apply_report(reports[i], row, keys[i], stamps.item(i), static=True, whole=whole)
        columns.refresh_rows(slice(first, end))

    def _apply_report(self, report: HostReport, row: int, key: NodeKey, now: float, *, static: bool,
                      whole: bool) -> int:
        """``update`` once the row is known (``static``: it is new). Holds the lock (the caller's)."""
        columns = self._columns
        stats = report.stats
        # a report without its provider (a cell's, a host's own) leaves the row as Placement last set it
        placed = report.provider.inventories_set if report.provider is not None else bool(columns.cols["placed"][row])
        columns.cols["placed"][row] = placed
        static |= apply_stats(columns, row, stats, self._default_ratios, whole=whole, placed=placed)
        if stats.service is not None:
            if stats.service.disabled and stats.service.disabled_reason:
                self._disabled_reasons[key] = stats.service.disabled_reason
            else:
                self._disabled_reasons.pop(key, None)
        child = report.provider is not None and report.provider.parent_provider_uuid is not None
        if child and report.provider is not None:
            self._ledger.child_providers[report.provider.uuid] = key
            p = report.provider
            place = (key, p.parent_provider_uuid or "", p.root_provider_uuid or p.parent_provider_uuid or "")
            if self._ledger.child_tree.get(p.uuid) != place:  # a new child, or moved: the trees are static state
                self._ledger.child_tree[p.uuid] = place
                static = True
        if bool(columns.cols["child"][row]) != child:
            columns.cols["child"][row] = child
            static = True
        if stats.instances is not None:
            listed = self._instances.report(row, key[0], stats.instances, held=self._ledger)
            columns.reports_instances[row] = True
            self._ledger.confirm_listed(row, key, listed, now)
        elif not columns.reports_instances[row]:
            self._ledger.settle_unlisted(row, key, now)
        if stats.numa_topology is not None or whole:  # new cells: the claims in flight count on them again
            self._ledger.count_numa(row, key)
        columns.refresh_load(row)
        columns.refresh_free(row, shape=static)  # not static: no inventory changed shape, the capacity stands
        columns.cols["updated_at"][row] = now
        self._changes.touched(row)
        self._changes.changed("host", key, static=static)
        return row

    def touch_many(self, touches: list[tuple[NodeKey, float]], *, observed: bool = False) -> None:
        """``touch`` for each (node, time) in order, under one hold of the lock, the touched rows' load and free
        figures computed again together (row by row they were half of what a replica spent per touch).

        ``observed``: the times are the touches' stamps (other servers' wall clocks), and each node's report time
        is this table's clock now instead, as ``update`` does with a report from the feed."""
        with self._lock:
            columns = self._columns
            updated_at = columns.cols["updated_at"]
            stamps = columns.cols["reported_at"]
            clock_now = self._clock() if observed else 0.0
            touched: list[tuple[int, NodeKey]] = []
            for key, stamp in touches:
                row = columns.row_of.get(key)
                if row is None:
                    continue
                stamps[row] = stamp
                now = clock_now if observed else stamp
                if columns.reports_instances[row]:
                    listed = self._instances.report(row, key[0], self._instances.reported_instances(row),
                                                    held=self._ledger)
                    self._ledger.confirm_listed(row, key, listed, now)
                else:
                    self._ledger.settle_unlisted(row, key, now)
                self._ledger.count_numa(row, key)
                updated_at[row] = now
                touched.append((row, key))
            if not touched:
                return
            # a touch repeats the record: no inventory's shape moved, so the capacity stands (computed again, it is
            # the one held); claims settled or expired above move only the free figures
            if len(touched) < VECTOR_ROWS:
                for row, _ in touched:
                    columns.refresh_load(row)
                    columns.refresh_free(row, shape=False)
            else:
                columns.refresh_rows(np.fromiter((row for row, _ in touched), dtype=np.intp, count=len(touched)))
            for row, key in touched:
                self._changes.touched(row)
                self._changes.changed("host", key)

    def heartbeat(self, rows: np.ndarray, now: float) -> None:
        """``update(HostReport(host))`` for many rows at once: a report naming nothing only says "alive at now"."""
        if not len(rows):
            return
        with self._lock:
            self._columns.cols["updated_at"][rows] = now
            self._columns.cols["usage_version"][rows] += 1
            self._changes.heartbeat_epoch += 1
            self._changes.revision += 1

    def _add_row(self, host: str, node: str) -> int:
        row = self._columns.add_row(host, node)
        self._instances.add_row()
        self._columns.cols["aggset_code"][row] = self._aggregates.code_of(host)
        self._ledger.restore_row(row, (host, node))
        return row


def _first_held_or_repeated(keys: list[NodeKey], held: Container[NodeKey]) -> int:
    """The position of the first of ``keys`` that ``held`` holds or that an earlier key names (``len(keys)``: none):
    the bulk path takes the reports before it, the rest go one by one."""
    seen: set[NodeKey] = set()
    for at, key in enumerate(keys):
        if key in held or key in seen:
            return at
        seen.add(key)
    return len(keys)
