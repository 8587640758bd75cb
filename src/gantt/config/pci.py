"""``[pci] alias``: Nova's PCI alias definitions (nova.pci.request), read and checked when the configuration loads.

An alias is a JSON object: ``name`` (required), ``vendor_id`` and ``product_id`` (four hex digits),
``device_type`` (type-PCI, type-PF, type-VF), ``numa_policy`` (required, legacy, preferred, socket; legacy when
absent), ``capability_type`` ("pci"), ``live_migratable`` (a boolean word), and for ``[filter_scheduler]
pci_in_placement`` ``resource_class`` and ``traits`` (comma-separated), which Placement matches, not the pools.
Definitions sharing a name are ORed device specs and must agree on numa_policy and give the same device_type.
``check_aliases`` holds what Nova checks against ``pci_in_placement``: every spec names vendor_id and product_id
(or, with it, a resource_class), and with it an alias has one spec. What a flavor asks of them and how a host's
pools serve it: gantt.compute.pci.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from msgspec import Struct, field

from gantt.model.prepare import prepare_types

NUMA_POLICIES = ("required", "legacy", "preferred", "socket")
DEVICE_TYPES = ("type-PCI", "type-PF", "type-VF")
_HEX4 = re.compile(r"^[0-9a-fA-F]{4}$")
_ALIAS_KEYS = {"name", "capability_type", "product_id", "vendor_id", "device_type", "numa_policy",
               "live_migratable", "resource_class", "traits"}
# oslo.utils' boolean words (strutils.bool_from_string)
TRUE_WORDS = ("1", "t", "true", "on", "y", "yes")
FALSE_WORDS = ("0", "f", "false", "off", "n", "no")

Spec = dict[str, str | None]  # one device spec (an alias's, or a port's: None = the pool lacks the key)


@dataclass(frozen=True, slots=True)
class Alias:
    name: str
    numa_policy: str
    specs: tuple[Spec, ...]


def parse_aliases(entries: Sequence[str]) -> dict[str, Alias]:
    """``[pci] alias`` (one JSON object per entry) -> aliases by name; ValueError says which entry is wrong."""
    found: dict[str, tuple[str, list[Spec]]] = {}
    for i, text in enumerate(entries):
        where = f"[pci] alias entry {i + 1}"
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{where} is not JSON: {exc}") from None
        name, policy, spec = _alias_spec(raw, where)
        if name not in found:
            found[name] = (policy, [spec])
            continue
        if found[name][0] != policy:
            raise ValueError(f"{where}: NUMA policy mismatch for alias '{name}'")
        first = found[name][1][0]
        if "dev_type" not in first or "dev_type" not in spec:
            # Nova compares the two definitions' device types and refuses either one without it
            raise ValueError(f"{where}: alias '{name}' is defined more than once, so each definition must give "
                             "device_type")
        if first["dev_type"] != spec["dev_type"]:
            raise ValueError(f"{where}: Device type mismatch for alias '{name}'")
        found[name][1].append(spec)
    return {name: Alias(name, policy, tuple(specs)) for name, (policy, specs) in found.items()}


def _alias_spec(raw: Any, where: str) -> tuple[str, str, Spec]:
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be a JSON object")
    unknown = sorted(set(raw) - _ALIAS_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_ALIAS_KEYS))})")
    for key, value in raw.items():
        if not isinstance(value, str):
            raise ValueError(f"{where}: {key} must be a string")
    name = raw.get("name")
    if name is None or not 1 <= len(name) <= 256:
        raise ValueError(f"{where}: name must be given, 1-256 characters")
    for key in ("vendor_id", "product_id"):
        if key in raw and not _HEX4.match(raw[key]):
            raise ValueError(f"{where}: {key} must be four hexadecimal digits, not {raw[key]!r}")
    if raw.get("capability_type", "pci") != "pci":
        raise ValueError(f"{where}: capability_type must be 'pci'")
    if raw.get("device_type", DEVICE_TYPES[0]) not in DEVICE_TYPES:
        raise ValueError(f"{where}: device_type must be one of {', '.join(DEVICE_TYPES)}")
    policy = raw.get("numa_policy") or "legacy"
    if policy not in NUMA_POLICIES:
        raise ValueError(f"{where}: numa_policy must be one of {', '.join(NUMA_POLICIES)}")
    spec = {k: v for k, v in raw.items() if k not in ("name", "numa_policy", "device_type", "live_migratable")}
    if "device_type" in raw:
        spec["dev_type"] = raw["device_type"]
    if "live_migratable" in raw:
        word = raw["live_migratable"].strip().lower()
        if word not in TRUE_WORDS + FALSE_WORDS:
            raise ValueError(f"{where}: live_migratable must be a boolean word (true, false, yes, no, 1, 0, …)")
        spec["live_migratable"] = "true" if word in TRUE_WORDS else "false"
    return name.strip(), policy, spec


def check_aliases(aliases: dict[str, Alias], in_placement: bool) -> None:
    """What Nova checks of the parsed aliases (``nova.pci.request._validate_aliases``) against ``[filter_scheduler]
    pci_in_placement``; ValueError naming the aliases."""
    if in_placement:
        several = [name for name, alias in aliases.items() if len(alias.specs) > 1]
        if several:
            raise ValueError(f"[pci] alias {', '.join(several)}: several definitions of one alias, but "
                             "[filter_scheduler] pci_in_placement allows one (give the devices one resource_class "
                             "in [pci] device_spec instead)")
    unnamed = sorted(name for name, alias in aliases.items() for spec in alias.specs
                     if not ("vendor_id" in spec and "product_id" in spec)
                     and not (in_placement and "resource_class" in spec))
    if unnamed:
        either = " or resource_class" if in_placement else ""
        raise ValueError(f"[pci] alias {', '.join(dict.fromkeys(unnamed))} must give vendor_id and product_id{either}")


@functools.lru_cache(maxsize=64)
def _checked(entries: tuple[str, ...], in_placement: bool) -> None:
    check_aliases(_parsed_aliases(entries), in_placement)


class PciSection(Struct, forbid_unknown_fields=True, kw_only=True):
    """nova.conf's ``[pci]``: ``alias`` (one JSON object per entry, as Nova's MultiStrOpt) is the scheduler's.
    ``device_spec`` and ``report_in_placement`` are nova-compute's, which the scheduler never reads (a nova.conf
    shared with the computes loads)."""

    alias: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.alias = [entry for entry in self.alias if entry.strip()]  # the sample's uncommented `alias =`
        self.aliases  # noqa: B018  refuse a bad alias at start, not at the first request that names it

    @property
    def aliases(self) -> dict[str, Alias]:
        """The aliases by name."""
        return _parsed_aliases(tuple(self.alias))

    def check(self, in_placement: bool) -> None:
        """``check_aliases`` (once per distinct alias list and option value: each request that names an alias
        asks, with the ``pci_in_placement`` it is decided under)."""
        _checked(tuple(self.alias), in_placement)


@functools.lru_cache(maxsize=16)
def _parsed_aliases(entries: tuple[str, ...]) -> dict[str, Alias]:
    # Every request that names an alias reads them: parse each distinct [pci] alias list once.
    return parse_aliases(entries)


prepare_types(globals())  # build msgspec type info before any thread decodes (see gantt.model.prepare)
