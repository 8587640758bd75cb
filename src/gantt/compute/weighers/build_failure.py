"""BuildFailureWeigher: push nodes with recent failed builds to the back (Nova's build_failure weigher)."""

from __future__ import annotations

from gantt.compute.weighers.base import Weigher, register


@register
class BuildFailureWeigher(Weigher):
    """Raw value: the node's ``failed_builds``.

    The multiplier is negated (Nova: ``-1 * multiplier``) after the aggregate override is resolved, so a
    positive ``build_failure_weight_multiplier`` (default 1,000,000) makes failures count against a node,
    and an aggregate setting the key to 0 makes its nodes ignore them.
    """

    name = "BuildFailureWeigher"
    multiplier_option = "build_failure_weight_multiplier"
    multiplier_sign = -1.0
    # Written only with a report, which journals its row: the extremes come from a kept shortlist, not two
    # passes over every row per decision.
    usage_column = "failed_builds"
