from __future__ import annotations

import pytest

from gantt import InvalidRequest, NoValidHost
from tests.conftest import make_scheduler, passing, request

F = ["ImagePropertiesFilter"]


def sched(**sections: dict) -> object:  # type: ignore[type-arg]
    return make_scheduler({
        "kvm": {"supported_instances": [["x86_64", "kvm", "hvm"], ["i686", "kvm", "hvm"]],
                "hypervisor_version": 6002000, "cpu_info": {"maxphysaddr": {"bits": 46}}},
        "arm": {"supported_instances": [["aarch64", "QEMU", "hvm"]], "hypervisor_version": 5000000},
        "xen": {"supported_instances": [["x86_64", "xapi", "pv"]], "hypervisor_version": 4001000},
        "none": {"supported_instances": []},
    }, filters=F, **sections)


def image(**props: object) -> dict:  # type: ignore[type-arg]
    return request(image={"id": "img", "properties": props})


def test_no_compute_properties_passes_everywhere() -> None:
    assert passing(sched(), image(os_distro="ubuntu")) == {"kvm", "arm", "xen", "none"}


def test_architecture_hypervisor_and_vm_mode_with_canonical_names() -> None:
    s = sched()
    assert passing(s, image(hw_architecture="x86_64")) == {"kvm", "xen"}
    assert passing(s, image(hw_architecture="amd64")) == {"kvm", "xen"}
    assert passing(s, image(hw_architecture="i386")) == {"kvm"}
    assert passing(s, image(img_hv_type="qemu")) == {"arm"}  # the host's "QEMU" is canonicalized too
    assert passing(s, image(img_hv_type="xen", hw_vm_mode="xen")) == {"xen"}  # xapi -> xen, pv -> xen
    assert passing(s, image(hw_vm_mode="hv", hw_architecture="aarch64")) == {"arm"}
    assert passing(s, image(hw_architecture="ppc64le")) == set()


def test_legacy_names_and_current_names_win() -> None:
    s = sched()
    assert passing(s, image(architecture="aarch64")) == {"arm"}
    assert passing(s, image(architecture="aarch64", hw_architecture="x86_64")) == {"kvm", "xen"}
    assert passing(s, image(hypervisor_type="kvm", vm_mode="hvm")) == {"kvm"}


def test_hypervisor_version_requirement() -> None:
    s = sched()
    assert passing(s, image(hw_architecture="x86_64", img_hv_requested_version=">=6.0")) == {"kvm"}
    assert passing(s, image(hw_architecture="x86_64", img_hv_requested_version=">=4.0, <6")) == {"xen"}
    assert passing(s, image(hw_architecture="x86_64", hypervisor_version_requires="==6.2")) == {"kvm"}
    # a version alone (no arch/hv/vm asked) restricts nothing, as in Nova
    assert passing(s, image(img_hv_requested_version=">=99")) == {"kvm", "arm", "xen", "none"}


def test_maxphysaddr_bits() -> None:
    s = sched()
    assert passing(s, image(hw_architecture="x86_64", hw_maxphysaddr_bits=48)) == {"xen"}  # xen does not say
    assert passing(s, image(hw_architecture="x86_64", hw_maxphysaddr_bits=40)) == {"kvm", "xen"}


def test_default_architecture_option() -> None:
    s = sched(filter_scheduler={"image_properties_default_architecture": "aarch64"})
    assert passing(s, image()) == {"arm"}
    assert passing(s, image(hw_architecture="x86_64")) == {"kvm", "xen"}


@pytest.mark.parametrize(("props", "field"), [
    ({"hw_architecture": "vax"}, "$.image.properties.hw_architecture"),
    ({"hypervisor_type": "cloud"}, "$.image.properties.hypervisor_type"),
    ({"hw_vm_mode": "paravirt"}, "$.image.properties.hw_vm_mode"),
    ({"hw_architecture": "x86_64", "img_hv_requested_version": "six"}, "$.image.properties.img_hv_requested_version"),
])
def test_bad_properties_name_the_field(props: dict, field: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(InvalidRequest) as err:
        sched().select_destinations(image(**props))
    assert err.value.field == field


def test_explanation() -> None:
    with pytest.raises(NoValidHost) as err:
        sched().select_destinations(image(hw_architecture="s390x"))
    assert "ImagePropertiesFilter removed 4" in str(err.value)
