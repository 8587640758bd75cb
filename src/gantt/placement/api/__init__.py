"""The Placement face: OpenStack Placement's REST API (16.0.0, microversions 1.0-1.39) on Gantt's one model.

Mounted at ``/placement`` on ``gantt serve``. Thin handlers over the façade (``gantt.placement.facade``) and the
domain modules (``gantt.resources``); this package holds only what is HTTP: microversion negotiation, Placement's
error bodies and codes, content negotiation, and the wire shapes.
"""

from gantt.placement.api.app import create_placement_app, refusal
from gantt.placement.api.policy import Policy

__all__ = ["Policy", "create_placement_app", "refusal"]
