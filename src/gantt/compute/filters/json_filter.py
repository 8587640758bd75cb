"""JsonFilter: hosts chosen by a JSON query in the ``query`` scheduler hint, evaluated without ``eval``.

Grammar (Nova's): a query is a list ``[op, arg, …]``; ``op`` is one of ``= < > <= >= in`` (the first argument
compared with every other one, all must hold; ``in``: the first equals one of the others; fewer than two
arguments: false), ``not`` (each argument negated, giving a list), ``or`` / ``and`` (any / all arguments true). An
argument is a nested query, a literal, or a string ``$attr[.key…]`` naming a HostState attribute (``$free_ram_mb``,
``$hypervisor_hostname``, ``$stats.foo``, ``$cpu_info.vendor`` …). An argument that comes out empty (an unknown
attribute, a missing key, the empty string) is dropped before the operator sees the rest, per host. A top-level
list result passes if any element is true. An empty query passes everything.

Evaluation is vectorized: numeric attributes are columns, other attributes factors (a comparison runs once per
distinct value). Rows are first split by which attributes are absent, so dropping an argument is decided per
group, not per host. Comparisons Python cannot order (a string with a number) are false rather than an error.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gantt.compute.filters.base import CapacityUnknown, Filter, register
from gantt.compute.filters.hoststate import (
    CAPS_ATTRS,
    IDENTITY_ATTRS,
    NUMERIC_ATTRS,
    caps_attribute,
    caps_factor,
    descend,
    identity_attribute,
    numeric_attribute,
)
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable
from gantt.model import MAX_DEPTH, InvalidRequest

FIELD = "$.scheduler_hints.query"
_MAX_NODES = 2000
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq, "<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge,
}
COMMANDS = frozenset({*_COMPARE, "in", "not", "or", "and"})


class _Unsupported(Exception):
    """A construct the vectorized evaluator does not take (comparing a 'not' list that varies per host)."""


@dataclass(slots=True)
class Fac:
    """Per-row values as codes into distinct Python values (never None inside an evaluation group)."""

    codes: np.ndarray
    values: list[Any]


@dataclass(slots=True)
class NotList:
    """The list ``not`` returns; its length is the same on every row of a group."""

    items: list[Any]


Value = Any  # Python scalar | np.ndarray (float or bool) | Fac | NotList


def parse_query(raw: Any) -> list[Any] | None:
    """The hint as a query list (None: no query); InvalidRequest for anything malformed."""
    if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], str):
        raw = raw[0]  # Nova's API hands single hint values over as one-element lists
    if raw is None or raw == "" or raw == []:
        return None
    if isinstance(raw, str):
        try:
            query = json.loads(raw)
        except ValueError as exc:
            raise InvalidRequest(f"query is not valid JSON: {exc}", field=FIELD) from None
        except RecursionError:
            raise InvalidRequest("query nests too deeply", field=FIELD) from None
    else:
        query = raw
    if not query:
        return None
    if not isinstance(query, list):
        raise InvalidRequest("query must be a JSON list such as [\">=\", \"$free_ram_mb\", 1024]", field=FIELD)
    count = [0]

    def check(node: list[Any], depth: int) -> None:
        count[0] += 1
        if depth > MAX_DEPTH or count[0] > _MAX_NODES:
            raise InvalidRequest("query is too large or too deeply nested", field=FIELD)
        if not node:
            return  # an empty sub-query is true
        op = node[0]
        if not isinstance(op, str) or op not in COMMANDS:
            raise InvalidRequest(f"unknown query operator {op!r}; use one of {', '.join(sorted(COMMANDS))}",
                                 field=FIELD)
        for arg in node[1:]:
            if isinstance(arg, list):
                check(arg, depth + 1)

    check(query, 0)
    return query


def variables(query: list[Any]) -> set[str]:
    found: set[str] = set()
    stack = [query]
    while stack:
        node = stack.pop()
        for arg in node[1:]:
            if isinstance(arg, list):
                stack.append(arg)
            elif isinstance(arg, str) and arg.startswith("$"):
                found.add(arg)
    return found


def _resolve(table: HostTable, var: str) -> np.ndarray | Fac | None:
    """A ``$attr.key`` variable over live rows: a float column, a Fac (None among its values), or None (absent)."""
    path = var[1:].split(".")
    root, rest = path[0], path[1:]
    if root in NUMERIC_ATTRS:
        numeric = numeric_attribute(table, root)
        assert numeric is not None
        return None if rest else numeric.values
    if root in IDENTITY_ATTRS:
        identity = identity_attribute(table, root)
        assert identity is not None
        if rest:
            return None
        return Fac(identity.factor.codes, list(identity.factor.values))
    if root in CAPS_ATTRS:
        factor = caps_factor(table)
        values = [caps_attribute(caps, root) for caps in factor.values]
        if rest:
            values = [descend(v, rest) for v in values]
        return Fac(factor.codes, values)
    return None  # Nova: getattr(host_state, name, None) is None -> the argument is dropped


# ------------------------------------------------------------------------------------------ evaluation


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float)  # bool included: Python compares it as 0/1


def _py(op: Callable[[Any, Any], Any], a: Any, b: Any) -> bool:
    try:
        return bool(op(a, b))
    except TypeError:
        return False


def _as_factor(x: Value, size: int) -> tuple[np.ndarray, list[Any]]:
    if isinstance(x, Fac):
        return x.codes, x.values
    if isinstance(x, np.ndarray):
        uniq, codes = np.unique(x, return_inverse=True)
        return codes.reshape(-1), uniq.tolist()
    return np.zeros(size, dtype=np.int64), [x]


def _compare(op: Callable[[Any, Any], Any], a: Value, b: Value, size: int) -> Value:
    if isinstance(a, NotList):
        a = _plain(a)
    if isinstance(b, NotList):
        b = _plain(b)
    a_arr, b_arr = isinstance(a, np.ndarray), isinstance(b, np.ndarray)
    a_fac, b_fac = isinstance(a, Fac), isinstance(b, Fac)
    if not (a_arr or b_arr or a_fac or b_fac):
        return _py(op, a, b)
    # numpy for columns against numbers or columns
    if (a_arr and (b_arr or _is_number(b))) or (b_arr and _is_number(a)):
        return np.asarray(op(a, b), dtype=np.bool_)
    if (a_arr and not b_fac) or (b_arr and not a_fac):
        # a column against a string, list or dict: never equal, never ordered
        return np.zeros(size, dtype=np.bool_)
    if a_fac and not (b_arr or b_fac):
        fac: Fac = a
        lut = np.fromiter((_py(op, v, b) for v in fac.values), dtype=np.bool_, count=len(fac.values))
        return lut[fac.codes]
    if b_fac and not (a_arr or a_fac):
        fac = b
        lut = np.fromiter((_py(op, a, v) for v in fac.values), dtype=np.bool_, count=len(fac.values))
        return lut[fac.codes]
    # two per-row operands, at least one a factor: evaluate once per distinct pair
    ca, va = _as_factor(a, size)
    cb, vb = _as_factor(b, size)
    width = max(len(vb), 1)
    pairs, inverse = np.unique(ca.astype(np.int64) * width + cb, return_inverse=True)
    lut = np.fromiter((_py(op, va[p // width], vb[p % width]) for p in pairs.tolist()), dtype=np.bool_,
                      count=len(pairs))
    return lut[inverse.reshape(-1)]


def _plain(value: NotList) -> list[Any]:
    if any(isinstance(item, np.ndarray | Fac | NotList) for item in value.items):
        raise _Unsupported
    return list(value.items)


def _truth(x: Value) -> Value:
    if isinstance(x, NotList):
        return bool(x.items)  # a non-empty list is true whatever it holds
    if isinstance(x, np.ndarray):
        return x if x.dtype == np.bool_ else x != 0
    if isinstance(x, Fac):
        lut = np.fromiter((bool(v) for v in x.values), dtype=np.bool_, count=len(x.values))
        return lut[x.codes]
    return bool(x)


def _all(parts: list[Value], size: int) -> Value:
    out: Value = True
    for part in parts:
        if part is False:
            return False
        if part is True:
            continue
        out = part if out is True else out & part
    return out


def _any(parts: list[Value]) -> Value:
    out: Value = False
    for part in parts:
        if part is True:
            return True
        if part is False:
            continue
        out = part if out is False else out | part
    return out


class _Evaluator:
    def __init__(self, env: dict[str, Value], size: int) -> None:
        self.env = env
        self.size = size

    def run(self, node: list[Any]) -> Value:
        if not node:
            return True
        op = node[0]
        args: list[Value] = []
        for arg in node[1:]:
            if isinstance(arg, list):
                value = self.run(arg)
            elif isinstance(arg, str):
                if not arg:
                    value = None
                elif arg.startswith("$"):
                    value = self.env[arg]
                else:
                    value = arg
            else:
                value = arg
            if value is not None:
                args.append(value)
        if op in _COMPARE:
            if len(args) < 2:
                return False
            return _all([_compare(_COMPARE[op], args[0], other, self.size) for other in args[1:]], self.size)
        if op == "in":
            if len(args) < 2:
                return False
            return _any([_compare(operator.eq, args[0], other, self.size) for other in args[1:]])
        if op == "not":
            return NotList([_negate(a) for a in args])
        truths = [_truth(a) for a in args]
        return _any(truths) if op == "or" else _all(truths, self.size)


def _negate(x: Value) -> Value:
    t = _truth(x)
    return ~t if isinstance(t, np.ndarray) else not t


def evaluate(table: HostTable, query: list[Any]) -> np.ndarray:
    n = table.n
    resolved = {var: _resolve(table, var) for var in variables(query)}
    # Split rows by which factor variables are absent there: within a group an argument is dropped everywhere
    # or nowhere, which is what lets the rest run on whole columns.
    pattern = np.zeros(n, dtype=np.int64)
    factors = [(var, value) for var, value in resolved.items() if isinstance(value, Fac)]
    if len(factors) > 62:
        raise InvalidRequest("query names too many different attributes", field=FIELD)
    for bit, (_, fac) in enumerate(factors):
        absent = np.fromiter((v is None for v in fac.values), dtype=np.bool_, count=len(fac.values))
        pattern |= absent[fac.codes].astype(np.int64) << bit
    out = np.zeros(n, dtype=np.bool_)
    if not factors:
        groups = [0]
    elif len(factors) <= 16:  # few patterns: count them in one pass rather than sort every row
        groups = np.flatnonzero(np.bincount(pattern, minlength=1)).tolist()
    else:
        groups = np.unique(pattern).tolist()
    for group in groups:
        rows = None if len(groups) == 1 else np.flatnonzero(pattern == group)
        size = n if rows is None else len(rows)
        env: dict[str, Value] = {}
        for bit_var, value in resolved.items():
            if value is None:
                env[bit_var] = None
            elif isinstance(value, Fac):
                bit = next(i for i, (v, _) in enumerate(factors) if v == bit_var)
                if group >> bit & 1:
                    env[bit_var] = None
                else:
                    env[bit_var] = Fac(value.codes if rows is None else value.codes[rows], value.values)
            else:
                env[bit_var] = value if rows is None else value[rows]
        try:
            result = _Evaluator(env, size).run(query)
        except _Unsupported:
            raise InvalidRequest("comparing the result of 'not' with per-host values is not supported",
                                 field=FIELD) from None
        if isinstance(result, NotList):
            result = _any([_truth(item) for item in result.items])
        truth = _truth(result)
        if rows is None:
            out[:] = truth
        else:
            out[rows] = truth
    return out


@register
class JsonFilter(Filter):
    name = "JsonFilter"

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        query = ctx.scratch.get("json_query", ())
        if query == ():
            query = ctx.scratch["json_query"] = parse_query(ctx.hints.get("query"))
        if query is None:
            return None
        return evaluate(table, query)

    def headroom(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        if ctx.hints.get("query") is None:
            return None
        raise CapacityUnknown(self.name, "may read usage that each claim moves (the query hint)")
