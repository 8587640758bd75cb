"""Image properties as Nova's ImageMetaProps reads them: legacy names and canonical arch/hypervisor/vm-mode names.

Shared by the image filters (a helper, not a filter).
"""

from __future__ import annotations

import re
from typing import Any

from gantt.model import ARCHITECTURES, HV_TYPES, VM_MODES

# Pre-Liberty property names and the names that replaced them; when both are given the current one wins.
LEGACY_NAMES = {
    "architecture": "hw_architecture",
    "hypervisor_type": "img_hv_type",
    "vm_mode": "hw_vm_mode",
    "hypervisor_version_requires": "img_hv_requested_version",
    "owner_id": "img_owner_id",
    "auto_disk_config": "hw_auto_disk_config",
    "ipxe_boot": "hw_ipxe_boot",
    "vmware_disktype": "hw_disk_type",
    "vmware_image_version": "img_version",
    "vmware_ostype": "os_distro",
    "vmware_linked_clone": "img_linked_clone",
    "xenapi_device_id": "hw_device_id",
    "xenapi_image_compression_level": "img_compression_level",
    "xenapi_use_agent": "img_use_agent",
    "xenapi_skip_agent_inject_ssh": "os_skip_agent_inject_ssh",
    "xenapi_skip_agent_inject_files_at_boot": "os_skip_agent_inject_files_at_boot",
    "cache_in_nova": "img_cache_in_nova",
    "bittorrent": "img_bittorrent",
    "mappings": "img_mappings",
    "block_device_mapping": "img_block_device_mapping",
    "bdm_v2": "img_bdm_v2",
    "root_device_name": "img_root_device_name",
}

_ARCH_ALIASES = {"i386": "i686", "i486": "i686", "i586": "i686", "x86_32": "i686", "x86_32p": "i686",
                 "amd64": "x86_64"}
_HV_ALIASES = {"xapi": "xen"}
_VM_MODE_ALIASES = {"pv": "xen", "hv": "hvm", "baremetal": "hvm"}


def current_names(props: dict[str, Any]) -> dict[str, Any]:
    """Properties under their current names: legacy keys are renamed (and dropped), current keys win."""
    if not any(key in LEGACY_NAMES for key in props):
        return props
    out = {LEGACY_NAMES[key]: value for key, value in props.items() if key in LEGACY_NAMES}
    out.update((key, value) for key, value in props.items() if key not in LEGACY_NAMES)
    return out


def canonical_arch(name: str) -> str:
    lower = name.lower()
    return _ARCH_ALIASES.get(lower, lower)


def canonical_hv_type(name: str) -> str:
    lower = name.lower()
    return _HV_ALIASES.get(lower, lower)


def canonical_vm_mode(name: str) -> str:
    lower = name.lower()
    return _VM_MODE_ALIASES.get(lower, lower)


# ------------------------------------------------------------------------------------ what ImageMeta refuses
# Nova builds the request's ImageMeta from the image's properties (ImageMetaProps.from_dict) before it schedules:
# every property Nova knows is coerced to its field's type, and one that does not coerce fails the request. The
# kinds below are those fields' types; a property Nova does not know is kept as it is and never refused.

