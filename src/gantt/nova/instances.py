"""Instance lists seeded from the cells at a first start (Nova's ``HostManager._init_instance_info``): on a fresh
store, nova-compute's periodic ``sync_instance_info`` would otherwise leave them empty for minutes."""

from __future__ import annotations

import logging
from typing import Any

import sqlalchemy as sa
from nova import context as nova_context
from nova.db.main import models

from gantt.nova.cells import CellReader, reads_cell

log = logging.getLogger(__name__)

SEED_BATCH = 200  # hosts per query when the instance lists are seeded (IN lists stay short)


@reads_cell
def _instances_on(context: Any, hosts: list[str]) -> dict[str, list[str]]:
    """The undeleted instances a cell's database has on ``hosts`` (uuids per host), in batches."""
    instance = models.Instance
    out: dict[str, list[str]] = {}
    for start in range(0, len(hosts), SEED_BATCH):
        rows = context.session.execute(
            sa.select(instance.host, instance.uuid)
            .where(instance.host.in_(hosts[start:start + SEED_BATCH]), instance.deleted == 0)
            .order_by(instance.host, instance.id))
        for host, uuid in rows:
            out.setdefault(host, []).append(uuid)
    return out


def seed_instance_info(reader: CellReader, context: Any) -> int:
    """Instance lists for the hosts Gantt's store has none for, from the cells' instance tables (Nova's
    ``HostManager._init_instance_info`` at its start): on a fresh store, nova-compute's periodic
    ``sync_instance_info`` would otherwise leave them empty for minutes (and SameHost/DifferentHost, affinity
    and NumInstances blind). A host with a list already (kept by the casts since) is left as it is. Returns how
    many hosts were seeded."""
    replica = reader.replica
    mappings = {cm.uuid: cm for cm in reader.mappings(context)}
    seeded = 0
    for uuid, view in list(reader.cells.items()):
        hosts = sorted({key[0] for key in view.nodes} - set(replica.instance_info))
        if not hosts or uuid not in mappings:
            continue
        result = nova_context.scatter_gather_cells(context, [mappings[uuid]], reader.timeout, _instances_on,
                                                   hosts).get(uuid)
        if result is None or nova_context.is_cell_failure_sentinel(result):
            log.error("cell %s (%s): its instances could not be read (%s); its hosts' instance lists wait for "
                      "nova-compute's sync_instance_info", view.name, uuid, result)
            continue
        for host, instances in result.items():
            if host in replica.instance_info:  # a cast got there meanwhile: it is newer than this read
                continue
            replica.sync_instance_info(host, instances)
            seeded += 1
    return seeded
