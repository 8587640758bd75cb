"""NUMA placement as Nova decides it (``nova/virt/hardware.py``, Nova 34): the guest topology a flavor and image ask
for (``guest``), a host's cells prepared for fitting (``host``), and whether and how the one fits the other, with
what the fit takes (``fit``). None of it knows of tables or filters. This face re-exports what the engine, the
filters and the state use.
"""

from gantt.compute.numa.fit import CellFit, Networks, claim, claims_of, fit
from gantt.compute.numa.guest import (
                                      DEDICATED,
                                      ISOLATE,
                                      MIXED,
                                      PREFER,
                                      REQUIRE,
                                      SHARED,
                                      GuestCell,
                                      GuestTopology,
                                      instance_topology,
)
from gantt.compute.numa.host import HostCell, HostNUMA, with_claims

__all__ = ["DEDICATED", "ISOLATE", "MIXED", "PREFER", "REQUIRE", "SHARED", "CellFit", "GuestCell", "GuestTopology",
           "HostCell", "HostNUMA", "Networks", "claim", "claims_of", "fit", "instance_topology", "with_claims"]
