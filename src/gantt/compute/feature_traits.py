"""Guest features a flavor or image asks for, as the root provider's required traits (Nova 34's request filters
``accelerators_filter``, ``packed_virtqueue_filter``, ``ephemeral_encryption_filter``, ``virtio_sound_filter`` and
``tpm_secret_security_filter``, which read ``nova.virt.hardware``'s constraints), and the vTPM's version and model
(``ResourceRequest._translate_vtpm_request``).

Nova runs the request filters on every request but a rebuild, whatever the options, after the aggregate filters:
the traits they add are the root provider's (``root_required``), so ``isolate_aggregates`` never counts them as
asked for. The vTPM's traits are the unnumbered request group's, which it does count. They read the
flavor's ``hw:`` extra specs (text, read by oslo's lenient ``bool_from_string``) and the image's ``hw_``
properties as Nova's ImageMetaProps holds them (typed; a property its field refuses was refused before this).

What Nova refuses is refused here, by the same rule, as InvalidRequest naming the extra spec or property: a flavor
and an image that set one feature to different values (FlavorImageConflict), a value outside Nova's enumeration
(Invalid), a TPM model CRB with a TPM version other than 2.0, and a TPM secret security Nova's scheduler does not
know (RequestFilterFailed, which Nova answers NoValidHost). Nova checks them in its filters' order, and so does
this module: the first one found is the one named.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import os_traits

from gantt.compute.filters.image_fields import flexible_bool
from gantt.model import InvalidRequest

# nova.objects.fields' enumerations these features read
EPHEMERAL_FORMATS = ("plain", "luks", "luksv2")
SOUND_MODELS = ("sb16", "es1370", "pcspk", "ac97", "ich6", "ich9", "usb", "virtio")
TPM_VERSIONS = ("1.2", "2.0")
TPM_MODELS = ("tpm-tis", "tpm-crb")
TPM_SECRET_SECURITY: dict[str, str] = {"user": os_traits.COMPUTE_SECURITY_TPM_SECRET_SECURITY_USER,
                       "host": os_traits.COMPUTE_SECURITY_TPM_SECRET_SECURITY_HOST,
                       "deployment": os_traits.COMPUTE_SECURITY_TPM_SECRET_SECURITY_DEPLOYMENT}

# Every key any of them reads: a request with none of them (nearly all) costs two set tests.
FLAVOR_KEYS = frozenset({"accel:device_profile", "hw:virtio_packed_ring", "hw:ephemeral_encryption",
                         "hw:ephemeral_encryption_format", "hw:sound_model", "hw:tpm_version", "hw:tpm_model"})
IMAGE_KEYS = frozenset({"hw_virtio_packed_ring", "hw_ephemeral_encryption", "hw_ephemeral_encryption_format",
                        "hw_sound_model", "hw_tpm_version", "hw_tpm_model"})


def feature_traits(extra_specs: Mapping[str, str],
                   image_props: Mapping[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    """(the root provider's traits, the request group's traits) the flavor's extra specs and the image's properties
    ask for, checked in Nova's filters' order. Raises InvalidRequest where Nova refuses the request."""
    if FLAVOR_KEYS.isdisjoint(extra_specs) and IMAGE_KEYS.isdisjoint(image_props):
        return frozenset(), frozenset()
    both = _Both(extra_specs, image_props)
    traits: set[str] = set()
    if extra_specs.get("accel:device_profile"):
        traits.add(os_traits.COMPUTE_ACCELERATORS)  # hosts whose nova-compute can take a Cyborg device profile
    if _packed_virtqueue(both):
        traits.add(os_traits.COMPUTE_NET_VIRTIO_PACKED)
    traits |= _ephemeral_encryption(both)
    if _sound_model(both) == "virtio":
        traits.add(os_traits.COMPUTE_SOUND_MODEL_VIRTIO)
    vtpm = _vtpm(both)
    if vtpm:
        traits.add(_tpm_secret_security(extra_specs))
    return frozenset(traits), frozenset(vtpm)


class _Both:
    """One feature's flavor extra spec ``hw:<key>`` and image property ``hw_<key>``, read as Nova reads them."""

    def __init__(self, extra_specs: Mapping[str, str], image_props: Mapping[str, Any]) -> None:
        self.extra_specs = extra_specs
        self.image_props = image_props

    def raw(self, key: str) -> tuple[Any, Any]:
        return self.extra_specs.get(f"hw:{key}"), self.image_props.get(f"hw_{key}")

    def booleans(self, key: str) -> bool | None:
        """A boolean both may set (None: neither does); different values are a conflict."""
        flavor, image = self.raw(key)
        flavor_value = None if flavor is None else flexible_bool(flavor)
        image_value = None if image is None else flexible_bool(image)
        if flavor_value is not None and image_value is not None and flavor_value != image_value:
            raise self.conflict(key, flavor, image)
        return flavor_value or image_value

    def unique(self, key: str) -> Any:
        """A value both may set: one set (non-empty) on each side must be the same; the flavor's wins."""
        flavor, image = self.raw(key)
        if image is not None:
            image = str(image)  # an enumeration's value, as ImageMetaProps keeps it
        if flavor and image and flavor != image:
            raise self.conflict(key, flavor, image)
        return flavor or image

    def invalid(self, key: str, why: str) -> InvalidRequest:
        flavor, _ = self.raw(key)
        where = f"$.flavor.extra_specs.hw:{key}" if flavor else f"$.image.properties.hw_{key}"
        return InvalidRequest(why, field=where)

    @staticmethod
    def conflict(key: str, flavor: Any, image: Any) -> InvalidRequest:
        return InvalidRequest(f"the flavor's extra spec hw:{key}={flavor!r} conflicts with the image's property "
                              f"hw_{key}={image!r}", field=f"$.flavor.extra_specs.hw:{key}")


