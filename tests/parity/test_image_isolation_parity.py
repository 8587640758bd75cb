"""AggregateImagePropertiesIsolation against Nova 34's own filter and its real ImageMeta, on generated images ×
aggregates.

Nova reads the image through ``ImageMetaProps.from_dict`` (``nova_driver._spec``): unknown keys dropped, legacy
names renamed, values typed and canonicalized; the filter then compares ``str()`` of the typed value with the
aggregate's values. The generated images use every one of those paths (aliases such as ``amd64``, ``xapi``,
``pv``, VMware's adapter and NIC names, boolean words, integers, false values, keys Nova does not know) against
aggregates naming current, legacy and unknown keys, with and without a namespace (``hw`` + ``_`` makes the
namespace itself a field prefix). Per request the passing nodes must be Nova's.
``GANTT_IMAGE_PARITY_SEEDS`` × ``GANTT_IMAGE_PARITY_REQUESTS`` (default 20 × 50).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np

from gantt.compute.filters import FILTERS
from gantt.compute.request import RequestContext
from tests.parity import cases, reference
from tests.venvs import run_json

SEEDS = int(os.environ.get("GANTT_IMAGE_PARITY_SEEDS", "20"))
REQUESTS = int(os.environ.get("GANTT_IMAGE_PARITY_REQUESTS", "50"))
DRIVER = Path(__file__).with_name("nova_driver.py")
NAME = "AggregateImagePropertiesIsolation"

AGGREGATE_KEYS: dict[str, list[str]] = {
    "hw_architecture": ["x86_64", "aarch64", "x86_64,aarch64", "i686"],
    "architecture": ["x86_64"],
    "img_hv_type": ["kvm", "qemu", "xen"],
    "hypervisor_type": ["kvm"],
    "hw_vm_mode": ["hvm", "xen"],
    "os_type": ["linux", "windows"],
    "os_distro": ["ubuntu", "rhel"],
    "hw_boot_menu": ["true", "True", "False", "True,true"],
    "hw_qemu_guest_agent": ["yes", "True"],
    "hw_video_ram": ["64", "128"],
    "hw_disk_bus": ["virtio", "scsi", "ide"],
    "hw_scsi_model": ["lsisas1068", "virtio-scsi", "vmpvscsi"],
    "hw_vif_model": ["e1000", "virtio"],
    "hw_cpu_policy": ["dedicated", "shared"],
    "license_tier": ["gold", "silver"],
    "ssd": ["true"],
    "ns.os_type": ["linux"],
}
IMAGE_PROPS: dict[str, list[Any]] = {
    "hw_architecture": ["x86_64", "amd64", "AArch64", "aarch64", "i386"],
    "architecture": ["x86_64", "amd64"],
    "img_hv_type": ["kvm", "KVM", "qemu", "xapi"],
    "hypervisor_type": ["QEMU", "kvm"],
    "hw_vm_mode": ["hvm", "HV", "xen", "pv"],
    "vm_mode": ["hvm", "xen"],
    "os_type": ["linux", "Windows", "LINUX"],
    "os_distro": ["ubuntu", "rhel"],
    "hw_boot_menu": ["true", "false", "yes", "1", "no", True, False],
    "hw_qemu_guest_agent": ["yes", "no", "on"],
    "hw_video_ram": ["64", "0", 128],
    "hw_disk_bus": ["virtio", "scsi"],
    "vmware_adaptertype": ["ide", "lsiLogicsas", "paravirtual"],
    "hw_scsi_model": ["virtio-scsi", "lsilogicsas"],
    "hw_vif_model": ["e1000", "VirtualE1000", "virtio"],
    "hw_cpu_policy": ["dedicated", "shared"],
    "license_tier": ["gold", "bronze"],
    "ssd": ["false", "true"],
}


def _cloud(seed: int) -> dict[str, Any]:
    rng = random.Random(f"image-isolation-{seed}")
    hosts = [cases._host(rng, i) for i in range(rng.randrange(4, 10))]
    aggregates = []
    for agg_id in range(1, rng.randrange(2, 6)):
        members = rng.sample(hosts, rng.randrange(1, len(hosts)))
        keys = rng.sample(sorted(AGGREGATE_KEYS), rng.randrange(1, 4))
        metadata = {key: rng.choice(AGGREGATE_KEYS[key]) for key in keys}
        for host in members:
            host["aggregates"].append(agg_id)
        aggregates.append({"id": agg_id, "uuid": f"aaaaaaaa-0000-0000-0000-{agg_id:012d}", "name": f"agg{agg_id}",
                           "hosts": [h["host"] for h in members], "metadata": metadata})
    options = cases._options(rng, hosts)
    namespace, separator = rng.choice([(None, "."), (None, "."), ("hw", "_"), ("ns", ".")])
    options["filter_scheduler"]["aggregate_image_properties_isolation_namespace"] = namespace
    options["filter_scheduler"]["aggregate_image_properties_isolation_separator"] = separator
    requests = []
    for k in range(REQUESTS):
        keys = rng.sample(sorted(IMAGE_PROPS), rng.randrange(1, 6))
        props = {key: rng.choice(IMAGE_PROPS[key]) for key in keys}
        spec = {"flavor": {"name": "m1.small", "vcpus": 1, "memory_mb": 256, "root_gb": 1, "extra_specs": {}},
                "image": {"id": "img-1", "properties": props}, "project_id": "p1", "user_id": "u1",
                "instance_uuids": [f"req-{k}"], "scheduler_hints": {}}
        requests.append({"spec": spec, "filters": [NAME], "weigh": {}})
    return {"seed": seed, "hosts": hosts, "aggregates": aggregates, "options": options, "requests": requests}


def _gantt(c: dict[str, Any]) -> list[list[str]]:
    sched = cases._scheduler(c, [])
    table, config = sched.table, sched.config
    out = []
    for case in c["requests"]:
        ctx = RequestContext.build(cases._decode(case["spec"]), config, cases.NOW)
        mask = FILTERS[NAME](config).mask(table, ctx)
        rows = range(table.n) if mask is None else np.flatnonzero(mask[:table.n]).tolist()
        out.append(sorted(table.node_names[r] for r in rows))
    return out


def test_image_property_isolation_reads_the_image_as_novas_image_meta() -> None:
    clouds = [_cloud(seed) for seed in range(SEEDS)]
    ours = [nodes for c in clouds for nodes in _gantt(c)]
    nova = [r["filters"][NAME] for r in run_json(reference.python(), DRIVER, {"clouds": clouds},
                                                 timeout=900)["results"]]
    specs = [case["spec"] for c in clouds for case in c["requests"]]
    wrong = [f"case {i} {specs[i]['image']['properties']}: gantt {o} nova {n}"
             for i, (o, n) in enumerate(zip(ours, nova, strict=True)) if o != n]
    hosts = sum(len(c["hosts"]) for c in clouds for _ in c["requests"])
    excluded = sum(len(c["hosts"]) for c in clouds for _ in c["requests"]) - sum(len(n) for n in nova)
    print(f"\nfilter {NAME} (images x aggregates): {len(ours)} cases, {len(ours) - len(wrong)} agreed; "
          f"{excluded} of {hosts} host verdicts exclude")
    assert wrong[:20] == []
    assert excluded > hosts // 20  # the cases must make the filter exclude hosts, not pass everything
