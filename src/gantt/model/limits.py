"""The bounds on every input, in one place so that a field cannot be bounded in one module and unbounded in another:
the annotated string types, list sizes and number ranges the Structs' fields use, and the checks of free-form JSON."""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec
from msgspec import Meta

# Limits on every string and list an input carries (README "The service"; tests/test_input_limits.py walks
# every request type for one without a bound): what Nova's database holds (255 for names, ids, keys and
# metadata), and list sizes no real cloud reaches, so that one request cannot write hundreds of megabytes. A
# name that is part of a URL (host, node, consumer, aggregate id) must also be addressable: not empty, no '/',
# no control characters, not '.' or '..'.
MAX_TEXT = 255
NAME_PATTERN = r"^(?!\.\.?$)[^/\x00-\x1f\x7f]+$"
Name = Annotated[str, Meta(min_length=1, max_length=MAX_TEXT, pattern=NAME_PATTERN,
                           description="1-255 characters; no '/', no control characters, not '.' or '..'")]
Text = Annotated[str, Meta(max_length=MAX_TEXT)]
Key = Annotated[str, Meta(min_length=1, max_length=MAX_TEXT)]
_NAME_RE = re.compile(NAME_PATTERN)


def valid_name(value: str) -> bool:
    return len(value) <= MAX_TEXT and _NAME_RE.match(value) is not None


MAX_HOSTS = 1_000_000  # hosts in one aggregate
MAX_INSTANCES = 100_000  # instances one host lists
MAX_LIST = 10_000  # hosts or members a request names, traits, metrics, reports in a batch, …
MAX_NUM_INSTANCES = 1_000  # instances in one request
# Nova joins every aggregate a project may use into one comma-separated requested_destination entry, and a
# Placement member_of entry may name as many ("in:a,b,…"): room for MAX_LIST UUIDs, their commas and a "!in:".
MAX_AGGREGATE_REFS = len("!in:") + MAX_LIST * 37
AggregateRefs = Annotated[str, Meta(max_length=MAX_AGGREGATE_REFS)]
# An integer aggregate id is Nova's database id. The service refuses any integer beyond int64 in a body
# (service.app._check_ints); the type says so too, so that the library and the OpenAPI document agree with it.
MAX_INT64 = 2**63 - 1
AggregateId = Annotated[int, Meta(ge=-MAX_INT64, le=MAX_INT64,
                                  description="an integer id is refused beyond int64 (±(2^63-1))")]

# Stated ranges for every number that reaches a column (README "The service"): counts and capacities are
# Placement's inventory bound (a 32-bit signed integer), ratios at most MAX_RATIO, floats finite, so that no
# product or sum over a node overflows into inf or NaN and then into a weight.
MAX_COUNT = 2**31 - 1
MAX_RATIO = 10_000.0


MAX_DEPTH = 32  # free-form JSON (hints, image properties, cpu_info, stats) nests at most this deep
# ... and encodes to at most this many bytes: above the 112 KiB body Nova's own API takes (oslo.middleware's
# max_request_body_size), so every hint Nova accepts fits, and twice the Text column Nova keeps a node's stats
# in. Strings and lists inside it need no bound of their own then.
MAX_JSON_BYTES = 128 * 1024
_FREE_FORM = f"free-form JSON: at most {MAX_JSON_BYTES} bytes encoded, {MAX_DEPTH} levels deep"
FreeForm = Annotated[dict[Text, Any], Meta(max_length=MAX_LIST, extra={"max_bytes": MAX_JSON_BYTES},
                                           extra_json_schema={"x-max-bytes": MAX_JSON_BYTES,
                                                              "description": _FREE_FORM})]
JsonText = Annotated[str, Meta(max_length=MAX_JSON_BYTES, description="JSON text, at most "
                                                                      f"{MAX_JSON_BYTES} characters")]


def check_json(name: str, value: Any) -> None:
    """Refuse free-form JSON nested deeper than MAX_DEPTH or larger than MAX_JSON_BYTES encoded: code that walks
    it (JsonFilter, capabilities, the encoders) recurses, so a body 100,000 levels deep must be a 400, not a
    RecursionError later; and a host's stats are kept, interned and copied into every replica."""
    if not value:
        return
    encoded = _encoded(name, value)
    # Each level of nesting opens a container, and each container writes one "{" or "[" (a string may add more):
    # with at most MAX_DEPTH of them the value cannot be too deep, and the walk is not needed. The walk was most
    # of what checking a host report's cpu_info and stats cost, on every report.
    if encoded.count(b"{") + encoded.count(b"[") > MAX_DEPTH:
        check_depth(name, value)
    size = len(encoded)
    if size > MAX_JSON_BYTES:
        raise ValueError(f"{name} must encode to at most {MAX_JSON_BYTES} bytes of JSON, not {size}")


def _encoded(name: str, value: Any) -> bytes:
    try:
        return msgspec.json.encode(value)
    except RecursionError:  # deeper than the encoder goes: deeper than MAX_DEPTH, said as the walk would say it
        raise ValueError(f"{name} must nest at most {MAX_DEPTH} levels deep") from None
    except (TypeError, msgspec.EncodeError):  # built in Python (the library face): a JSON body cannot do this
        check_depth(name, value)  # too deep is said first, as before the encoding
        raise ValueError(f"{name} must hold JSON values only") from None


def check_json_text(name: str, text: str) -> None:
    """JSON text held as a string (Nova keeps cpu_info so) is decoded where a filter reads into it: held to the
    limits of the same value given as an object, so that 20,000 nested lists in a string cannot pass the report
    and then fail every decision that reads the node. Text that is no JSON is taken: a filter reads nothing in it.
    """
    if "[" not in text and "{" not in text:
        return  # a scalar, or no JSON: nothing nests (most reports send cpu_info as an object anyway)
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return
    except RecursionError:
        raise ValueError(f"{name} must nest at most {MAX_DEPTH} levels deep") from None
    check_depth(name, value)


def check_depth(name: str, value: Any) -> None:
    # Every host report is checked (its cpu_info and stats), most of them flat or nearly: only containers are
    # stacked, so a scalar costs a type test and no tuple.
    if not isinstance(value, dict | list):
        return
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"{name} must nest at most {MAX_DEPTH} levels deep")
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))