def _packed_virtqueue(both: _Both) -> bool:
    return bool(both.booleans("virtio_packed_ring"))


def _ephemeral_encryption(both: _Both) -> set[str]:
    if not both.booleans("ephemeral_encryption"):
        return set()  # the format is not read (nor checked) unless encryption is asked for
    traits = {os_traits.COMPUTE_EPHEMERAL_ENCRYPTION}
    fmt = both.unique("ephemeral_encryption_format")
    if fmt:
        if fmt not in EPHEMERAL_FORMATS:
            raise both.invalid("ephemeral_encryption_format", f"ephemeral encryption format {fmt!r} is not one of "
                               f"{', '.join(EPHEMERAL_FORMATS)}")
        traits.add(f"COMPUTE_EPHEMERAL_ENCRYPTION_{fmt.upper()}")
    return traits


def _sound_model(both: _Both) -> Any:
    model = both.unique("sound_model")
    if model and model not in SOUND_MODELS:
        raise both.invalid("sound_model", f"sound model {model!r} is not one of {', '.join(SOUND_MODELS)}")
    return model


def _vtpm(both: _Both) -> set[str]:
    """The vTPM's version and model traits (none: no vTPM asked for)."""
    version = both.unique("tpm_version")
    if version is None:
        return set()
    if version not in TPM_VERSIONS:
        raise both.invalid("tpm_version", f"TPM version {version!r} is not one of {', '.join(TPM_VERSIONS)}")
    model = both.unique("tpm_model")
    if model is not None and model not in TPM_MODELS:
        raise both.invalid("tpm_model", f"TPM model {model!r} is not one of {', '.join(TPM_MODELS)}")
    if model == "tpm-crb" and version != "2.0":
        raise both.invalid("tpm_model", "TPM model tpm-crb needs TPM version 2.0")
    return {os_traits.COMPUTE_SECURITY_TPM_CRB if model == "tpm-crb" else os_traits.COMPUTE_SECURITY_TPM_TIS,
            os_traits.COMPUTE_SECURITY_TPM_2_0 if version == "2.0" else os_traits.COMPUTE_SECURITY_TPM_1_2}


def _tpm_secret_security(extra_specs: Mapping[str, str]) -> str:
    """Who may read the vTPM's secret (the flavor's choice only: an image cannot set it)."""
    security = extra_specs.get("hw:tpm_secret_security") or "user"
    if security not in TPM_SECRET_SECURITY:
        # Nova's RequestFilterFailed: its scheduler answers NoValidHost, no host being able to keep such a secret
        raise InvalidRequest(f"TPM secret security {security!r} is not supported: use one of "
                             f"{', '.join(TPM_SECRET_SECURITY)}", field="$.flavor.extra_specs.hw:tpm_secret_security")
    return TPM_SECRET_SECURITY[security]
