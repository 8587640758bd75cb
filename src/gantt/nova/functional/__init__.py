"""Nova 34's own functional tests, with Gantt swapped in: ``python -m gantt.nova.functional``.

Run by an interpreter whose environment has nova==34.0.0, openstack-placement==16.0.0 and Nova's test libraries
(the tests' venv: tests/nova/functional_venv.py). The tests are the installed package's ``nova.tests.functional``;
stestr runs them. What is swapped: swap.py; how a test gets its Gantt server: forkserver.py.
"""

from __future__ import annotations

# The figures are for these modules (issue 33): eight measured first, three more (about 16 minutes with
# two workers on the reference).
SMALL = ("test_server_group", "test_aggregates", "test_availability_zones", "test_scheduler", "test_json_filter",
         "test_cold_migrate", "test_servers_provider_tree", "libvirt.test_numa_servers")
LARGE = ("test_servers", "libvirt.test_pci_sriov_servers", "libvirt.test_pci_in_placement")
