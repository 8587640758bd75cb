"""Nova's extra-spec matching language, shared by ComputeCapabilitiesFilter and AggregateInstanceExtraSpecsFilter.

A requirement string may start with an operator word; the rest are its operands:

- numeric: ``=`` (host value >= operand), ``==``, ``!=``, ``>=``, ``<=``
- string: ``s==``, ``s!=``, ``s<``, ``s<=``, ``s>``, ``s>=``
- ``<in>`` (operand is a substring of the host value), ``<all-in>`` (every operand is),
  ``<or>`` (``<or> a <or> b``: the host value equals one of them)
- anything else: the whole requirement must equal the host value.

Requirements are parsed once per request (``parse``), so a malformed one (a numeric operator with a non-numeric
operand, a bare ``<or>``) is reported as the caller's mistake before any host is looked at. A host value that is
not a number under a numeric operator simply does not match.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

# Nova's "=" means "at least", like a vCPU count.
NUMERIC_OPS: dict[str, Callable[[float, float], bool]] = {
    "=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    ">=": operator.ge,
    "<=": operator.le,
}
STRING_OPS: dict[str, Callable[[str, str], bool]] = {
    "s==": operator.eq,
    "s!=": operator.ne,
    "s<": operator.lt,
    "s<=": operator.le,
    "s>": operator.gt,
    "s>=": operator.ge,
}
_NUMPY_OPS: dict[str, Callable[[np.ndarray, float], np.ndarray]] = {
    "=": np.greater_equal,
    "==": np.equal,
    "!=": np.not_equal,
    ">=": np.greater_equal,
    "<=": np.less_equal,
}
OPERATORS = frozenset({*NUMERIC_OPS, *STRING_OPS, "<in>", "<all-in>", "<or>"})


@dataclass(frozen=True, slots=True)
class Requirement:
    """One parsed requirement. ``op`` None: plain equality with ``text``."""

    text: str
    op: str | None
    operands: tuple[str, ...]
    number: float | None = None  # the operand of a numeric operator

    @property
    def numeric(self) -> bool:
        return self.op in NUMERIC_OPS

    def matches(self, value: str | None) -> bool:
        """Does the host's value (already turned into a string, or None when absent) satisfy the requirement?"""
        if self.op is None:
            return value == self.text
        if value is None:
            return False
        op = self.op
        if op == "<or>":
            return value in self.operands
        if not self.operands:
            return False  # an operator with nothing to compare: Nova says no
        if op == "<in>":
            return self.operands[0] in value
        if op == "<all-in>":
            return all(item in value for item in self.operands)
        if op in STRING_OPS:
            return STRING_OPS[op](value, self.operands[0])
        try:
            host = float(value)
        except ValueError:
            return False
        assert self.number is not None
        return NUMERIC_OPS[op](host, self.number)

    def numeric_mask(self, values: np.ndarray) -> np.ndarray | None:
        """Vectorized ``matches`` over numeric host values (NaN: absent); None when the operator is not numeric."""
        op = self.op
        if op is None or not self.numeric:
            return None
        if self.number is None:
            return np.zeros(len(values), dtype=np.bool_)
        with np.errstate(invalid="ignore"):
            out = _NUMPY_OPS[op](values, self.number)
        if self.op == "!=":
            out &= ~np.isnan(values)
        return out


def parse(text: str) -> Requirement:
    """Parse a requirement; ValueError when the request itself is malformed."""
    if not isinstance(text, str):
        raise ValueError("must be a string")
    words = text.split()
    if not words or words[0] not in OPERATORS:
        return Requirement(text=text, op=None, operands=())
    op, rest = words[0], words[1:]
    if op == "<or>":
        if not rest:
            raise ValueError("'<or>' needs at least one value")
        # Values and "<or>" keywords alternate; Nova skips every second word without looking at it.
        return Requirement(text=text, op=op, operands=tuple(rest[0::2]))
    number = None
    if op in NUMERIC_OPS and rest:
        try:
            number = float(rest[0])
        except ValueError:
            raise ValueError(f"{op!r} compares numbers, but {rest[0]!r} is not one") from None
    return Requirement(text=text, op=op, operands=tuple(rest), number=number)


def to_text(value: Any) -> str:
    """The string Nova compares against: ``str()`` of the host's value."""
    return str(value)
