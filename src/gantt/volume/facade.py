"""The volume façade: a volume namespace's calls (Cinder's reports, placements, releases) over a ``VolumeReplica``.

A claim is one batch: the allocation, with an ``Expect`` on the pool's usage revision as the replica saw it.
Another scheduler's claim (or a report) on the same pool since then makes the store refuse it; the façade then
has the replica read the feed up to the store's head and decides again on the new figures. Two schedulers can
therefore never both consume the same free space: that is what keeps a thin pool from being overfilled.

``Volumes`` keeps nothing of its own (its counters are the replica's): one may be built per call.
"""

from __future__ import annotations

from typing import Any

from gantt.model import Allocation, InvalidRequest, NotFound, NoValidHost
from gantt.store.base import Batch, ConsumerHeld, Expect, StoreConflict
from gantt.volume.model import BackendReport, Pick, VolumeRequest
from gantt.volume.replica import RESOURCE, VolumeReplica
from gantt.volume.table import pool_state

CLAIM_RETRIES = 8
ALTERNATES = 3  # picks an answer carries: the claimed pool, then the next best unclaimed ones


class Volumes:
    """The calls of one volume namespace, over its replica."""

    def __init__(self, replica: VolumeReplica) -> None:
        self.replica = replica

    # --------------------------------------------------------------------------------------------- writes

    def report(self, backend: BackendReport) -> int:
        """A backend's capability report (Cinder's update_service_capabilities): its pools replace what the
        store holds for them, and the backend's pools it no longer lists are removed, in one batch."""
        replica = self.replica
        reports = backend.pool_reports(reported_at=replica.clock())
        listed = {r.pool_name for r in reports}
        with replica.lock:
            gone = [(host, pool) for host, pool in replica.table.rows if host == backend.host and pool not in listed]
        result = replica.store.commit(Batch(reports=[r.to_record() for r in reports],
                                    delete_hosts=[(host, pool) for host, pool in gone]))
        replica.sync()
        return result.revision

    def delete_backend(self, host: str, pool: str | None = None) -> int:
        replica = self.replica
        result = replica.store.commit(Batch(delete_hosts=[(host, pool)]))
        replica.sync()
        return result.revision

    def select_destinations(self, request: VolumeRequest, request_id: str | None = None) -> list[Pick]:
        """The pools for one volume, best first; the first is claimed (an allocation of the volume's size)."""
        replica = self.replica
        volume = request.volume_id
        if not volume:
            raise InvalidRequest("volume_id is required: a claim is keyed by the volume it is for",
                                 field="$.volume_id")
        size = request.size
        if request.operation not in (None, "create_volume"):
            raise InvalidRequest(f"operation {request.operation!r} is not served yet: only create_volume places "
                                 "and claims a volume", field="$.operation")
        if request.new_size is not None:
            # CapacityFilter would check new_size - size (an extend's growth) while the claim takes size: a
            # create with it could fill a pool past its limit
            raise InvalidRequest("new_size is extend_volume's (not served): a created volume's size is "
                                 "volume_properties.size", field="$.new_size")
        for _ in range(CLAIM_RETRIES):
            with replica.lock:
                held = replica.allocations.get(volume)
                if held is not None:  # idempotent: the volume's pool, as booked
                    return [Pick(host=held.host, pool=held.nodename, weight=0.0)]
                replica.decisions += 1
                picks = replica.scheduler.select(replica.table, request, limit=ALTERNATES)
                chosen = picks[0]
                key = (chosen.host, chosen.pool)
                expect = Expect(chosen.host, chosen.pool, replica.node_revisions.get(key, 0))
            allocation = Allocation(consumer_uuid=volume, host=chosen.host, nodename=chosen.pool,
                                    resources={RESOURCE: size}, project_id=request.volume_properties.project_id,
                                    user_id=request.volume_properties.user_id, request_id=request_id,
                                    created_at=replica.clock())
            # Committed outside the lock, so that concurrent claims reach the store together (a backend may
            # group them) and the feed keeps moving: the expect alone decides, and a claim of this process that
            # committed first on the same pool moved its revision, so a decision made before it conflicts too.
            try:
                result = replica.store.commit(Batch(expect=[expect], allocations=[allocation]))
            except (StoreConflict, ConsumerHeld):
                replica.claim_conflicts += 1
            else:
                replica.claimed(allocation, result.revision)
                return picks
            replica.sync()  # read what beat us, then decide again
        raise NoValidHost(f"every pool that fits was claimed by another scheduler {CLAIM_RETRIES} times over")

    def release(self, volume: str) -> int:
        replica = self.replica
        with replica.lock:
            if volume not in replica.allocations:
                replica.sync()
        if volume not in replica.allocations:
            raise NotFound(f"no allocation for volume {volume!r}", field="volume")
        replica.store.commit(Batch(releases=[volume]))
        return replica.sync()

    # ---------------------------------------------------------------------------------------------- reads

    def pools(self) -> list[dict[str, Any]]:
        replica = self.replica
        with replica.lock:
            table = replica.table
            return [{"host": host, "pool": pool, "state": _plain(pool_state(table, row))}
                    for (host, pool), row in sorted(table.rows.items())]

    def allocation(self, volume: str) -> Allocation:
        held = self.replica.allocations.get(volume)
        if held is None:
            raise NotFound(f"no allocation for volume {volume!r}", field="volume")
        return held


def _plain(state: dict[str, Any]) -> dict[str, Any]:
    """A pool's state as JSON takes it: capabilities are shown once, at the top of the pool's entry."""
    return {key: value for key, value in state.items() if key not in ("capabilities", "pools")} | {
        "capabilities": state.get("capabilities", {})}

