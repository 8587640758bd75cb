"""Decoding input (JSON bytes or builtins) into Structs, with errors that name the field (``$.flavor.vcpus``)."""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from gantt.model.errors import InvalidRequest
from gantt.model.limits import MAX_DEPTH

T = TypeVar("T")

# Where a msgspec error message says the bad value is (``at `$.flavor.vcpus` ``).
MSGSPEC_PATH = re.compile(r"at `([^`]*)`")
_KEY_PATH = re.compile(r"in `(\$[^`]*)`")
# Our own __post_init__ checks start their message with the field's name ("memory_mb must be >= 0"); msgspec
# reports them at the enclosing struct's path, so the name is appended to point at the field itself.
_OWN_FIELD_RE = re.compile(r"^([a-z_][a-z0-9_.\[\]]*) must ")


def decode(data: Any, type_: type[T], *, path: str = "$") -> T:
    """Turn builtins (a dict from JSON) or raw JSON bytes into a Struct, or raise InvalidRequest naming the field."""
    if isinstance(data, type_):
        return data
    try:
        if isinstance(data, bytes | bytearray | memoryview | str):
            return msgspec.json.decode(data, type=type_, strict=True)
        return msgspec.convert(data, type_, strict=True)
    except msgspec.ValidationError as exc:
        message = str(exc)
        match = _KEY_PATH.search(message) or MSGSPEC_PATH.search(message)  # a bad dict key: "at `key` in `$.x`"
        where = match.group(1) if match else "$"
        if path != "$":
            where = path + where[1:]
        message = _KEY_PATH.sub("", MSGSPEC_PATH.sub("", message)).rstrip(" -")
        own = _OWN_FIELD_RE.match(message)
        if own:
            where = f"{where}.{own.group(1)}"
        raise InvalidRequest(f"{message} (at {where})", field=where) from None
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"malformed JSON: {exc}", field=path) from None
    except RecursionError:
        raise InvalidRequest(f"JSON nested too deeply (free-form fields: at most {MAX_DEPTH} levels)",
                             field=path) from None
    except UnicodeDecodeError as exc:
        raise InvalidRequest(f"body is not valid UTF-8 (byte {exc.start})", field=path) from None


def to_builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)