_ENUMS: dict[str, frozenset[str]] = {name: frozenset(values.split()) for name, values in {
    "hw_cdrom_bus": "fdc ide lxc sata scsi uml usb virtio xen",
    "hw_disk_bus": "fdc ide lxc sata scsi uml usb virtio xen",
    "hw_floppy_bus": "fdc ide lxc sata scsi uml usb virtio xen",
    "hw_rescue_bus": "fdc ide lxc sata scsi uml usb virtio xen",
    "hw_cpu_policy": "dedicated mixed shared",
    "hw_cpu_thread_policy": "isolate prefer require",
    "hw_ephemeral_encryption_format": "luks luksv2 plain",
    "hw_firmware_type": "bios uefi",
    "hw_input_bus": "usb virtio",
    "hw_maxphysaddr_mode": "emulate passthrough",
    "hw_mem_encryption_model": "amd-sev amd-sev-es amd-sev-snp intel-tdx",
    "hw_pci_numa_affinity_policy": "legacy preferred required socket",
    "hw_pointer_model": "usbtablet",
    "hw_rescue_device": "cdrom disk floppy fs lun",
    "hw_rng_model": "virtio",
    "hw_scsi_model": "buslogic ibmvscsi lsilogic lsisas1068 lsisas1078 virtio-scsi vmpvscsi",
    "hw_sound_model": "ac97 es1370 ich6 ich9 pcspk sb16 usb virtio",
    "hw_tpm_model": "tpm-crb tpm-tis",
    "hw_tpm_version": "1.2 2.0",
    "hw_usb_model": "nec-xhci none qemu-xhci",
    "hw_video_model": "bochs cirrus gop none qxl vga virtio vmvga xen",
    "hw_vif_model": "e1000 e1000e igb lan9118 ne2k_pci netfront pcnet rtl8139 spapr-vlan sriov virtio vmxnet vmxnet3",
    "hw_viommu_model": "auto intel smmuv3 virtio",
    "hw_watchdog_action": "disabled none pause poweroff reset",
    "img_config_drive": "mandatory optional",
    "img_signature_hash_method": "SHA-224 SHA-256 SHA-384 SHA-512",
    "img_signature_key_type": "DSA ECC_SECP384R1 ECC_SECP521R1 ECC_SECT409K1 ECC_SECT409R1 ECC_SECT571K1 "
                              "ECC_SECT571R1 RSA-PSS",
    "os_secure_boot": "disabled optional required",
    "os_type": "linux windows",
}.items()}
INTEGERS = frozenset({
    "hw_cpu_cores", "hw_cpu_max_cores", "hw_cpu_max_sockets", "hw_cpu_max_threads", "hw_cpu_sockets",
    "hw_cpu_threads", "hw_device_id", "hw_maxphysaddr_bits", "hw_numa_nodes", "hw_redirected_usb_ports",
    "hw_serial_port_count", "hw_video_ram", "img_compression_level", "img_version",
})
BOOLEANS = frozenset({
    "hw_boot_menu", "hw_ephemeral_encryption", "hw_firmware_stateless", "hw_ipxe_boot", "hw_locked_memory",
    "hw_mem_encryption", "hw_pmu", "hw_qemu_guest_agent", "hw_time_hpet", "hw_vif_multiqueue_enabled",
    "hw_virtio_packed_ring", "img_bdm_v2", "img_bittorrent", "img_cache_in_nova", "img_hide_hypervisor_id",
    "img_linked_clone", "img_use_agent", "os_require_quiesce", "os_skip_agent_inject_files_at_boot",
    "os_skip_agent_inject_ssh",
})
_STRINGS = frozenset({
    "hw_auto_disk_config", "hw_cpu_realtime_mask", "hw_disk_type", "hw_machine_type", "hw_mem_page_size",
    "img_owner_id", "img_root_device_name", "img_signature", "os_admin_user", "os_command_line", "os_distro",
})
_UUIDS = frozenset({"hw_ephemeral_encryption_secret_uuid", "img_signature_certificate_uuid"})
_LISTS_OF_MAPS = frozenset({"img_block_device_mapping", "img_mappings"})

# A version as PEP 440 writes one (what Nova's VersionPredicate accepts after its operator), any case.
_PEP440 = re.compile(
    r"v?(\d+!)?\d+(\.\d+)*"
    r"([-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?\d*)?"
    r"(-\d+|[-_.]?(post|rev|r)[-_.]?\d*)?"
    r"([-_.]?dev[-_.]?\d*)?"
    r"(\+[a-z0-9]+([-_.][a-z0-9]+)*)?", re.IGNORECASE)
_PREDICATE = re.compile(r"^\s*(<=|>=|<|>|!=|==)\s*(\S+)\s*$")


def _text(value: Any) -> bool:
    """What Nova's string fields take (and turn into text): a string or a number."""
    return isinstance(value, str | int | float)


def _integer(value: Any) -> bool:
    """Whether Python's int() takes ``value``, as Nova's IntegerField coerces it."""
    if isinstance(value, bool | int):
        return True
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, str):
        try:
            int(value)
        except ValueError:
            return False
        return True
    return False


