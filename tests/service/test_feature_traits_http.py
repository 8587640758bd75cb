"""The guest features Nova's request filters turn into required traits (packed virtqueues, ephemeral encryption, a
virtio sound card, a vTPM's secret security, Cyborg device profiles), through a real ``gantt serve``: a request
lands only on a host with the trait, and what Nova refuses is a 400 naming the extra spec, nothing written.
(Every combination against Nova's own functions: tests/parity/test_feature_traits_parity.py.)"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.service.test_bad_input import SPEC, STATS, _state, _unhandled, http  # noqa: F401 (fixture)

FEATURES = {
    "COMPUTE_NET_VIRTIO_PACKED": {"hw:virtio_packed_ring": "true"},
    "COMPUTE_SOUND_MODEL_VIRTIO": {"hw:sound_model": "virtio"},
    "COMPUTE_EPHEMERAL_ENCRYPTION_LUKS": {"hw:ephemeral_encryption": "yes", "hw:ephemeral_encryption_format": "luks"},
    "COMPUTE_SECURITY_TPM_SECRET_SECURITY_HOST": {"hw:tpm_version": "2.0", "hw:tpm_secret_security": "host"},
    "COMPUTE_ACCELERATORS": {"accel:device_profile": "gpu-dp"},
}


@pytest.mark.parametrize("trait", sorted(FEATURES))
def test_a_feature_lands_only_on_a_host_with_its_trait(http: httpx.Client, trait: str) -> None:  # noqa: F811
    host = f"feat-{trait.lower()}"
    traits = [trait, "COMPUTE_EPHEMERAL_ENCRYPTION", "COMPUTE_SECURITY_TPM_2_0", "COMPUTE_SECURITY_TPM_TIS"]
    http.post("/v1/resource-stats", json={"name": host, "stats": {**STATS, "traits": traits}}).raise_for_status()
    body = {**SPEC, "force_hosts": [], "instance_uuids": [f"vm-{host}"],
            "flavor": {**SPEC["flavor"], "extra_specs": FEATURES[trait]}}
    response = http.post("/v1/select_destinations", json=body)
    assert response.status_code == 200, response.text
    [[chosen, *_]] = response.json()["selections"]
    assert chosen["host"] == host  # every other host of the session lacks the trait
    http.delete(f"/v1/allocations/vm-{host}").raise_for_status()
    http.delete(f"/v1/hosts/{host}").raise_for_status()
    refused = http.post("/v1/select_destinations", json={**body, "instance_uuids": [f"vm2-{host}"]})
    assert refused.status_code == 409 and refused.json()["explanation"]["reason"] == "TraitsFilter", refused.text


@pytest.mark.parametrize(("extra_specs", "props", "field"), [
    ({"hw:virtio_packed_ring": "true"}, {"hw_virtio_packed_ring": "no"}, "$.flavor.extra_specs.hw:virtio_packed_ring"),
    ({"hw:sound_model": "beep"}, {}, "$.flavor.extra_specs.hw:sound_model"),
    ({"hw:sound_model": "ich9"}, {"hw_sound_model": "virtio"}, "$.flavor.extra_specs.hw:sound_model"),
    ({"hw:ephemeral_encryption": "true", "hw:ephemeral_encryption_format": "aes"}, {},
     "$.flavor.extra_specs.hw:ephemeral_encryption_format"),
    ({}, {"hw_ephemeral_encryption": True, "hw_ephemeral_encryption_format": "aes"},
     "$.image.properties.hw_ephemeral_encryption_format"),
    ({"hw:tpm_version": "3.0"}, {}, "$.flavor.extra_specs.hw:tpm_version"),
    ({"hw:tpm_model": "tpm-crb"}, {"hw_tpm_version": "1.2"}, "$.flavor.extra_specs.hw:tpm_model"),
    ({"hw:tpm_version": "2.0", "hw:tpm_secret_security": "nobody"}, {},
     "$.flavor.extra_specs.hw:tpm_secret_security"),
])
def test_what_nova_refuses_is_a_400_naming_the_extra_spec(http: httpx.Client, extra_specs: dict[str, str],  # noqa: F811
                                                          props: dict[str, Any], field: str) -> None:
    before = _state(http), _unhandled(http)
    body = {**SPEC, "flavor": {**SPEC["flavor"], "extra_specs": extra_specs}, "image": {"properties": props}}
    response = http.post("/v1/select_destinations", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field
    assert (_state(http), _unhandled(http)) == before
