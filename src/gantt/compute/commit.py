"""The contract between the engine and a store's commit hook: the hook's two shapes, the budget of store conflicts
one request may absorb, and the conflicts a hook raises.

Locally a claim is ``HostTable.claim``. With a shared store the service passes a hook: after every instance of a
request holds its local claim, the batch is committed in one transaction; a ``ClaimConflict`` rolls the local
claims back and the request is decided again, within one ``Attempts`` budget shared with the hook's own
re-validations, so retries never multiply.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from gantt.model import Allocation, GanttError, NodeKey


class Attempts:
    """One request's budget of store conflicts (``[gantt] claim_retries``), shared by every loop that absorbs
    one: the engine deciding again and the commit hook re-validating the same nodes."""

    __slots__ = ("left",)

    def __init__(self, conflicts: int) -> None:
        self.left = conflicts

    def spend(self) -> bool:
        """Take one conflict from the budget; False when none is left (the request gives up)."""
        if self.left <= 0:
            return False
        self.left -= 1
        return True


CommitHook = Callable[[list[Allocation], Attempts], None]
# The same commit as steps (see ``Engine.select_steps``): a generator whose steps its own driver carries out.
CommitSteps = Callable[[list[Allocation], Attempts], Generator[Any, Any, None]]


class ClaimConflict(GanttError):
    """Raised by a commit hook when the store refused a batch because another scheduler changed a node."""

    status = 409
    title = "Claim conflict"

    def __init__(self, message: str, keys: list[NodeKey] | None = None, *, held: list[str] | None = None) -> None:
        super().__init__(message)
        self.keys = keys or []
        # Consumers the store says another instance booked first; the replica has caught up with those bookings,
        # so the local allocation of each is the store's: the rollback keeps it and the next round answers with it.
        self.held = held or []


class TableReplaced(ClaimConflict):
    """The replica re-read its store while this request decided on the table that reload replaced: the caller
    decides again on the new one (not a conflict with another scheduler, and no conflict budget is spent)."""
