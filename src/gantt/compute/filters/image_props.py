"""ImagePropertiesFilter: the node can run the image's architecture, hypervisor type, VM mode and version.

Image properties (legacy names accepted, current names win): ``hw_architecture`` (``architecture``; default
``[filter_scheduler] image_properties_default_architecture``), ``img_hv_type`` (``hypervisor_type``),
``hw_vm_mode`` (``vm_mode``), ``img_hv_requested_version`` (``hypervisor_version_requires``, e.g. ``>=6.0`` or
``>=6.0, <7``) and ``hw_maxphysaddr_bits``. Names are canonicalized as Nova does (``amd64`` → ``x86_64``, ``xapi``
→ ``xen``, ``pv`` → ``xen`` …); an unknown name is the request's error.

A node passes when one of its ``supported_instances`` entries holds every requested name, and its hypervisor
version satisfies the requested one (when both are known), and its cpu_info's maxphysaddr bits are enough (when
both are known). An image that asks for none of arch/hv_type/vm_mode passes everywhere; a node that advertises no
supported instances fails an image that asks for any.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gantt.compute.filters.base import Filter, register
from gantt.compute.filters.hoststate import caps_factor, descend
from gantt.compute.filters.image_meta import canonical_arch, canonical_hv_type, canonical_vm_mode, current_names
from gantt.compute.request import RequestContext
from gantt.compute.state import HostCaps, HostTable
from gantt.model import ARCHITECTURES, HV_TYPES, VM_MODES, InvalidRequest

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
    "!=": operator.ne,
}
_TERM_RE = re.compile(r"^\s*(<=|>=|<|>|!=|==)\s*([0-9]+(?:\.[0-9]+)*)\s*$")


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = [int(p) for p in text.split(".")]
    while len(parts) > 1 and parts[-1] == 0:  # 6.2 == 6.2.0, as version comparison treats them
        parts.pop()
    return tuple(parts)


def parse_version_predicate(text: str) -> list[tuple[Callable[[Any, Any], bool], tuple[int, ...]]]:
    """``">=6.0, <7"`` -> [(ge, (6,)), (lt, (7,))]; ValueError when malformed."""
    terms = []
    for part in text.split(","):
        match = _TERM_RE.match(part)
        if not match:
            raise ValueError(f"{part.strip()!r} is not a version comparison such as '>=6.0'")
        terms.append((_COMPARE[match.group(1)], _version_tuple(match.group(2))))
    return terms


def version_of(number: int) -> tuple[int, ...]:
    """Nova's integer hypervisor version (major * 1,000,000 + minor * 1,000 + patch) as a tuple."""
    parts: list[int] = []
    while number:
        parts.insert(0, number % 1000)
        number //= 1000
    return _version_tuple(".".join(map(str, parts))) if parts else (0,)


@dataclass(frozen=True, slots=True)
class ImageNeeds:
    arch: str | None
    hv_type: str | None
    vm_mode: str | None
    version: str | None
    bits: int | None

    @property
    def any(self) -> bool:
        return bool(self.arch or self.hv_type or self.vm_mode)


def _field(props: dict[str, Any], current: str, legacy: str) -> str:
    name = current if current in props or legacy not in props else legacy
    return f"$.image.properties.{name}"


def image_needs(ctx: RequestContext, default_arch: str | None) -> ImageNeeds:
    raw = ctx.image_props
    props = current_names(raw)
    checks = (("hw_architecture", "architecture", canonical_arch, ARCHITECTURES),
              ("img_hv_type", "hypervisor_type", canonical_hv_type, HV_TYPES),
              ("hw_vm_mode", "vm_mode", canonical_vm_mode, VM_MODES))
    names: list[str | None] = []
    for key, legacy, canonical, known in checks:
        value = props.get(key)
        if value is None and key == "hw_architecture":
            value = default_arch
        if value is None or value == "":
            names.append(None)
            continue
        if not isinstance(value, str) or canonical(value) not in known:
            raise InvalidRequest(f"{key} {value!r} is not a known name", field=_field(raw, key, legacy))
        names.append(canonical(value))
    version = props.get("img_hv_requested_version") or None
    if version is not None:
        try:
            parse_version_predicate(str(version))
        except ValueError as exc:
            raise InvalidRequest(f"img_hv_requested_version: {exc}",
                                 field=_field(raw, "img_hv_requested_version", "hypervisor_version_requires")) \
                from None
    bits = props.get("hw_maxphysaddr_bits") or None
    if bits is not None:
        try:
            bits = int(bits)
        except (TypeError, ValueError):
            raise InvalidRequest("hw_maxphysaddr_bits must be an integer",
                                 field="$.image.properties.hw_maxphysaddr_bits") from None
    return ImageNeeds(names[0], names[1], names[2], str(version) if version is not None else None, bits)


def _host_names(spec: tuple[str | None, ...]) -> list[str | None]:
    """A supported_instances entry under canonical names (hosts report e.g. "QEMU" or "amd64")."""
    out: list[str | None] = []
    for i, value in enumerate(spec):
        if not isinstance(value, str):
            out.append(None)
            continue
        out.append((canonical_arch, canonical_hv_type, canonical_vm_mode)[i](value) if i < 3 else value)
    return out


def node_supports(caps: HostCaps, needs: ImageNeeds) -> bool:
    if not caps.supported_instances:
        return False
    version_ok = True
    if needs.version and caps.hypervisor_version:
        have = version_of(int(caps.hypervisor_version))
        version_ok = all(compare(have, want) for compare, want in parse_version_predicate(needs.version))
    bits_ok = True
    if needs.bits:
        have_bits = descend(caps.cpu_info, ("maxphysaddr", "bits"))
        if have_bits:
            try:
                bits_ok = int(have_bits) >= needs.bits
            except (TypeError, ValueError):
                bits_ok = True  # an unreadable host figure is treated as unknown
    if not (version_ok and bits_ok):
        return False
    wanted = (needs.arch, needs.hv_type, needs.vm_mode)
    for spec in caps.supported_instances:
        names = _host_names(spec)
        # Nova checks membership in the entry, not position.
        if all(not want or want in names for want in wanted):
            return True
    return False


@register
class ImagePropertiesFilter(Filter):
    name = "ImagePropertiesFilter"
    static = True  # image properties and interned capabilities only
    once_per_request = True

    def _needs(self, ctx: RequestContext) -> ImageNeeds:
        memo: ImageNeeds | None = ctx.scratch.get("image_needs")
        if memo is None:
            memo = ctx.scratch["image_needs"] = image_needs(
                ctx, self.config.filter_scheduler.image_properties_default_architecture)
        return memo

    def cache_key(self, ctx: RequestContext) -> Hashable:
        return self._needs(ctx)

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        needs = self._needs(ctx)
        if not needs.any:
            return None
        return caps_factor(table).map(lambda caps: node_supports(caps, needs))
