"""``[gantt]``: Gantt's own options for the whole service (the store, where it listens, the token, body and claim
limits, subset slots, where the Placement face is mounted)."""

from __future__ import annotations

from msgspec import Struct

from gantt.model.errors import InvalidRequest
from gantt.model.prepare import prepare_types

# The first segments of Gantt's own paths (gantt.service.app): the Placement face may not be mounted under them.
GANTT_PATHS = {"v1", "health", "metrics", "openapi.json", "ui"}


class GanttSection(Struct, forbid_unknown_fields=True, kw_only=True):
    """Gantt's own options."""

    claim_timeout: float = 600.0  # an allocation a reporting host has not confirmed by then is released
    claim_retries: int = 8  # how many store conflicts one request may absorb before it gives up
    mask_cache_size: int = 256
    seed: int | None = None  # for reproducible random choices (tests, the simulator)
    # Several instances sharing one store: instance ``subset_slot`` of ``subset_slots`` takes its random pick of the
    # best ``host_subset_size`` among those whose host name hashes to its slot, counting hosts tied with the
    # subset's last weight as in it (Nova orders equal weights arbitrarily), so instances deciding at once claim
    # different hosts. The pick stays one Nova's random choice could make: the weights are Nova's, and a host of
    # another slot is taken when none of this one is that good. 1 slot, the default: Nova's uniform pick.
    subset_slots: int = 1
    subset_slot: int = 0
    store: str = "sqlite:///gantt.sqlite"
    # gantt.nova's manager (nova.conf's [gantt]): seconds between reads of the cell databases' compute nodes
    cell_poll_interval: float = 10.0
    bind: str = "127.0.0.1"
    port: int = 8780
    token: str | None = None
    max_body_bytes: int = 4 * 1024 * 1024
    # Where the Placement face is served: a path prefix, or "/" for the server's root (Placement's own routes and
    # version document there; Gantt's /v1, /health, /metrics, /openapi.json and /ui stay where they are).
    placement_mount: str = "/placement"

    def __post_init__(self) -> None:
        if self.subset_slots < 1:
            raise ValueError("[gantt] subset_slots must be >= 1")
        if not 0 <= self.subset_slot < self.subset_slots:
            raise ValueError(f"[gantt] subset_slot must be from 0 to subset_slots - 1 ({self.subset_slots - 1})")
        mount = self.placement_mount
        if not mount.startswith("/") or (mount != "/" and mount.endswith("/")) or "//" in mount \
                or any(c.isspace() or c in "?#%" for c in mount):
            raise InvalidRequest(f"[gantt] placement_mount {mount!r}: a path such as /placement, or / for the root",
                                 field="gantt.placement_mount")
        first = mount.split("/")[1]
        if mount != "/" and first in GANTT_PATHS:
            raise InvalidRequest(f"[gantt] placement_mount {mount!r} is under Gantt's own /{first}",
                                 field="gantt.placement_mount")



prepare_types(globals())  # build msgspec type info before any thread decodes (see gantt.model.prepare)
