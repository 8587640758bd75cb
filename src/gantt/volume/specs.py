"""Cinder's extra-spec matching (cinder/scheduler/filters/extra_specs_ops.py), on the capability's own value.

Unlike Nova's language (``gantt.compute.filters.extra_specs_ops``), Cinder compares the reported value itself, not its
string: a plain requirement matches only a value equal to the requirement string (``True`` never equals
``"True"``: use ``<is> True``); ``=`` means "at least" on floats; ``<is>`` compares booleans as oslo's
bool_from_string reads them; ``<or>`` lists alternatives; there is no ``<all-in>``. A requirement Cinder cannot
evaluate on a value (``<in>`` on a number) raises in Cinder and fails the request; here it fails the pool
(``Unmatchable``, so callers can tell).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any


class Unmatchable(Exception):
    """Cinder would raise evaluating this requirement on this value (a TypeError escapes its matcher)."""


_TRUE = frozenset({"1", "t", "true", "on", "y", "yes"})


def bool_from_string(value: Any) -> bool:
    """oslo_utils.strutils.bool_from_string(value) with its defaults (strict=False, default=False)."""
    if isinstance(value, bool):
        return value
    text = value.strip().lower() if isinstance(value, str) else str(value).strip().lower()
    return text in _TRUE


def _num(op: Callable[[float, float], bool]) -> Callable[[Any, str], bool]:
    return lambda value, operand: op(float(value), float(operand))


_OPS: dict[str, Callable[[Any, str], bool]] = {
    "=": _num(operator.ge),
    "<in>": lambda value, operand: operand in value,
    "<is>": lambda value, operand: bool_from_string(value) is bool_from_string(operand),
    "==": _num(operator.eq),
    "!=": _num(operator.ne),
    ">=": _num(operator.ge),
    "<=": _num(operator.le),
    "s==": operator.eq,
    "s!=": operator.ne,
    "s<": operator.lt,
    "s<=": operator.le,
    "s>": operator.gt,
    "s>=": operator.ge,
}


def match(value: Any, req: str | None) -> bool:
    """Does the capability value satisfy the requirement? Unmatchable where Cinder's matcher would raise."""
    if req is None:
        return value is None
    words = req.split()
    op = words[0] if words else None
    method = _OPS.get(op) if op is not None else None
    if op != "<or>" and method is None:
        return bool(value == req)
    if value is None:
        return False
    if op == "<or>":
        rest = words[1:]
        while True:
            if not rest:
                raise Unmatchable("'<or>' with nothing after it")  # Cinder: IndexError popping an empty list
            if rest.pop(0) == value:
                return True
            if not rest:
                return False
            rest.pop(0)  # the "<or>" keyword between alternatives, whatever it says
            if not rest:
                return False
    assert method is not None
    if len(words) < 2:
        return False
    try:
        return bool(method(value, words[1]))
    except ValueError:
        return False
    except TypeError as exc:
        raise Unmatchable(str(exc)) from None
