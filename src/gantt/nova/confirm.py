"""Claims confirmed by Nova's instance info: a cell's compute node row lists no instances, so nothing in it says
which of Gantt's claims it already counts. Until something does, a claim counts on top of the row (twice once the
compute has applied it: safe, never zero), and its NUMA cells and PCI devices with it: a second pinned or PCI guest
needing what the first one's count holds twice is refused until ``claim_timeout`` settles the first.

What confirms a claim, and why it is causal, not timed (no clock of Gantt's is compared with one of Nova's):

- nova-compute casts ``update_instance_info`` for an instance after its resource tracker has written the claim
  into the node's row (``instance_claim`` / the move claims save the compute node, then the build, rebuild,
  resize, unshelve or live migration finishes and casts). So a read of that row that *begins after the cast was
  received* shows the claim, whatever else changed the row before it (a row updated for another reason, or by
  another instance's claim, before the compute applied this one, is never taken for it).
- the cast is taken only for an allocation this scheduler already held when it arrived (a claim made after the
  cast is not confirmed by it), on a node of the host that cast it, for the instance's own allocation (a
  migration's hold on its source is left to Placement's accounting and ``claim_timeout``).
- ``sync_instance_info`` confirms nothing: nova-compute's periodic sync lists the instances whose ``host`` is
  set, which its resource tracker sets just before it writes the node's row, so the list may come first.
- the read and the confirmation are made under the cell reader's lock: no pass that read the row before the cast
  can write its older report after the confirmation.

So on receiving the cast the manager reads those nodes' rows at once (one query per cell), writes their reports
where they changed, then confirms (``HostTable.confirm_shown``): on a node that reports its usage the claim is
confirmed, on one whose usage is its Placement allocations only its NUMA cells and PCI devices stop counting on
top. The confirmation is this replica's: another scheduler on the same store confirms on its own cast.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

from nova import context as nova_context

from gantt.model import GanttError, HostReport
from gantt.nova import cells

log = logging.getLogger(__name__)


def confirm_listed(reader: cells.CellReader, context: Any, host: str, uuids: list[str]) -> int:
    """``update_instance_info`` listed ``uuids`` on ``host``: read the nodes their claims are on, then confirm the
    claims there. Returns how many were confirmed."""
    if not reader.replica.table.confirm_shown(host, uuids, dry=True):  # most casts: nothing counted on top
        return 0
    with reader._lock:  # no pass that read before the cast writes after the confirmation
        wanted = reader.replica.table.confirm_shown(host, uuids, dry=True)
        read = _read_nodes(reader, context, set(wanted))
        consumers = [consumer for key in read if key in wanted for consumer in wanted[key]]
        done = reader.replica.table.confirm_shown(host, consumers) if consumers else {}
    count = sum(len(held) for held in done.values())
    if count:
        log.debug("instance info from %s: %d claim(s) confirmed on %s", host, count, sorted(done))
    return count


def _read_nodes(reader: cells.CellReader, context: Any, keys: set[cells.NodeKey]) -> set[cells.NodeKey]:
    """Read the rows of ``keys`` from their cells now; write the reports that changed (and make sure the replica
    holds the others as read). Returns the nodes read. The caller holds the reader's lock."""
    wanted: dict[str, dict[str, cells.NodeKey]] = {}
    for uuid, view in reader.cells.items():
        for asked in keys & view.nodes.keys():
            node_uuid = view.nodes[asked].stats.uuid
            if node_uuid and asked[0] in view.services:
                wanted.setdefault(uuid, {})[node_uuid] = asked
    if not wanted:
        return set()
    mappings = [cm for cm in reader.mappings(context) if cm.uuid in wanted]
    got = nova_context.scatter_gather_cells(context, mappings, reader.timeout, cells._read_nodes,
                                            {uuid: sorted(nodes) for uuid, nodes in wanted.items()})
    changed: list[HostReport] = []
    unchanged: list[HostReport] = []
    read: set[cells.NodeKey] = set()
    for uuid, nodes in got.items():
        if nova_context.is_cell_failure_sentinel(nodes):
            log.warning("cell %s did not answer the read of its nodes %s: their claims stay counted", uuid,
                        sorted(wanted[uuid].values()))
            continue
        view = reader.cells[uuid]
        for node in nodes:
            key = wanted[uuid].get(str(node.uuid))
            if key is None:
                continue
            disabled, reason, up = view.services[key[0]]
            try:
                report = cells.report_of(node, SimpleNamespace(disabled=disabled, disabled_reason=reason), up)
            except (GanttError, ValueError):
                continue  # the periodic read logs it
            if report is None or (report.host, report.nodename) != key:
                continue
            (unchanged if view.nodes[key] == report else changed).append(report)
            view.nodes[key] = report
            view.took(report, cells._stamp(node))
            read.add(key)
    if changed:
        reader.replica.report_many([cells._copy(r) for r in changed])
        reader.written += len(changed)
    if unchanged:
        reader._heartbeat(unchanged)  # written where the replica's record differs (another scheduler's older one)
    reader.nodes_read += len(read)
    return read
