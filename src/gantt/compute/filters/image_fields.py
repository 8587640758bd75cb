"""Image properties as the values Nova's ``ImageMetaProps`` object holds: known fields only, typed, canonical.

Nova never reads an image's raw properties in the scheduler: the request's image is an ``ImageMetaProps``, built
from the properties once (legacy names first, then current names, which win). A key that is not one of its
fields is dropped; a value is coerced by its field's type: a flexible boolean (``"yes"``, ``"1"``, ``"true"`` ->
``True``, anything else ``False``), an integer, a string, an enumeration (some canonicalized: ``amd64`` ->
``x86_64``, ``KVM`` -> ``kvm``, ``Windows`` -> ``windows``, VMware's legacy NIC and SCSI names). Filters that
compare image properties as text (AggregateImagePropertiesIsolation) compare those values, as ``str()`` makes
them (``True``, not ``true``).

A value Nova's coercion refuses (``hw_video_ram: "lots"``) makes Nova refuse the whole request when it builds the
ImageMeta; here it stays as given (the refusal is the request validation's business, not a filter's).
The list-valued fields (``hw_numa_cpus``, ``hw_numa_mem``, the block device mappings, ``traits_required``) are
left out: their ``str()`` is a Python list's, which no aggregate value names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Nova's boolean and integer ImageMetaProps fields: one table, image_meta's (which refuses what Nova refuses)
from gantt.compute.filters.image_meta import (
    BOOLEANS,
    INTEGERS,
    LEGACY_NAMES,
    canonical_arch,
    canonical_hv_type,
    canonical_vm_mode,
)

# Strings, UUIDs, version predicates and the enumerations Nova keeps as given (only checked against their values).
TEXTS = frozenset({
    "hw_auto_disk_config", "hw_cpu_realtime_mask", "hw_disk_type", "hw_ephemeral_encryption_secret_uuid",
    "hw_machine_type", "hw_mem_page_size", "img_hv_requested_version", "img_owner_id", "img_root_device_name",
    "img_signature", "img_signature_certificate_uuid", "os_admin_user", "os_command_line", "os_distro",
    "hw_cdrom_bus", "hw_cpu_policy", "hw_cpu_thread_policy", "hw_disk_bus", "hw_ephemeral_encryption_format",
    "hw_firmware_type", "hw_floppy_bus", "hw_input_bus", "hw_maxphysaddr_mode", "hw_mem_encryption_model",
    "hw_pci_numa_affinity_policy", "hw_pointer_model", "hw_rescue_bus", "hw_rescue_device", "hw_rng_model",
    "hw_sound_model", "hw_tpm_model", "hw_tpm_version", "hw_usb_model", "hw_video_model", "hw_viommu_model",
    "hw_watchdog_action", "img_config_drive", "img_signature_hash_method", "img_signature_key_type",
    "os_secure_boot",
})
_SCSI_ALIASES = {"lsilogicsas": "lsisas1068", "paravirtual": "vmpvscsi"}
_VIF_ALIASES = {"virtuale1000": "e1000", "virtuale1000e": "e1000e", "virtualpcnet32": "pcnet",
                "virtualsriovethernetcard": "sriov", "virtualvmxnet": "vmxnet", "virtualvmxnet3": "vmxnet3"}
# Enumerations whose values Nova canonicalizes before it checks them.
CANONICAL: dict[str, Callable[[str], str]] = {
    "hw_architecture": canonical_arch,
    "hw_emulation_architecture": canonical_arch,
    "img_hv_type": canonical_hv_type,
    "hw_vm_mode": canonical_vm_mode,
    "os_type": str.lower,
    "hw_scsi_model": lambda v: _SCSI_ALIASES.get(v.lower(), v.lower()),
    "hw_vif_model": lambda v: _VIF_ALIASES.get(v.lower(), v.lower()),
}
FIELDS = BOOLEANS | INTEGERS | TEXTS | frozenset(CANONICAL)
_TRUE = frozenset({"1", "t", "true", "on", "y", "yes"})


def flexible_bool(value: Any) -> bool:
    """oslo's ``bool_from_string`` without ``strict``: a known true word (any case) is True, all else False."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in _TRUE


def _typed(key: str, value: Any) -> Any:
    try:
        if key in BOOLEANS:
            return flexible_bool(value)
        if key in INTEGERS:
            return int(value)
        if key in CANONICAL:
            return CANONICAL[key](str(value))
    except (TypeError, ValueError):
        return value  # Nova refuses the request for it; left to the request's validation
    return str(value)


def typed_properties(props: dict[str, Any]) -> dict[str, Any]:
    """What ``ImageMetaProps.from_dict(props)`` holds, as a dict of its fields that are set."""
    raw: dict[str, Any] = {}
    for legacy, current in LEGACY_NAMES.items():
        if legacy in props:
            raw[current] = props[legacy]
    adapter = props.get("vmware_adaptertype")
    if adapter == "ide":
        raw["hw_disk_bus"] = "ide"
    elif adapter:
        raw["hw_disk_bus"] = "scsi"
        raw["hw_scsi_model"] = adapter
    raw.update((key, value) for key, value in props.items() if key in FIELDS)
    return {key: _typed(key, value) for key, value in raw.items() if key in FIELDS}
