"""RequestContext: a RequestSpec normalized once per request, shared by every filter and weigher.

Nova derives the resources a request needs from its flavor (and extra specs such as ``resources:VCPU=0`` or
``trait:HW_CPU_X86_AVX2=required``); this module does that derivation in one place so no filter repeats it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import os_traits

from gantt.compute.groups import Group, Groups
from gantt.compute.numa import GuestTopology, Networks, instance_topology
from gantt.compute.pci import PciRequest, affinity_policy, requests_from_extra_specs, requests_from_ports
from gantt.config import Config
from gantt.model import Allocation, InvalidRequest, NodeKey, RequestSpec, check_resource_class

_DERIVE: Any = object()  # a guest topology not given: derived from the spec


def resources_from_spec(spec: RequestSpec, guest: GuestTopology | None = _DERIVE) -> dict[str, int]:
    """What one instance consumes, by resource class (Nova's resources_from_request_spec, one group).

    ``guest``: the request's NUMA topology, whose CPU policies turn the flavor's vCPUs into PCPU (and VCPU for a
    mixed policy), one more PCPU for isolated emulator threads, as Nova's scheduler asks Placement."""
    if guest is _DERIVE:
        guest = instance_topology(spec)
    resources: dict[str, int] = {}
    flavor = spec.flavor
    if flavor is not None:
        swap_gb = math.ceil(flavor.swap / 1024) if flavor.swap else 0
        specs = flavor.extra_specs
        if guest is not None and guest.resources:
            resources.update(guest.resources)
        named: set[str] = set()  # every class some group names, the numbered ones' included (Nova's merge)
        for key, value in specs.items():
            # resources:RC=N, and the numbered groups' resources1:RC=N, which are taken as groups of their own
            # (``groups_from_spec``) and only hide the flavor's own figures here
            matched = _EXTRA_SPEC.match(key)
            if matched is None or matched[1] != "resources" or not matched[3]:
                continue
            prefix, rc = key.partition(":")[0], matched[3]
            try:
                check_resource_class(rc, f"flavor.extra_specs.{key}")
                amount = int(value)
            except ValueError as exc:
                raise InvalidRequest(str(exc) if "resource class" in str(exc)
                                     else f"extra spec {key} must be an integer",
                                     field=f"$.flavor.extra_specs.{key}") from None
            if amount < 0:
                raise InvalidRequest(f"extra spec {key} must be >= 0", field=f"$.flavor.extra_specs.{key}")
            named.add(rc)
            if prefix == "resources":
                resources[rc] = amount
        named.update(resources)
        # The flavor's own figures only for the classes no group names (Nova's from_request_spec): a flavor
        # asking resources:PCPU=N (or a dedicated policy) asks no VCPU besides, whatever its vcpus say.
        if "VCPU" not in named and "PCPU" not in named:
            resources["VCPU"] = flavor.vcpus
        if "MEMORY_MB" not in named:
            resources["MEMORY_MB"] = flavor.memory_mb
        if "DISK_GB" not in named:
            resources["DISK_GB"] = flavor.root_gb + flavor.ephemeral_gb + swap_gb
    if spec.resources:
        if flavor is None:
            resources = dict(spec.resources)
        else:
            for rc, amount in spec.resources.items():
                resources[rc] = resources.get(rc, 0) + amount
    return {rc: amount for rc, amount in resources.items() if amount > 0}


def traits_from_spec(spec: RequestSpec,
                     guest: GuestTopology | None = _DERIVE) -> tuple[frozenset[str], frozenset[str]]:
    if guest is _DERIVE:
        guest = instance_topology(spec)
    required = set(spec.required_traits or ())
    forbidden = set(spec.forbidden_traits or ())
    if guest is not None and guest.hyperthreading is not None:
        # a thread policy asks Placement for SMT hosts (require) or others (isolate), as Nova's scheduler does
        (required if guest.hyperthreading == "required" else forbidden).add(os_traits.HW_CPU_HYPERTHREADING)
    props = dict(spec.image.properties) if spec.image is not None else {}
    if affinity_policy(dict(spec.flavor.extra_specs) if spec.flavor else {}, props) == "socket":
        # as Nova's scheduler asks Placement: hosts that know their cells' sockets
        required.add(os_traits.COMPUTE_SOCKET_PCI_NUMA_AFFINITY)
    sources: list[tuple[str, dict[str, Any]]] = []
    if spec.flavor is not None:
        sources.append(("flavor.extra_specs", spec.flavor.extra_specs))
    if spec.image is not None:
        sources.append(("image.properties", spec.image.properties))
    for where, props in sources:
        for key, value in props.items():
            if not key.startswith("trait:"):  # trait1:T is a numbered group's (``groups_from_spec``)
                continue
            trait = key.partition(":")[2]
            if value == "required":
                required.add(trait)
            elif value == "forbidden":
                forbidden.add(trait)
            else:
                raise InvalidRequest(f"{key} must be 'required' or 'forbidden'", field=f"$.{where}.{key}")
    for where, names in (("$.required_traits", required), ("$.forbidden_traits", forbidden)):
        for name in names:
            if not valid_trait(name):
                raise InvalidRequest(f"{name!r} is not a trait: a standard trait of os-traits, or CUSTOM_ followed "
                                     "by upper-case letters, digits and underscores", field=where)
    if required & forbidden:
        clash = sorted(required & forbidden)[0]
        raise InvalidRequest(f"trait {clash} is both required and forbidden", field="$.required_traits")
    return frozenset(required), frozenset(forbidden)


def unnumbered_traits(spec: RequestSpec) -> tuple[frozenset[str], frozenset[str]]:
    """The unnumbered group's own traits, (required, forbidden): the flavor's and the image's ``trait:T``, which
    Nova asks Placement of the group's providers (unlike ``required_traits``, the root's: ``root_required``).
    Checked by ``traits_from_spec``."""
    required: set[str] = set()
    forbidden: set[str] = set()
    for props in (spec.flavor.extra_specs if spec.flavor else {}, spec.image.properties if spec.image else {}):
        for key, value in props.items():
            if key.startswith("trait:"):
                (required if value == "required" else forbidden).add(key[len("trait:"):])
    return frozenset(required), frozenset(forbidden)


_CUSTOM_TRAIT = re.compile(r"CUSTOM_[A-Z0-9_]+")
# Nova's ResourceRequest.XS_KEYPAT: resources[SUFFIX]:CLASS and trait[SUFFIX]:TRAIT
_EXTRA_SPEC = re.compile(r"^(resources|trait)([a-zA-Z0-9_-]{1,64})?:(.*)$")


_STANDARD_TRAITS = frozenset(os_traits.get_traits())


def valid_trait(name: str) -> bool:
    """Placement's rule: a standard trait (os-traits) or ``CUSTOM_[A-Z0-9_]+``."""
    return name in _STANDARD_TRAITS or _CUSTOM_TRAIT.fullmatch(name) is not None


def member_of_from_spec(spec: RequestSpec) -> tuple[tuple[frozenset[str], ...], frozenset[str]]:
    """Placement's ``member_of``: (groups each satisfied by any of its aggregates, aggregates forbidden).

    Each inner list of ``spec.member_of`` is one ``member_of`` query parameter: ``["a", "b"]`` or
    ``["in:a,b"]`` (any of), ``["!a"]`` or ``["!in:a,b"]`` (none of). (``requested_destination.aggregates`` is
    the engine's pre-selection.)
    """
    return parse_member_of(spec.member_of or (), "$.member_of")


def parse_member_of(member_of: Sequence[Sequence[str]], field: str
                    ) -> tuple[tuple[frozenset[str], ...], frozenset[str]]:
    """``member_of_from_spec`` for the lists at ``field`` (the request's, or a request group's)."""
    groups: list[frozenset[str]] = []
    forbidden: set[str] = set()
    for i, group in enumerate(member_of):
        where = f"{field}[{i}]"
        if any(ref.startswith("!") for ref in group):
            if len(group) != 1:
                raise InvalidRequest("a forbidden aggregate ('!a' or '!in:a,b') must be the only entry of its "
                                     "member_of group", field=where)
            refs = _refs(group[0][1:], where)
            forbidden |= refs
            continue
        refs = frozenset(ref for entry in group for ref in _refs(entry, where))
        if not refs:
            raise InvalidRequest("a member_of group names no aggregate", field=where)
        groups.append(refs)
    return tuple(groups), frozenset(forbidden)


def _refs(entry: str, where: str) -> frozenset[str]:
    body = entry[3:] if entry.startswith("in:") else entry
    refs = [ref.strip() for ref in body.split(",")] if entry.startswith("in:") else [body.strip()]
    if not all(refs) or any(ref.startswith(("!", "in:")) for ref in refs):
        raise InvalidRequest(f"malformed member_of entry {entry!r}: use 'a', 'in:a,b', '!a' or '!in:a,b'",
                             field=where)
    return frozenset(refs)


def groups_from_spec(spec: RequestSpec, extra_specs: dict[str, str]) -> Groups | None:
    """The request's groups (None when it has none); InvalidRequest naming the field of a bad trait or aggregate
    reference. The policy is the request's, else the flavor's ``group_policy`` extra spec (Nova ignores any other
    value than none and isolate, with a warning)."""
    out = flavor_groups(extra_specs, spec)
    if not spec.request_groups and not out:
        if spec.same_subtree:
            raise InvalidRequest("same_subtree names request groups, and there are none", field="$.same_subtree")
        return None
    ids: set[str] = {g.id for g in out}
    for i, group in enumerate(spec.request_groups or ()):
        where = f"$.request_groups[{i}]"
        if group.id in ids:
            raise InvalidRequest(f"two request groups are named {group.id!r}", field=f"{where}.id")
        ids.add(group.id)
        if not any(group.resources.values()) and (not (group.required_traits or group.forbidden_traits)
                                                  or not _in_subtree(spec, group.id)):
            # Placement 1.36: a group without resources only names a provider for same_subtree, by its traits
            raise InvalidRequest(f"request group {group.id!r} asks for no resources (a group of traits alone "
                                 "must be named in same_subtree)", field=f"{where}.resources")
        for name, traits in (("required_traits", group.required_traits),
                             ("forbidden_traits", group.forbidden_traits)):
            for trait in traits:
                if not valid_trait(trait):
                    raise InvalidRequest(f"{trait!r} is not a trait", field=f"{where}.{name}")
        member_of, forbidden_aggregates = parse_member_of(group.member_of, f"{where}.member_of")
        out.append(Group(group.id, tuple((rc, n) for rc, n in sorted(group.resources.items()) if n > 0),
                         frozenset(group.required_traits), frozenset(group.forbidden_traits), member_of,
                         forbidden_aggregates, group.in_tree))
    for i, subtree in enumerate(spec.same_subtree or ()):
        if unknown := set(subtree) - ids:
            raise InvalidRequest(f"same_subtree names no request group {sorted(unknown)[0]!r}",
                                 field=f"$.same_subtree[{i}]")
    policy = spec.group_policy or extra_specs.get("group_policy")
    if policy not in ("none", "isolate") and sum(1 for g in out if g.flavor) > 1:
        # Nova asks Placement without a policy, which refuses the query (400): no host
        raise InvalidRequest("a flavor with several numbered groups needs group_policy 'none' or 'isolate' (as "
                             "Placement does)", field="$.flavor.extra_specs.group_policy")
    return Groups(tuple(out), policy == "isolate", tuple(frozenset(s) for s in spec.same_subtree or ()))


def _in_subtree(spec: RequestSpec | None, gid: str) -> bool:
    return spec is not None and any(gid in subtree for subtree in spec.same_subtree or ())


def flavor_groups(extra_specs: dict[str, str], spec: RequestSpec | None = None) -> list[Group]:
    """The flavor's numbered groups (``resources1:VGPU=1``, ``trait1:CUSTOM_X=required``, any suffix Nova's
    ``XS_KEYPAT`` takes), each taken whole from one provider of the node's tree, as Placement takes them; the
    group's id is its suffix (Placement's name in ``mappings``). Its amounts were checked by
    ``resources_from_spec``; a group whose amounts are all 0 asks nothing (Nova strips it). A group of traits
    alone names a provider only for ``spec``'s same_subtree (as Placement 1.36 takes it)."""
    found: dict[str, tuple[dict[str, int], set[str], set[str]]] = {}
    for key, value in extra_specs.items():
        matched = _EXTRA_SPEC.match(key)
        if matched is None or not matched[2] or not matched[3]:
            continue
        kind, suffix, name = matched[1], matched[2], matched[3]
        resources, required, forbidden = found.setdefault(suffix, ({}, set(), set()))
        if kind == "resources":
            try:
                amount = int(value)
            except ValueError:
                raise InvalidRequest(f"extra spec {key} must be an integer",
                                     field=f"$.flavor.extra_specs.{key}") from None
            resources[name] = amount
        elif value in ("required", "forbidden"):
            if not valid_trait(name):
                raise InvalidRequest(f"{name!r} is not a trait", field=f"$.flavor.extra_specs.{key}")
            (required if value == "required" else forbidden).add(name)
        else:
            raise InvalidRequest(f"{key} must be 'required' or 'forbidden'", field=f"$.flavor.extra_specs.{key}")
    out = []
    for suffix, (resources, required, forbidden) in sorted(found.items()):
        asked = tuple((rc, n) for rc, n in sorted(resources.items()) if n > 0)
        if not asked and not required and not forbidden:
            continue
        if required & forbidden:
            raise InvalidRequest(f"trait {sorted(required & forbidden)[0]} is both required and forbidden",
                                 field=f"$.flavor.extra_specs.trait{suffix}")
        if not asked and not _in_subtree(spec, suffix):
            # Placement 1.36 refuses a resourceless group outside same_subtree: Nova finds no host
            raise InvalidRequest(f"the flavor's group {suffix!r} asks for traits and no resources, and no "
                                 "same_subtree names it", field=f"$.flavor.extra_specs.trait{suffix}")
        out.append(Group(suffix, asked, frozenset(required), frozenset(forbidden), (), frozenset(), None,
                         flavor=True))
    return out


def _with_features(required: frozenset[str], forbidden: frozenset[str], extra_specs: dict[str, str],
                   image_props: dict[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    """(the required traits with the vTPM's, the root traits only the guest's features add):
    ``gantt.compute.feature_traits``."""
    from gantt.compute.feature_traits import feature_traits  # here: it reads the filters' image fields

    features, asked = feature_traits(extra_specs, image_props)
    required |= asked
    features -= required
    if (features | asked) & forbidden:
        clash = sorted((features | asked) & forbidden)[0]
        raise InvalidRequest(f"trait {clash}, which the flavor's or image's features require, is forbidden",
                             field="$.forbidden_traits")
    return required, features


def _networks(spec: RequestSpec) -> Networks | None:
    metadata = spec.network_metadata
    if metadata is None or not (metadata.physnets or metadata.tunneled):
        return None
    return Networks(frozenset(metadata.physnets), metadata.tunneled)


@dataclass(frozen=True, slots=True)
class PcpuFallback:
    """Nova's second Placement query for a guest whose hw:cpu_policy is ``dedicated`` (unless ``[workarounds]
    disable_fallback_pcpu_query``): hosts still configured with ``vcpu_pin_set`` report their pinnable CPUs as
    VCPU, so Nova asks again without the CPU policies' translation and weighs the hosts of both answers together.

    ``resources``: what the second query asks (VCPU in place of PCPU, no PCPU for isolated emulator threads).
    ``required`` / ``forbidden``: the traits only the first query asks (the thread policy's HW_CPU_HYPERTHREADING),
    which the second drops. A node the first query admits is claimed with the request's own resources (Nova claims
    a host's first allocation request, the PCPU one); a node only the second admits, with these."""

    resources: dict[str, int]
    required: frozenset[str]
    forbidden: frozenset[str]


def pcpu_fallback(spec: RequestSpec, config: Config, guest: GuestTopology | None, required: frozenset[str],
                  forbidden: frozenset[str]) -> PcpuFallback | None:
    """The fallback query of a request whose first query asks ``required`` / ``forbidden`` traits, or None."""
    if guest is None or not guest.cpu_pinning_requested or config.workarounds.disable_fallback_pcpu_query:
        return None
    plain_required, plain_forbidden = traits_from_spec(spec, None)
    return PcpuFallback(resources=resources_from_spec(spec, None), required=required - plain_required,
                        forbidden=forbidden - plain_forbidden)


@dataclass(slots=True)
class RequestContext:
    """Everything a filter or weigher may read about the request; per-instance fields move as instances land."""

    spec: RequestSpec
    config: Config
    now: float
    resources: dict[str, int]
    required_traits: frozenset[str]
    forbidden_traits: frozenset[str]
    extra_specs: dict[str, str]
    image_props: dict[str, Any]
    hints: dict[str, Any]
    numa: GuestTopology | None = None  # the guest NUMA topology flavor and image ask for (gantt.compute.numa)
    member_of: tuple[frozenset[str], ...] = ()  # each group: in any of these aggregates (ids or uuids)
    forbidden_aggregates: frozenset[str] = frozenset()
    # the flavor's pci_passthrough:alias, one request per entry (an alias [pci] alias does not define is refused),
    # then the spec's own (SR-IOV ports'); or only the spec's own, when the caller made the flavor's (``alias``)
    pci_requests: tuple[PciRequest, ...] = ()
    # server group bookkeeping: hosts and members grow as this request's instances are placed
    group_policy: str | None = None
    group_hosts: list[str] = field(default_factory=list)
    group_members: set[str] = field(default_factory=set)
    group_rules: dict[str, Any] = field(default_factory=dict)
    instance_index: int = 0
    placed: list[NodeKey] = field(default_factory=list)
    # A move: the allocation the instance leaves (set once the engine has found it), and for each move this
    # request made, (source, the migration's allocation holding it) so a failed commit can undo it.
    move_source: Allocation | None = None
    moved: dict[str, tuple[Allocation, Allocation]] = field(default_factory=dict)
    scratch: dict[Hashable, Any] = field(default_factory=dict)  # per-request memo for filters/weighers
    # the required traits only the guest's features asked for (gantt.compute.feature_traits): the root provider's,
    # which Nova adds after isolate_aggregates has read what the request asks for
    feature_traits: frozenset[str] = frozenset()
    # Nova's ``_nova_check_type`` hint: any value makes the filters run for forced hosts too; ``["rebuild"]`` (a
    # rebuild with a new image on the instance's own host) runs only the filters that matter for a rebuild and
    # claims nothing (the instance keeps what it holds).
    check_type: bool = False
    rebuild: bool = False
    fallback: PcpuFallback | None = None  # Nova's VCPU query beside the PCPU one (a dedicated guest)
    networks: Networks | None = None  # the cells a NUMA guest lands on must serve these (network_metadata)
    groups: Groups | None = None  # request groups on the node's child providers (gantt.compute.groups)

    @classmethod
    def build(cls, spec: RequestSpec, config: Config, now: float) -> RequestContext:
        if spec.image is not None and spec.image.properties:
            # Nova refuses the request when it builds the image's ImageMeta, whatever filters are enabled.
            from gantt.compute.filters.image_meta import refusal  # here: the filters package imports this module

            refused = refusal(spec.image.properties)
            if refused is not None:
                raise InvalidRequest(f"image property {refused[0]}: {refused[1]}",
                                     field=f"$.image.properties.{refused[0]}")
        guest = instance_topology(spec)
        required, forbidden = traits_from_spec(spec, guest)
        member_of, forbidden_aggregates = member_of_from_spec(spec)
        group = spec.instance_group
        extra_specs = dict(spec.flavor.extra_specs) if spec.flavor else {}
        image_props = dict(spec.image.properties) if spec.image else {}
        policy = affinity_policy(extra_specs, image_props)
        in_placement = config.filter_scheduler.pci_in_placement if spec.pci_in_placement is None \
            else spec.pci_in_placement
        # the flavor's as the caller made them (Nova's, kept from boot by a move), else as [pci] alias says now
        given = any(r.alias is not None for r in spec.pci_requests or ())
        pci_requests = (() if given else requests_from_extra_specs(extra_specs, config.pci, policy, in_placement)) \
            + requests_from_ports(spec.pci_requests, policy, in_placement)
        if (spec.group_policy or extra_specs.get("group_policy")) == "isolate":  # as request groups, in Placement
            pci_requests = tuple(replace(r, isolate=True) for r in pci_requests)
        if group is not None and group.policy in ("affinity", "anti-affinity") and not group.uuid:
            # The claim holds a hard policy against every replica's claims by the group's uuid; without one, two
            # schedulers could each place a member by a stale view (two anti-affine members on one host).
            raise InvalidRequest(f"a server group with the hard policy {group.policy!r} must have a uuid: its "
                                 "policy is held at claim time by it", field="$.instance_group.uuid")
        check_type = spec.scheduler_hints.get("_nova_check_type")
        rebuild = check_type in ("rebuild", ["rebuild"])  # Nova's API sends hints as one-element lists
        if rebuild and (spec.num_instances > 1 or spec.migration_uuid is not None):
            raise InvalidRequest("a rebuild checks one instance on its own host: it takes neither several "
                                 "instances nor a migration_uuid", field="$.scheduler_hints._nova_check_type")
        features: frozenset[str] = frozenset()
        fallback = None
        if not rebuild:  # Nova runs its request filters (and asks Placement) for every request but a rebuild
            fallback = pcpu_fallback(spec, config, guest, required, forbidden)
            required, features = _with_features(required, forbidden, extra_specs, image_props)
        return cls(
            spec=spec,
            config=config,
            now=now,
            resources=resources_from_spec(spec, guest),
            numa=guest,
            required_traits=required | features,
            forbidden_traits=forbidden,
            feature_traits=features,
            extra_specs=extra_specs,
            image_props=image_props,
            hints=dict(spec.scheduler_hints),
            member_of=member_of,
            forbidden_aggregates=forbidden_aggregates,
            pci_requests=pci_requests,
            group_policy=group.policy if group else None,
            group_hosts=list(group.hosts) if group else [],
            group_members=set(group.members) if group else set(),
            group_rules=dict(group.rules) if group else {},
            check_type=bool(check_type),
            rebuild=rebuild,
            fallback=fallback,
            networks=_networks(spec),
            groups=None if rebuild else groups_from_spec(spec, extra_specs),
        )

    @property
    def hard_group(self) -> str | None:
        """The server group whose hard policy (affinity, anti-affinity) a claim must hold atomically."""
        group = self.spec.instance_group
        if group is None or not group.uuid or self.group_policy not in ("affinity", "anti-affinity"):
            return None
        return group.uuid

    def hint(self, name: str) -> Any:
        """A scheduler hint; Nova's API delivers single values as one-element lists, so unwrap those."""
        value = self.hints.get(name)
        if isinstance(value, list) and len(value) == 1:
            return value[0]
        return value

    def hint_list(self, name: str) -> list[Any]:
        value = self.hints.get(name)
        if value is None:
            return []
        if isinstance(value, list):
            return value
        return [value]
