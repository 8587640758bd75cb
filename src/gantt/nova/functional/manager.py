"""Gantt's scheduler manager as Nova's functional tests meet it: the product's manager plus the one attribute
some tests reach through Nova's scheduler to set up their mocks.

``libvirt.test_numa_servers`` and ``libvirt.test_pci_sriov_servers`` wrap a filter class found in
``self.scheduler.manager.host_manager.filter_cls_map`` in every setUp, then some of their tests assert that the
wrapped ``host_passes`` was called. Gantt's manager has no HostManager (it must not consult one), so without the
map every test of those classes failed in setUp, and a setUp that fails after Nova's fixtures started their thread
pools failed every later test of the worker. Here the map is Nova's own loader's answer for the configured
``available_filters``, as HostManager builds it; nothing in it is called when Gantt schedules, so a test that
asserts Nova's filter ran still fails, as it should (docs/nova.md counts them apart).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from gantt.nova.manager import SchedulerManager


class FunctionalSchedulerManager(SchedulerManager):
    _filter_map: SimpleNamespace | None = None

    @property
    def host_manager(self) -> Any:
        if self._filter_map is None:
            import nova.conf
            from nova.scheduler import filters

            classes = filters.HostFilterHandler().get_matching_classes(
                nova.conf.CONF.filter_scheduler.available_filters)
            self._filter_map = SimpleNamespace(filter_cls_map={cls.__name__: cls for cls in classes})
        return self._filter_map
