"""What a NoValidHost tells Nova's users: Nova's own words, not Gantt's explanation.

Nova shows a NoValidHost's message to the server's owner (the instance fault's ``message``, readable by any
tenant), and Nova's scheduler keeps it bare on purpose, so as not to describe the cloud to its tenants: an empty
reason when Placement has no candidate for the request (resources, traits, aggregates, the request filters that
become Placement's query, a requested destination), and ``There are not enough hosts available.`` when there were
candidates and the filters, or the claims, left fewer hosts than instances. Nova's tests and its users' scripts
match these texts.

Gantt's explanation (filter by filter, nearest misses) is kept for the operator: the manager logs it, and raises
Nova's NoValidHost *from* Gantt's, so the chained exception is in the traceback the conductor stores as the
fault's ``details``, which Nova's API shows to admins only.
"""

from __future__ import annotations

from typing import Any

from gantt.compute.filters.pipeline import ALWAYS_ON
from gantt.model import GanttError
from gantt.model import NoValidHost as GanttNoValidHost

NOT_ENOUGH_HOSTS = "There are not enough hosts available."
# The explanation's steps Nova's Placement query covers: resources, traits, member_of and the request filters that
# add to them (ALWAYS_ON), a tree's root only, and requested_destination (Placement's in_tree and member_of).
PLACEMENT_STEPS = frozenset({*ALWAYS_ON, "root_providers", "requested_destination"})
# Pre-selection Nova's host manager applies after Placement answered, before its filters.
_AFTER_PLACEMENT = ("ignore_hosts", "force_hosts", "force_nodes")


def reason(replica: Any, spec: dict[str, Any], refused: GanttNoValidHost, *, rebuild: bool = False) -> str:
    """Nova's reason for Gantt's refusal of ``spec`` (the translated request): "" when no node passes what
    Placement would check, ``NOT_ENOUGH_HOSTS`` otherwise.

    Nova asks Placement once per request, for its first instance: a later instance that finds no host, claims that
    lost every race, and a rebuild's check (which asks no Placement) are past Placement. Otherwise the request is
    explained again without the pre-selection Nova applies after Placement, so that the count after Placement's
    steps is exact, whatever ignore_hosts removed first. (Nova also puts a lone forced node in Placement's
    ``in_tree``: a forced host counts here as Nova's host manager's, the text may differ then.)"""
    explanation = refused.explanation
    if rebuild or explanation is None or explanation.instance_index > 0 or explanation.reason == "contention":
        return NOT_ENOUGH_HOSTS
    placement_only = {key: value for key, value in spec.items() if key not in _AFTER_PLACEMENT}
    try:
        dry = replica.explain(placement_only)
    except GanttError:  # a request the dry run cannot rank (it was ranked once): past Placement, as Nova's filters
        return NOT_ENOUGH_HOSTS
    candidates = dry.hosts
    for step in dry.steps:
        if step.name not in PLACEMENT_STEPS:
            break  # pre-selection comes first, then ALWAYS_ON: Placement's part is the steps' head
        candidates = step.after
    return "" if candidates == 0 else NOT_ENOUGH_HOSTS
