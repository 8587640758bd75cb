"""``RequestContext.build`` once per request class (``ContextMemo``): the derivation from a flavor, an image and
the request's traits, groups and PCI asks is the same for every request that asks the same, and a cloud asks the
same few classes over and over (every placement of a flavor, with its image). Profiled per placement at 100,000
hosts, the build was ~4 % of the server's CPU, ~20 us each (bench/RESULTS-mixed.md).

What a build reads is its key: the spec's fields in ``BUILD_FIELDS`` and the options in ``_options``, nothing
else (tests/test_context_memo.py proves the build reads no other field of either, with a recording proxy, so a
new read must join the key there). Two requests of one key get contexts equal in every derived field; each its
own context object, with its own spec, time and per-request state (what the engine moves as instances land).
"""

from __future__ import annotations

import operator
from typing import Any

import msgspec

from gantt.compute.request import RequestContext
from gantt.config import Config
from gantt.model import RequestSpec

# The spec's fields RequestContext.build reads. The rest (who asks, for which consumers, where it may or may not
# go: project_id, user_id, instance_uuids, availability_zone, force/ignore hosts, requested_destination,
# request_id, evacuation, alternates) is read from ``ctx.spec`` by the filters, per request.
BUILD_FIELDS = ("flavor", "image", "num_instances", "scheduler_hints", "instance_group", "resources",
                "required_traits", "forbidden_traits", "member_of", "migration_uuid", "pci_requests",
                "pci_in_placement", "network_metadata", "request_groups", "group_policy", "same_subtree")
_FIELDS = operator.attrgetter(*BUILD_FIELDS)
# The options it reads: Nova's seam changes some in place between requests (gantt.config.per_request).
BUILD_OPTIONS = ("filter_scheduler.pci_in_placement", "workarounds.disable_fallback_pcpu_query", "pci.alias")
_ENCODER = msgspec.json.Encoder()
# Request classes kept; past it the memo starts again (a cloud has tens of flavors, not thousands).
MEMO_SIZE = 256


def _options(config: Config) -> tuple[Any, ...]:
    return (config.filter_scheduler.pci_in_placement, config.workarounds.disable_fallback_pcpu_query,
            config.pci.alias)


class ContextMemo:
    """``build`` answers as ``RequestContext.build`` does, from a template built once per key.

    A key is the encoded fields and options (its hash, and what tells ``True`` from ``1``), and a hit must also
    be equal to them (what tells a list from a tuple, which encode alike): free-form fields (scheduler hints,
    image properties) come from Python callers as well as from JSON."""

    def __init__(self, size: int = MEMO_SIZE) -> None:
        self.size = size
        self._built: dict[bytes, tuple[tuple[Any, ...], RequestContext]] = {}
        self.hits = 0

    def build(self, spec: RequestSpec, config: Config, now: float) -> RequestContext:
        inputs = (_FIELDS(spec), _options(config))
        try:
            key = _ENCODER.encode(inputs)
        except (TypeError, msgspec.EncodeError):  # a free-form value JSON cannot carry: built, not kept
            return RequestContext.build(spec, config, now)
        found = self._built.get(key)
        if found is not None and found[0] == inputs:
            self.hits += 1
            return _again(found[1], spec, now)
        template = RequestContext.build(spec, config, now)  # a refusal raises here, and nothing is kept
        if len(self._built) >= self.size:
            self._built.clear()
        # A caller that changes its spec's dicts in place afterwards changes ``inputs`` too: later requests then
        # miss (their bytes are not the key's, or their values not these), never hit a template of other inputs.
        self._built[key] = (inputs, template)
        return _again(template, spec, now)

    def clear(self) -> None:
        self._built.clear()


def _again(template: RequestContext, spec: RequestSpec, now: float) -> RequestContext:
    """A context for ``spec`` with the template's derived fields: the per-request ones fresh, as ``build`` makes
    them (the engine moves placed hosts, group members, the instance index, moves and memos as instances land)."""
    group = spec.instance_group
    return RequestContext(
        spec=spec, config=template.config, now=now, resources=dict(template.resources),
        required_traits=template.required_traits, forbidden_traits=template.forbidden_traits,
        extra_specs=dict(spec.flavor.extra_specs) if spec.flavor else {},
        image_props=dict(spec.image.properties) if spec.image else {},
        hints=dict(spec.scheduler_hints), numa=template.numa, member_of=template.member_of,
        forbidden_aggregates=template.forbidden_aggregates, pci_requests=template.pci_requests,
        group_policy=template.group_policy,
        group_hosts=list(group.hosts) if group else [], group_members=set(group.members) if group else set(),
        group_rules=dict(group.rules) if group else {},
        feature_traits=template.feature_traits, check_type=template.check_type, rebuild=template.rebuild,
        fallback=template.fallback, networks=template.networks, groups=template.groups)
