"""Image properties as Nova's ImageMetaProps reads them: legacy names and canonical arch/hypervisor/vm-mode names.

Shared by the image filters (a helper, not a filter).
"""

from __future__ import annotations

from typing import Any

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

ARCHITECTURES = frozenset({
    "alpha", "armv6", "armv7l", "armv7b", "aarch64", "cris", "i686", "ia64", "lm32", "m68k", "microblaze",
    "microblazeel", "mips", "mipsel", "mips64", "mips64el", "openrisc", "parisc", "parisc64", "ppc", "ppcle",
    "ppc64", "ppc64le", "ppcemb", "s390", "s390x", "sh4", "sh4eb", "sparc", "sparc64", "unicore32", "x86_64",
    "xtensa", "xtensaeb",
})
HV_TYPES = frozenset({
    "baremetal", "bhyve", "docker", "fake", "hyperv", "ironic", "kqemu", "kvm", "lxc", "lxd", "openvz",
    "parallels", "phyp", "qemu", "test", "uml", "vbox", "vz", "vmware", "xen", "zvm", "prsm",
})
VM_MODES = frozenset({"hvm", "xen", "uml", "exe"})

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
