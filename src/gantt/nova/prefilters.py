"""Nova 34's request filters that ask Nova's other services, run by Gantt's manager as Nova's runs them
(``nova/scheduler/request_filter.py``), on the translated spec (``gantt.nova.translate``).

- ``owner_nova_filter``: when every nova-compute of every cell is at least ``MIN_COMPUTE_VERSION_OWNER_TRAIT`` (a
  query of the cells' services tables, per request, as Nova makes it: a rolling upgrade ends without a restart),
  the root provider must have ``OWNER_NOVA`` (which those computes put on their providers, so that a provider
  another service made never takes a server). A cell that does not answer is left out of the minimum, as in Nova.
- ``remote_managed_ports_filter``: a port given by id that Neutron says is remote-managed (a SmartNIC DPU's)
  requires ``COMPUTE_REMOTE_MANAGED_PORTS``. Neutron is asked as Nova asks it (``neutron.API()
  .is_remote_managed_port``, with the request's context); a failure to ask refuses the request.

Gantt's own equivalents of the filters that need no other service are in ``gantt.compute`` (the aggregate ones in
``compute/filters/prefilters.py``, the guest features in ``compute/feature_traits.py``).
``routed_networks_filter`` is not run: its option (``[scheduler] query_placement_for_routed_network_aggregates``)
is refused at start unless off.
"""

from __future__ import annotations

import logging
from typing import Any

import os_traits
from nova.network import neutron
from nova.objects import service
from nova.scheduler import request_filter

log = logging.getLogger(__name__)


class Unanswered(RuntimeError):
    """A service a request filter must ask (Neutron) did not answer: the request is refused."""


def apply(context: Any, spec_obj: Any, spec: dict[str, Any]) -> None:
    """Add the root provider's traits these filters require to ``spec`` (a translated spec, in place)."""
    required = set(spec.get("required_traits") or ())
    before = set(required)
    if _remote_managed_ports(context, spec_obj):
        required.add(os_traits.COMPUTE_REMOTE_MANAGED_PORTS)
    if os_traits.OWNER_NOVA not in required and _computes_own_their_providers(context):
        required.add(os_traits.OWNER_NOVA)
    if required != before:
        spec["required_traits"] = sorted(required)


def _computes_own_their_providers(context: Any) -> bool:
    """Whether every nova-compute of every cell reports OWNER_NOVA on its providers (Nova's gate)."""
    minimum = service.get_minimum_version_all_cells(context, ["nova-compute"])
    if minimum < request_filter.MIN_COMPUTE_VERSION_OWNER_TRAIT:
        log.warning("OWNER_NOVA not required: not every nova-compute is upgraded (minimum version %d, need %d)",
                    minimum, request_filter.MIN_COMPUTE_VERSION_OWNER_TRAIT)
        return False
    return True


def _remote_managed_ports(context: Any, spec_obj: Any) -> bool:
    """Whether a port the request gives by id is remote-managed, as Neutron answers."""
    if not spec_obj.obj_attr_is_set("requested_networks") or not spec_obj.requested_networks:
        return False
    api = neutron.API()
    found = False
    for network in spec_obj.requested_networks:  # every port is asked about, as Nova asks
        port = network.port_id if network.obj_attr_is_set("port_id") else None
        if not port:
            continue
        try:
            found = api.is_remote_managed_port(context, port) or found
        except Exception as exc:  # Neutron down or the port gone: nothing to decide by (Nova fails the request)
            raise Unanswered(f"asking Neutron whether port {port} is remote-managed failed: {exc}") from exc
    return bool(found)
