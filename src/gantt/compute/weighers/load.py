"""IoOpsWeigher and NumInstancesWeigher: weigh nodes by how busy they are (Nova's io_ops / num_instances).

Both count the node's unconfirmed claims on top of what it last reported, as Nova's HostState counts a
build it has just scheduled (``consume_from_request``) until the next resource update: one more instance, one
more io op.
That is also what spreads the instances of one multi-instance request under a negative multiplier.
"""

from __future__ import annotations

from gantt.compute.weighers.base import Weigher, register


@register
class IoOpsWeigher(Weigher):
    """Concurrent io-heavy operations (builds, resizes, snapshots…); default multiplier -1.0: prefer idle.

    ``minval = 0`` as in Nova: normalization runs from 0 to the busiest candidate, so with every candidate at
    the same non-zero load the weights are 1, not 0 (only all-zero loads give all zeros).
    """

    name = "IoOpsWeigher"
    multiplier_option = "io_ops_weight_multiplier"
    minval = 0.0
    usage_column = "io_ops_load"


@register
class NumInstancesWeigher(Weigher):
    """Instances on the node. Nova's default multiplier 0.0 disables it; negative spreads, positive packs."""

    name = "NumInstancesWeigher"
    multiplier_option = "num_instances_weight_multiplier"
    usage_column = "instances_load"
