"""Every Struct type prepared for decoding at import, before any thread decodes one (issue 10)."""

from __future__ import annotations

from typing import Any

import msgspec

PREPARED: set[type] = set()


def prepare_types(namespace: dict[str, Any]) -> None:
    """Build msgspec's type information for every Struct a module defines, at import.

    msgspec builds a Struct type's decoding information lazily, on its first decode, and publishes it before it
    is complete; two threads doing the first decode of one type at once crashed a worker (SIGSEGV in
    ``msgspec.convert``). Building it here, while the module is imported and before any service thread starts,
    leaves the threads nothing to build.
    """
    for value in list(namespace.values()):
        if isinstance(value, type) and issubclass(value, msgspec.Struct) \
                and value.__module__ == namespace["__name__"]:
            msgspec.json.Decoder(value)
            PREPARED.add(value)
