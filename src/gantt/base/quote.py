"""How much of a client's value a refusal repeats: a short prefix, never the whole of it.

A 10 MB provider name was answered with a 10 MB 400 that quoted it: an amplifier for whoever sends it and a flood
in every log that records answers. ``quote`` shortens one value where a message names it; ``clip`` bounds a whole
message (any value a message quotes as is, found or not, is then cut in its middle), so no refusal is longer than
``MAX_DETAIL`` characters, whichever handler made it.
"""

from __future__ import annotations

from typing import Any

QUOTE_CHARS = 64  # of a value named in a refusal
MAX_DETAIL = 1024  # of a refusal's whole message


def quote(value: Any, limit: int = QUOTE_CHARS) -> str:
    """``repr(value)``, or its first ``limit`` characters and how long it was."""
    if isinstance(value, str | bytes) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def clip(text: str, limit: int = MAX_DETAIL) -> str:
    """``text`` within ``limit`` characters: its start and its end (where a message says which rule failed) kept,
    the middle left out and counted."""
    if len(text) <= limit:
        return text
    tail = limit // 4
    head = limit - tail - 40
    return f"{text[:head]} ... ({len(text) - head - tail} characters left out) ... {text[-tail:]}"
