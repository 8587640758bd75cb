"""GET /allocation_candidates: the query string as each microversion takes it, and the answer's shapes."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from gantt.placement.api.errors import PlacementError
from gantt.placement.api.queries import in_tree_param, member_of_param, required_param, resources_param
from gantt.placement.api.wire import Answer, Call, accept_json, json_response
from gantt.placement.candidates import CandidateQuery, Candidates, RequestGroup
from gantt.placement.facade import Placement

_NUMBERED = r"[1-9][0-9]*"
_VERBOSE = r"[a-zA-Z0-9_-]{1,64}"
_KINDS = ("resources", "required", "member_of", "in_tree")
_INVALID = "Invalid query string parameters: "


def _schema(call: Call) -> tuple[set[str], list[str]]:
    """The plain names and the suffixed-name patterns this microversion takes (Placement's JSON schemas)."""
    v = call.version
    if not v.at_least(25):
        names = {"resources"}
        names |= {"limit"} if v.at_least(16) else set()
        names |= {"required"} if v.at_least(17) else set()
        names |= {"member_of"} if v.at_least(21) else set()
        return names, []
    names = {"limit", "group_policy"}
    names |= {"root_required"} if v.at_least(35) else set()
    names |= {"same_subtree"} if v.at_least(36) else set()
    suffix = _VERBOSE if v.at_least(33) else _NUMBERED
    kinds = _KINDS if v.at_least(31) else _KINDS[:3]
    return names, [f"^{kind}({suffix})?$" for kind in kinds]


def _validate(call: Call, params: dict[str, list[str]]) -> None:
    names, patterns = _schema(call)
    extras = sorted(k for k in params if k not in names and not any(re.match(p, k) for p in patterns))
    if extras:
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            raise PlacementError(400, f"{_INVALID}{', '.join(map(repr, extras))} {verb} not match any of the "
                                      f"regexes: {', '.join(map(repr, sorted(patterns)))}")
        raise PlacementError(400, f"{_INVALID}Additional properties are not allowed ("
                                  f"{', '.join(map(repr, extras))} {'was' if len(extras) == 1 else 'were'} "
                                  "unexpected)")
    if not call.version.at_least(25) and "resources" not in params:
        raise PlacementError(400, f"{_INVALID}'resources' is a required property")
    for limit in params.get("limit", []):
        if not re.match(r"^[1-9][0-9]*$", limit):
            raise PlacementError(400, f"{_INVALID}{limit!r} does not match '^[1-9][0-9]*$'  "
                                      "Failed validating 'pattern' in schema['properties']['limit']")
    for policy in params.get("group_policy", []):
        if policy not in ("none", "isolate"):
            raise PlacementError(400, f"{_INVALID}{policy!r} is not one of ['none', 'isolate']  "
                                      "Failed validating 'enum' in schema['properties']['group_policy']")


def _groups(call: Call, params: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    suffix = _VERBOSE if call.version.at_least(33) else _NUMBERED
    pattern = re.compile(f"^({'|'.join(_KINDS)})({suffix})?$")
    groups: dict[str, dict[str, Any]] = {}
    for name, values in params.items():
        match = pattern.match(name)
        if match is None:
            continue
        kind, key = match.group(1), match.group(2) or ""
        group = groups.setdefault(key, {})
        if kind == "resources":
            group["resources"] = resources_param(values[-1])
        elif kind == "required":
            group["required"], group["forbidden_traits"] = required_param(call, values)
        elif kind == "member_of":
            group["member_of"], group["forbidden_aggregates"] = member_of_param(call, values)
        else:
            group["in_tree"] = in_tree_param(values[-1])
    return groups


def _same_subtrees(params: dict[str, list[str]]) -> tuple[frozenset[str], ...]:
    out = []
    for value in params.get("same_subtree", []):
        suffixes = frozenset(s.strip() for s in value.split(","))
        if "" in suffixes:
            raise PlacementError(400, "Empty string (unsuffixed group) can not be specified in `same_subtree` ",
                                 code="placement.query.bad_value")
        out.append(suffixes)
    return tuple(out)


def _root_required(params: dict[str, list[str]]) -> tuple[frozenset[str], frozenset[str]]:
    values = params.get("root_required", [])
    if not values:
        return frozenset(), frozenset()
    if len(values) > 1:
        raise PlacementError(400, "Query parameter 'root_required' may be specified only once.",
                             code="placement.query.duplicate_key")
    names = [t.strip() for t in values[0].split(",")]
    if not all(n.lstrip("!") for n in names):
        raise PlacementError(400, f"{_INVALID}Expected 'root_required' parameter value of the form: "
                                  f"HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty trait in: {values[0]}")
    required = frozenset(n for n in names if not n.startswith("!"))
    forbidden = frozenset(n[1:] for n in names if n.startswith("!"))
    if required & forbidden:
        raise PlacementError(400, "Conflicting required and forbidden traits found in root_required: "
                                  f"{', '.join(sorted(required & forbidden))}", code="placement.query.bad_value")
    return required, forbidden


def _check_groups(call: Call, groups: dict[str, dict[str, Any]], subtrees: tuple[frozenset[str], ...]) -> None:
    if call.version.at_least(36):
        resourceless = [s for s, g in groups.items() if not g.get("resources")]
        if len(resourceless) == len(groups):
            raise PlacementError(400, "There must be at least one resources or resources[$S] parameter.",
                                 code="placement.query.missing_value")
        named = set().union(*subtrees) if subtrees else set()
        bad = [s for s in resourceless if s not in named]
        if bad:
            raise PlacementError(400, "Resourceless suffixed group request should be specified in `same_subtree` "
                                      f"query param: bad group(s) - {bad}.", code="placement.query.bad_value")
        unknown = [s for s in sorted(named) if s not in groups]
        if unknown:
            raise PlacementError(400, f"Real suffixes should be specified in `same_subtree`: {unknown} not found in "
                                      f"{list(groups)}.", code="placement.query.bad_value")
    else:
        orphans = [f"required{s}" for s, g in groups.items() if g.get("required") and not g.get("resources")]
        if orphans:
            raise PlacementError(400, "All traits parameters must be associated with resources.  Found the "
                                      f"following orphaned traits keys: {', '.join(orphans)}")
        orphans = [f"member_of{s}" for s, g in groups.items()
                   if not g.get("resources") and (g.get("member_of") or g.get("forbidden_aggregates"))]
        if orphans:
            raise PlacementError(400, "All member_of parameters must be associated with resources. Found the "
                                      f"following orphaned member_of keys: {', '.join(orphans)}")
        if not all(g.get("resources") for g in groups.values()):
            raise PlacementError(400, "All request groups must specify resources.")
        if not groups:
            raise PlacementError(400, "At least one request group (`resources` or `resources{$S}`) is required.")
    if call.version.at_least(22):
        conflicts = sorted(f"required{s}: ({', '.join(sorted(any_of))})" for s, g in groups.items()
                           for any_of in g.get("required", ()) if any_of <= g.get("forbidden_traits", frozenset()))
        if conflicts:
            raise PlacementError(400, "Conflicting required and forbidden traits found in the following traits "
                                      f"keys: {', '.join(conflicts)}")


def parse(call: Call, params: dict[str, list[str]]) -> CandidateQuery:
    _validate(call, params)
    wide_roots = _root_required(params)
    subtrees = _same_subtrees(params)
    groups = _groups(call, params)
    _check_groups(call, groups, subtrees)
    policy = params.get("group_policy", [None])[0]  # given twice, Placement takes the first (as for limit)
    if policy is None and sum(1 for s, g in groups.items() if s) > 1:
        raise PlacementError(400, 'The "group_policy" parameter is required when specifying more than one '
                                  '"resources{N}" parameter.')
    return CandidateQuery(
        groups=tuple(RequestGroup(suffix=s, **g) for s, g in groups.items()),
        limit=int(params["limit"][0]) if "limit" in params else None,
        group_policy=policy, root_required=wide_roots[0], root_forbidden=wide_roots[1],
        same_subtrees=subtrees, nested_aware=call.version.at_least(29))


async def listing(call: Call) -> Answer:
    accept_json(call.request)
    params: dict[str, list[str]] = {}
    for name, value in call.request.query_params.multi_items():
        params.setdefault(name, []).append(value)
    query = parse(call, params)
    if query.limit is not None and query.limit <= AT_ONCE_LIMIT:
        found = call.placement.without_waiting(lambda: _candidates(call.placement, query))
        if found is not None:
            return json_response(call, serialize(call, query, found))
    return json_response(call, await call.call(_answer, call, query))


# Up to this many candidates (Nova's default max_placement_results) an answer takes about a millisecond at
# 10,000 providers: it is made on the event loop when the replica can answer at once (without_waiting).
AT_ONCE_LIMIT = 1000


def _answer(call: Call, query: CandidateQuery) -> msgspec.Raw:
    """The answer's JSON, made in one trip off the event loop (each trip is a thread hop): the names checked,
    the candidates found, serialized and encoded (10,000 candidates are ~4.7 MB of JSON: not on the loop)."""
    return msgspec.Raw(msgspec.json.encode(serialize(call, query, _candidates(call.placement, query))))


def _candidates(placement: Placement, query: CandidateQuery) -> Candidates:
    unknown = placement.missing_records("resource_class", [rc for g in query.groups for rc, _ in g.resources])
    if unknown:
        raise PlacementError(400, f"Invalid resource class in resources parameter: No such resource class "
                                  f"{unknown[0]}.")
    traits = set(query.root_required | query.root_forbidden)
    for g in query.groups:
        traits |= {t for any_of in g.required for t in any_of} | g.forbidden_traits
    unknown = placement.missing_records("trait", sorted(traits))
    if unknown:
        raise PlacementError(400, f"No such trait(s): {', '.join(unknown)}.")
    return placement.allocation_candidates(query)


def serialize(call: Call, query: CandidateQuery, found: Candidates) -> Any:
    """The answer for this microversion: at the newest ones the domain objects are Placement's shape already
    and are encoded as they are (thousands of candidates per answer); older ones drop or reshape fields."""
    v = call.version
    if v.at_least(34):
        return found
    requests: list[dict[str, Any]] = []
    for request in found.allocation_requests:
        if v.at_least(12):
            requests.append({"allocations": request.allocations})
        else:
            requests.append({"allocations": [{"resource_provider": {"uuid": uuid}, "resources": part.resources}
                                             for uuid, part in request.allocations.items()]})
    asked = None if v.at_least(27) else {rc for g in query.groups for rc, _ in g.resources}
    summaries = {}
    for uuid, summary in found.provider_summaries.items():
        out: dict[str, Any] = {"resources": {rc: usage for rc, usage in summary.resources.items()
                                             if asked is None or rc in asked}}
        if v.at_least(17):
            out["traits"] = summary.traits
        if v.at_least(29):
            out["parent_provider_uuid"] = summary.parent_provider_uuid
            out["root_provider_uuid"] = summary.root_provider_uuid
        summaries[uuid] = out
    return {"allocation_requests": requests, "provider_summaries": summaries}
