"""What a claim on one node raises when its compare-and-set fails (the ledger's, and its helpers')."""

from __future__ import annotations


class ClaimRejected(Exception):
    """A claim on one node failed its compare-and-set; the engine moves to the next candidate."""


class SourceMoved(ClaimRejected):
    """A move's source allocation is no longer the instance's: no other node can take the move either."""
