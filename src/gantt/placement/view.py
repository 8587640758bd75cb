"""What the Placement façade and its consumers' half read of their replica: its table, provider index and
catalog, looked up at each use (a reload swaps them whole), and the catch-up a uuid this replica does not know yet
asks for (another instance may have made it an instant ago, and a client told it exists must not hear 404)."""

from __future__ import annotations

from gantt.compute.state import HostTable
from gantt.replication.replica import Replica
from gantt.resources.catalog import Catalog
from gantt.resources.providers import ProviderIndex


class ReplicaView:
    def __init__(self, replica: Replica) -> None:
        self.replica = replica

    @property
    def table(self) -> HostTable:
        return self.replica.table

    @property
    def providers(self) -> ProviderIndex:
        return self.replica.providers

    @property
    def catalog(self) -> Catalog:
        return self.replica.catalog

    def _known(self, uuid: str) -> None:
        if uuid not in self.providers.by_uuid:
            self.replica.sync()
