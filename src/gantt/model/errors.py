"""The errors Gantt raises on purpose: one family under GanttError, each with the HTTP status the service maps it to."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from gantt.base.quote import clip

if TYPE_CHECKING:
    from gantt.model.allocations import NodeKey
    from gantt.model.answers import Explanation


class GanttError(Exception):
    """Base of every error Gantt raises on purpose; ``status`` is the HTTP status the service maps it to."""

    status = 500
    title = "Internal error"

    def __init__(self, message: str, *, field: str | None = None, detail: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.detail = detail

    def to_problem(self) -> dict[str, Any]:
        """An RFC 9457 problem body."""
        # clipped: a message or field may quote a client's value, which may be megabytes long (gantt.base.quote)
        body: dict[str, Any] = {"type": "about:blank", "title": self.title, "status": self.status,
                                "detail": clip(self.message)}
        if self.field is not None:
            body["field"] = clip(self.field, 256)
        if self.detail is not None:
            body["explanation"] = self.detail
        return body


class InvalidRequest(GanttError, ValueError):
    status = 400
    title = "Invalid request"


class NotFound(GanttError, LookupError):
    status = 404
    title = "Not found"


class Conflict(GanttError):
    status = 409
    title = "Conflict"


class GenerationConflict(Conflict):
    """A write named a provider generation the store no longer holds (Placement's concurrent update)."""

    placement_code = "placement.concurrent_update"

    def __init__(self, keys: list[NodeKey]) -> None:
        super().__init__("resource provider generation conflict: Resource provider's generation already changed. "
                         "Please update the generation and try again. (" + ", ".join(f"{h}/{n}" for h, n in keys[:5])
                         + ")")
        self.keys = keys


class ReplicaBehind(Conflict):
    """A batch built as of a revision that another process has written past (``Batch.fresh_as_of``): the replica
    catches up and builds it again. Never an answer of its own: the steps that ask for the check handle it."""


class ConsumerConflict(Conflict):
    """A write named a consumer generation the store no longer holds (Placement 1.28's consumer generation)."""

    placement_code = "placement.concurrent_update"

    def __init__(self, consumer: str, held: int | None, given: int | None) -> None:
        super().__init__(f"consumer generation conflict - expected {_null(held)} but got {_null(given)}",
                         field="consumer_generation")
        self.consumer = consumer


def _null(value: int | None) -> str:
    return "null" if value is None else str(value)


class InsufficientCapacity(Conflict):
    """An allocation does not fit a provider's inventory (Placement's capacity and unit rules)."""

    def __init__(self, resource_class: str, provider: str, why: str) -> None:
        reasons = {"capacity": "The requested amount would exceed the capacity.",
                   "constraints": "The requested amount would violate inventory constraints."}
        if why in reasons:
            text = (f"Unable to create allocation for '{resource_class}' on resource provider '{provider}'. "
                    f"{reasons[why]}")
        else:  # no inventory of the class there
            text = f"Inventory for '{resource_class}' on resource provider '{provider}' invalid."
        super().__init__(text, field="allocations")
        self.resource_class = resource_class
        self.provider = provider


class StoreUnavailable(GanttError):
    """The shared store cannot commit (e.g. etcd lost quorum): fail fast, place nothing."""

    status = 503
    title = "Store unavailable"


class NoValidHost(GanttError):
    """Nothing fits. ``explanation`` says, filter by filter, how many hosts each one removed."""

    status = 409
    title = "No valid host"

    def __init__(self, message: str, explanation: Explanation | None = None) -> None:
        super().__init__(message, detail=msgspec.to_builtins(explanation) if explanation is not None else None)
        self.explanation = explanation
