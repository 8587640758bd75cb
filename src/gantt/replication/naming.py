"""One node, one record, whatever it is named: a resource provider's uuid is its identity.

A node's record is keyed by its name, ``(host, node)``. The same node can reach the store under two names: Nova's
nova-compute creates its resource provider through Gantt's Placement face, where the record is keyed by the
provider's uuid (``providers.new_record``), while Nova's cell database names the compute node ``(compute.host,
hypervisor_hostname)`` with that uuid (``gantt.nova.cells``), and either may come first; a node is renamed, or an
ironic node moves to another compute service, under the same uuid. A report that carries a uuid another record
holds makes the two one (``store.base.Merge``, planned by ``store.planner._plan_merges``) in the commit that
writes it: the report's name wins, Placement's provider (generation, inventories, traits, tree) and every
allocation on either name are kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gantt.model import HostReport
from gantt.resources.providers import ProviderIndex
from gantt.store.base import Batch, Merge


def merges_of(providers: ProviderIndex, reports: Sequence[HostReport]) -> list[Merge]:
    """The merges the reports ask for: each report's node, by the uuid it carries, with every other record that
    carries that uuid as this replica knows them (the store checks them again as it commits)."""
    out: list[Merge] = []
    for report in reports:
        uuid = report.stats.uuid
        if not uuid:
            continue
        key = (report.host, report.nodename)
        out += [Merge(*twin.key, *key, uuid) for twin in providers.twins_of(uuid, key)]
    return out


def reports_batch(replica: Any, reports: list[HostReport], touch_interval: float) -> Batch:
    """What ``reports`` write: themselves, and the merges they ask for."""
    return Batch(reports=reports, touch_interval=touch_interval,
                 merges=merges_of(replica.providers, reports))


def write_reports(replica: Any, reports: list[HostReport], touch_interval: float) -> int:
    """Write ``reports`` as one batch, with the merges they ask for; then once more for the merges this replica
    sees only once it has caught up with its own write (another process's record of the same uuid, committed
    just before it). Returns the last revision written."""
    revision: int = replica.write(reports_batch(replica, reports, touch_interval))
    late = merges_of(replica.providers, reports)
    if late:
        revision = replica.write(Batch(merges=late))
    return revision
