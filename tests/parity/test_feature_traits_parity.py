"""The guest features' required traits against Nova 34's own request filters (``accelerators_filter``,
``packed_virtqueue_filter``, ``ephemeral_encryption_filter``, ``virtio_sound_filter``, ``tpm_secret_security_filter``)
and its ``ResourceRequest`` (the vTPM's traits), on generated flavors × images.

The extra specs and image properties mix valid values, values in another case, lenient booleans, empty strings,
values outside Nova's enumerations, flavor and image disagreeing, ``trait:`` extra specs and image traits naming
the same traits, and keys Nova does not read. Per case Gantt's ``RequestContext`` must require exactly what Nova
asks Placement for (root provider's and request group's traits), keep the root-only ones apart (those
``isolate_aggregates`` does not count), or refuse where Nova refuses, for the same feature.
``GANTT_FEATURE_PARITY_CASES`` (default 3000).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

from gantt.compute.request import RequestContext
from gantt.config import Config
from gantt.model import InvalidRequest
from tests.parity import cases, reference
from tests.venvs import run_json

CASES = int(os.environ.get("GANTT_FEATURE_PARITY_CASES", "3000"))
DRIVER = Path(__file__).with_name("feature_traits_driver.py")

EXTRA_SPECS: dict[str, list[str]] = {
    "accel:device_profile": ["dp1", ""],
    "hw:virtio_packed_ring": ["true", "false", "True", "yes", "no", "1", "0", "on", "bogus", ""],
    "hw:ephemeral_encryption": ["true", "false", "yes", "no", "maybe", ""],
    "hw:ephemeral_encryption_format": ["luks", "luksv2", "plain", "LUKS", "aes", ""],
    "hw:sound_model": ["virtio", "ich9", "usb", "VIRTIO", "beep", ""],
    "hw:tpm_version": ["2.0", "1.2", "2.0", "3.0", ""],
    "hw:tpm_model": ["tpm-tis", "tpm-crb", "tpm-crb", "tpm-xyz", ""],
    "hw:tpm_secret_security": ["user", "host", "deployment", "nobody", ""],
    "trait:COMPUTE_NET_VIRTIO_PACKED": ["required"],
    "trait:COMPUTE_SECURITY_TPM_2_0": ["required"],
    "trait:CUSTOM_GOLD": ["required"],
    "hw:cpu_policy": ["shared"],
}
IMAGE_PROPS: dict[str, list[Any]] = {
    "hw_virtio_packed_ring": [True, False, "true", "no", "yes", "1", "bogus"],
    "hw_ephemeral_encryption": [True, False, "true", "false", "yes"],
    "hw_ephemeral_encryption_format": ["luks", "luksv2", "plain", "aes"],
    "hw_sound_model": ["virtio", "ich9", "usb", "beep"],
    "hw_tpm_version": ["2.0", "1.2", "3.0"],
    "hw_tpm_model": ["tpm-tis", "tpm-crb"],
    "hw_tpm_secret_security": ["host"],  # not a property Nova knows: ignored
    "trait:COMPUTE_SOUND_MODEL_VIRTIO": ["required"],
    "os_distro": ["ubuntu"],
}
# the Nova filter whose extra spec or property a Gantt refusal names
_BY_KEY = (("virtio_packed_ring", "packed_virtqueue_filter"), ("ephemeral_encryption", "ephemeral_encryption_filter"),
           ("sound_model", "virtio_sound_filter"), ("tpm", "tpm_secret_security_filter"))


def _cases(n: int) -> list[dict[str, Any]]:
    rng = random.Random("feature-traits")
    out = []
    for _ in range(n):
        specs = rng.sample(sorted(EXTRA_SPECS), rng.randrange(0, 5))
        props = rng.sample(sorted(IMAGE_PROPS), rng.randrange(0, 4))
        out.append({"extra_specs": {k: rng.choice(EXTRA_SPECS[k]) for k in specs},
                    "properties": {k: rng.choice(IMAGE_PROPS[k]) for k in props}})
    return out


def _kind(exc: InvalidRequest) -> str:
    if exc.message.startswith("image property "):
        return "image"
    field = exc.field or ""
    return next((name for key, name in _BY_KEY if key in field), f"other ({field})")


def _gantt(case: dict[str, Any], config: Config) -> dict[str, Any]:
    spec = cases._decode({"flavor": {"name": "f1", "vcpus": 1, "memory_mb": 512, "root_gb": 1,
                                     "extra_specs": case["extra_specs"]},
                          "image": {"id": "img-1", "name": "img", "disk_format": "qcow2",
                                    "properties": case["properties"]},
                          "project_id": "p1", "user_id": "u1"})
    try:
        ctx = RequestContext.build(spec, config, cases.NOW)
    except InvalidRequest as exc:
        return {"refused": _kind(exc), "message": exc.message}
    root_only = getattr(ctx, "feature_traits", ())  # (a field this suite came with)
    return {"required": sorted(ctx.required_traits), "root_only": sorted(root_only)}


def test_feature_traits_are_novas() -> None:
    generated = _cases(CASES)
    config = Config()
    ours = [_gantt(c, config) for c in generated]
    nova = run_json(reference.python(), DRIVER, {"cases": generated}, timeout=900)["results"]
    wrong: list[str] = []
    seen: dict[str, int] = {}
    for case, mine, theirs in zip(generated, ours, nova, strict=True):
        if "refused" in theirs:
            expected: dict[str, Any] = {"refused": theirs["refused"]}
            got: dict[str, Any] = {"refused": mine.get("refused")}
            seen[f"refused by {theirs['refused']}"] = seen.get(f"refused by {theirs['refused']}", 0) + 1
        else:
            root, group = set(theirs["root_required"]), set(theirs["group_required"])
            expected = {"required": sorted(root | group), "root_only": sorted(root - group)}
            got = {k: mine.get(k) for k in expected}
            for trait in root | group:
                seen[trait] = seen.get(trait, 0) + 1
        if got != expected:
            wrong.append(f"{case}: gantt {mine} nova {theirs}")
    print(f"\nfeature traits: {len(generated)} cases, {len(generated) - len(wrong)} agreed; "
          f"seen {sorted(seen.items())}")
    assert wrong[:20] == []
    # the cases must reach every feature and every refusal, or the agreement proves little
    for outcome in ("COMPUTE_ACCELERATORS", "COMPUTE_NET_VIRTIO_PACKED", "COMPUTE_EPHEMERAL_ENCRYPTION",
                    "COMPUTE_EPHEMERAL_ENCRYPTION_LUKSV2", "COMPUTE_SOUND_MODEL_VIRTIO",
                    "COMPUTE_SECURITY_TPM_SECRET_SECURITY_USER", "COMPUTE_SECURITY_TPM_SECRET_SECURITY_DEPLOYMENT",
                    "COMPUTE_SECURITY_TPM_CRB", "COMPUTE_SECURITY_TPM_1_2", "refused by image",
                    "refused by packed_virtqueue_filter", "refused by ephemeral_encryption_filter",
                    "refused by virtio_sound_filter", "refused by tpm_secret_security_filter"):
        assert seen.get(outcome, 0) >= 5, (outcome, seen)
