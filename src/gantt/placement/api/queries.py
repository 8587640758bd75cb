"""Query-string values Placement parses the same way wherever they appear (provider listings, allocation
candidates): resources, required traits, member_of, in_tree — with Placement's wording for each mistake."""

from __future__ import annotations

from gantt.placement.api.errors import PlacementError
from gantt.placement.api.wire import Call, uuid_like


def in_tree_param(value: str) -> str:
    if not uuid_like(value.strip()):
        raise PlacementError(400, "Invalid query string parameters: Expected 'in_tree' parameter to be a format "
                                  f"of uuid. Got: {value}")
    return value.strip()


def member_of_param(call: Call, values: list[str]) -> tuple[tuple[frozenset[str], ...], frozenset[str]]:
    if len(values) > 1 and not call.version.at_least(24):
        raise PlacementError(400, "Multiple member_of parameters are not supported")
    required: list[frozenset[str]] = []
    forbidden: set[str] = set()
    for value in values:
        if "," in value and not value.startswith(("in:", "!in:")):
            raise PlacementError(400, "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' "
                                      f"keyword using the valid microversion. Got: {value}")
        negated = value.startswith("!")
        body = value[1:] if negated else value
        names = set(body[3:].split(",")) if body.startswith("in:") else {body}
        for name in names:
            if not uuid_like(name):
                raise PlacementError(400, "Invalid query string parameters: Expected 'member_of' parameter to "
                                          f"contain valid UUID(s). Got: {name}")
        if negated:
            if not call.version.at_least(32):
                raise PlacementError(400, "Forbidden member_of parameters are not supported in the specified "
                                          "microversion")
            forbidden |= names
        else:
            required.append(frozenset(names))
    return tuple(required), frozenset(forbidden)


def required_param(call: Call, values: list[str]) -> tuple[tuple[frozenset[str], ...], frozenset[str]]:
    any_of = call.version.at_least(39)
    values = values if any_of else values[-1:]
    required: list[frozenset[str]] = []
    forbidden: set[str] = set()
    for value in values:
        if value.startswith("in:"):
            if not any_of:
                raise PlacementError(400, "Invalid query string parameters: The format "
                                          f"'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since microversion "
                                          f"1.39. Got: {value}")
            names = {t.strip() for t in value[3:].split(",")}
            if not all(names) or any(t.startswith("!") for t in names):
                raise PlacementError(400, f"Invalid query string parameters: Expected 'required' parameter value "
                                          f"of the form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: {value}")
            required.append(frozenset(names))
            continue
        names_all = [t.strip() for t in value.split(",")]
        banned = {t[1:] for t in names_all if t.startswith("!")}
        if not all(names_all) or not all(banned):
            form = "HW_CPU_X86_VMX,!CUSTOM_MAGIC" if call.version.at_least(22) else "HW_CPU_X86_VMX,CUSTOM_MAGIC"
            raise PlacementError(400, "Invalid query string parameters: Expected 'required' parameter value of "
                                      f"the form: {form}. Got an empty trait in: {value}")
        if banned and not call.version.at_least(22):
            raise PlacementError(400, "Invalid query string parameters: Expected 'required' parameter value of "
                                      f"the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: {value}")
        required += [frozenset({t}) for t in names_all if not t.startswith("!")]
        forbidden |= banned
    return tuple(required), frozenset(forbidden)


def resources_param(value: str) -> tuple[tuple[str, int], ...]:
    form = "Expected resources query string parameter in form: ?resources=VCPU:2,MEMORY_MB:1024."
    if not value.strip():
        raise PlacementError(400, f"Badly formed resources parameter. {form} Got: empty string.")
    out: dict[str, int] = {}
    for part in value.split(","):
        rc, sep, amount = part.partition(":")
        if not sep or ":" in amount:
            raise PlacementError(400, f"Badly formed resources parameter. {form} Got: {part}.")
        try:
            number = int(amount)
        except ValueError:
            raise PlacementError(400, f"Requested resource {rc} expected positive integer amount. "
                                      f"Got: {amount}.") from None
        if number < 1:
            raise PlacementError(400, f"Requested resource {rc} requires amount >= 1. Got: {number}.")
        out[rc] = number
    return tuple(out.items())