def _predicate(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    for part in value.split(","):
        match = _PREDICATE.match(part)
        if match is None or _PEP440.fullmatch(match.group(2)) is None:
            return False
    return True


# Enums whose field lower-cases the value first and maps older names (Nova's OSType, SCSIModel, VIFModel).
_FOLDED: dict[str, dict[str, str]] = {
    "os_type": {},
    "hw_scsi_model": {"lsilogicsas": "lsisas1068", "paravirtual": "vmpvscsi"},
    "hw_vif_model": {"virtuale1000": "e1000", "virtuale1000e": "e1000e", "virtualpcnet32": "pcnet",
                     "virtualsriovethernetcard": "sriov", "virtualvmxnet": "vmxnet", "virtualvmxnet3": "vmxnet3"},
}
# Each field Nova knows and the kind of check its type makes (one lookup per property).
_KIND: dict[str, str] = {
    "hw_architecture": "arch", "hw_emulation_architecture": "arch", "img_hv_type": "hv_type",
    "hw_vm_mode": "vm_mode", "img_hv_requested_version": "predicate",
    **dict.fromkeys(_ENUMS, "enum"), **dict.fromkeys(INTEGERS, "integer"), **dict.fromkeys(BOOLEANS, "any"),
    **dict.fromkeys(_STRINGS, "string"), **dict.fromkeys(_UUIDS, "any"), **dict.fromkeys(_LISTS_OF_MAPS, "maps"),
}


def _coerces(name: str, value: Any) -> str | None:
    """Why the field ``name`` refuses ``value`` (None: it takes it, or Nova does not know ``name``)."""
    kind = _KIND.get(name)
    if kind is None:
        return None
    if value is None:
        return "must not be null"
    if kind == "string":
        return None if _text(value) else "must be a string"
    if kind == "any":  # booleans take anything but null, and so do uuids (Nova only warns)
        return None
    if kind == "arch":
        ok = isinstance(value, str) and canonical_arch(value) in ARCHITECTURES
        return None if ok else f"{value!r} is not an architecture Nova knows"
    if kind == "hv_type":
        ok = isinstance(value, str) and canonical_hv_type(value) in HV_TYPES
        return None if ok else f"{value!r} is not a hypervisor type Nova knows"
    if kind == "vm_mode":
        ok = isinstance(value, str) and canonical_vm_mode(value) in VM_MODES
        return None if ok else f"{value!r} is not a VM mode Nova knows"
    if kind == "predicate":
        return None if _predicate(value) else f"{value!r} is not a version predicate such as '>=6.0, <7'"
    if kind == "enum":
        if name in _FOLDED and isinstance(value, str):
            lower = value.lower()
            value = _FOLDED[name].get(lower, lower)
        if isinstance(value, str) and value in _ENUMS[name]:
            return None
        return f"{value!r} is not one of {', '.join(sorted(_ENUMS[name]))}"
    if kind == "integer":
        return None if _integer(value) else f"{value!r} is not an integer"
    ok = isinstance(value, list) and all(  # a list of maps
        isinstance(item, dict) and all(v is None or _text(v) for v in item.values()) for item in value)
    return None if ok else "must be a list of objects of strings"


_LEGACY_KEYS = frozenset(LEGACY_NAMES)


def refusal(props: dict[str, Any]) -> tuple[str, str] | None:
    """The first property Nova's ImageMetaProps.from_dict would refuse, as (key, why); None when it takes them
    all. Legacy names are read first (a bad legacy value fails even beside a good current one), as Nova does."""
    if not _LEGACY_KEYS.isdisjoint(props):
        for legacy, current in LEGACY_NAMES.items():
            if legacy in props:
                why = _coerces(current, props[legacy])
                if why is not None:
                    return legacy, why
    adapter = props.get("vmware_adaptertype")
    if adapter and adapter != "ide":  # Nova reads it as hw_disk_bus scsi with this SCSI model
        why = _coerces("hw_scsi_model", adapter)
        if why is not None:
            return "vmware_adaptertype", why
    for key, value in props.items():  # (the NUMA lists come from hw_numa_*.N keys, traits from trait:* keys:
        why = _coerces(key, value)       # neither their own names nor the legacy ones are in _KIND)
        if why is not None:
            return key, why
    return None
