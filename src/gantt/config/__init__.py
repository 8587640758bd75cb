"""Configuration: one file whose sections and option names match nova.conf where an option exists there; this face
re-exports it.

TOML (``gantt.toml``) is the native form; a nova.conf is read too, with oslo.config's rules (``novaconf``), so an
operator can point Gantt at the file Nova runs with. Options Gantt adds live in ``[gantt]``. An unknown option in
a section whose options decide placements is an error (a typo must not silently change placement); Nova's options
that change nothing Gantt decides are read, not used (listed at start), and those that would change a placement
but that Gantt does not implement are refused unless at Nova's default (``checks``).

Config imports nothing above the model: an option whose meaning is another package's (the Placement face's policy
file) is held raw here and read by that package when it builds itself. Modules: ``options`` (Config, namespaces),
``loading`` (load_config), ``scheduling`` (Nova's scheduler sections), ``pci`` (``[pci] alias``), ``service``
(``[gantt]``), ``placement`` (``[oslo_policy]``, ``[cors]``), ``volume`` (a volume namespace's options),
``checks``, ``novaconf``, ``per_request`` (the options Nova reads at each request, set in a running Config).
"""

from gantt.config.loading import load_config
from gantt.config.options import DEFAULT_NAMESPACE, NAMESPACE_KINDS, Config, Namespace
from gantt.config.pci import PciSection
from gantt.config.placement import CorsSection, OsloPolicySection
from gantt.config.scheduling import (
                                     NOVA_ALL_WEIGHERS,
                                     NOVA_DEFAULT_FILTERS,
                                     ComputeSection,
                                     DefaultSection,
                                     FilterSchedulerSection,
                                     MetricsSection,
                                     SchedulerSection,
                                     parse_weight_setting,
)
from gantt.config.service import GANTT_PATHS, GanttSection
from gantt.config.volume import VolumeOptions

__all__ = [
    "DEFAULT_NAMESPACE", "GANTT_PATHS", "NAMESPACE_KINDS", "NOVA_ALL_WEIGHERS", "NOVA_DEFAULT_FILTERS",
    "ComputeSection", "Config", "CorsSection", "DefaultSection", "FilterSchedulerSection", "GanttSection",
    "MetricsSection", "Namespace", "OsloPolicySection", "PciSection", "SchedulerSection", "VolumeOptions",
    "load_config", "parse_weight_setting",
]
