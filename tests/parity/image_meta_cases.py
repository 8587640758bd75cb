"""Generated image properties for the ImageMeta refusal parity (issue 31 item 7): per property kind Nova's
ImageMetaProps knows (architecture, hypervisor type, VM mode, version predicate, enums, integers, booleans,
strings, uuids, lists of maps, legacy names, vmware_adaptertype) values it takes and values it refuses, in JSON's
types, beside keys Nova does not know. Gantt must refuse exactly what ``ImageMeta.from_dict`` refuses."""

from __future__ import annotations

import random
from typing import Any

VALUES: dict[str, list[Any]] = {
    "hw_architecture": ["x86_64", "amd64", "X86_64", "x64", "i386", "", 5, None, "aarch64"],
    "hw_emulation_architecture": ["aarch64", "arm64", "AARCH64"],
    "img_hv_type": ["qemu", "QEMU", "xapi", "xenserver", "kvm", 3],
    "hw_vm_mode": ["hvm", "pv", "baremetal", "HV", "paravirt"],
    "img_hv_requested_version": [">=8002000", "<6003000", "s>= 8", ">= 6.0, <7", "=1", ">=1.a", "1.0", "", 7,
                                 ">=1.0.post1", "== 2.0+local", ">=1.0,", "!=v2"],
    "hw_disk_bus": ["virtio", "nvme", "VIRTIO", "scsi", 1],
    "hw_video_model": ["vga", "qxl", "svga"],
    "hw_tpm_version": ["2.0", 2.0, "2"],
    "os_type": ["linux", "Linux", "windows"],
    "hw_cpu_cores": ["4", "4.5", 4, 4.5, "four", " 7 ", True, [], None],
    "img_version": ["2", "-1", "0x10", {}],
    "hw_boot_menu": ["yes", "true", "nonsense", 1, [], None],
    "os_distro": ["ubuntu", 5, 2.5, [], {}, True, None],
    "img_signature_certificate_uuid": ["not-a-uuid", "6f1c5f33-58f0-4f6c-9f4a-2a2b6b8c1d10", 5, None],
    "img_block_device_mapping": [[], [{"a": "b"}], [{"a": 1}], "[]", [1], [{"a": None}], [{"a": [1]}]],
    "architecture": ["x86_64", "x64"],
    "hypervisor_type": ["kvm", "esx"],
    "vm_mode": ["xen", "pvm"],
    "hypervisor_version_requires": [">=1", "1"],
    "xenapi_device_id": ["2", "two"],
    "ipxe_boot": ["true", None],
    "vmware_adaptertype": ["ide", "lsiLogic", "lsilogic", "busLogic", ""],
    "license_tier": ["gold", [1], None],
    "trait:CUSTOM_X": ["required", "nonsense"],
}


def cases(seed: int, count: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        keys = rng.sample(sorted(VALUES), rng.randrange(1, 4))
        out.append({key: rng.choice(VALUES[key]) for key in keys})
    return out
