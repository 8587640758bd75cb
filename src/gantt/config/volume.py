"""A volume namespace's options (``[namespace.<name>]`` of kind volume): Cinder's scheduler options and their
defaults, with the names of the filters and weighers the volume domain (gantt.volume) implements."""

from __future__ import annotations

import math
from typing import Literal

from msgspec import Struct, field

from gantt.model.prepare import prepare_types

DEFAULT_AZ = "nova"  # Cinder's storage_availability_zone default

FILTER_NAMES = ("AvailabilityZoneFilter", "CapacityFilter", "CapabilitiesFilter", "DriverFilter",
                "InstanceLocalityFilter", "SameBackendFilter", "DifferentBackendFilter", "JsonFilter")
WEIGHER_NAMES = ("CapacityWeigher", "AllocatedCapacityWeigher", "VolumeNumberWeigher", "GoodnessWeigher")


class VolumeOptions(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A ``[namespace:<name>]`` section of kind volume: Cinder's ``[DEFAULT]`` scheduler options, Cinder's defaults.

    Cinder options with no meaning here are refused by name (forbid_unknown_fields) rather than ignored:
    scheduler_driver (always the filter scheduler), scheduler_weight_handler (always the ordered handler).
    """

    scheduler_default_filters: list[str] = field(
        default_factory=lambda: ["AvailabilityZoneFilter", "CapacityFilter", "CapabilitiesFilter"])
    scheduler_default_weighers: list[str] = field(default_factory=lambda: ["CapacityWeigher"])
    capacity_weight_multiplier: float = 1.0
    allocated_capacity_weight_multiplier: float = -1.0
    volume_number_multiplier: float = -1.0
    goodness_weight_multiplier: float = 1.0  # Cinder has no option (its weigher's multiplier is 1.0); 1.0 is parity
    max_over_subscription_ratio: float | Literal["auto"] = 20.0
    storage_availability_zone: str = DEFAULT_AZ

    def __post_init__(self) -> None:
        for name in self.scheduler_default_filters:
            if name.rsplit(".", 1)[-1] not in FILTER_NAMES:
                raise ValueError(f"scheduler_default_filters: unknown filter {name!r}; "
                                 f"known: {', '.join(FILTER_NAMES)}")
        for name in self.scheduler_default_weighers:
            if name.rsplit(".", 1)[-1] not in WEIGHER_NAMES:
                raise ValueError(f"scheduler_default_weighers: unknown weigher {name!r}; "
                                 f"known: {', '.join(WEIGHER_NAMES)}")
        for key in ("capacity_weight_multiplier", "allocated_capacity_weight_multiplier",
                    "volume_number_multiplier", "goodness_weight_multiplier"):
            if not math.isfinite(getattr(self, key)):
                raise ValueError(f"{key} must be finite")
        if self.max_over_subscription_ratio != "auto" and not (
                math.isfinite(self.max_over_subscription_ratio) and self.max_over_subscription_ratio >= 0):
            raise ValueError("max_over_subscription_ratio must be a number >= 0 or 'auto'")


prepare_types(globals())  # build msgspec type info before any thread decodes (see gantt.model.prepare)
