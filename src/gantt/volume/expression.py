"""The expression language of Cinder's filter_function / goodness_function, parsed and evaluated without eval.

Cinder (cinder/scheduler/evaluator/evaluator.py) builds it with pyparsing's infix_notation; this is a recursive
descent parser over the same levels, lowest precedence first, reproducing what that grammar does (under
pyparsing 3.1, see tests/parity/cinder_reference.py):

    list      := or [ "," list ]                    a, b, c -> [a, b, c]
    or        := and { ("OR" | "or" | "||") and }   only the first two operands count, as in Cinder
    and       := ternary { ("AND" | "and" | "&&") ternary }          (idem)
    ternary   := compare { "?" compare ":" compare }                 (only the first ?: counts; lazy)
    compare   := negate { ("<" | "<=" | ">" | ">=" | "==" | "!=" | "<>") negate }   chained: 1 < x < 3
    negate    := ("NOT" | "not" | "!") negate | sum
    sum       := product { ("+" | "-") product }
    product   := signed { ("*" | "/") signed }      "/" divides by float(); by zero: an error
    signed    := ("+" | "-") signed | power
    power     := call [ "^" power ]
    call      := WORD call | atom                   any word followed by an operand is a function call:
                                                    abs, max, min; any other name is an error
    atom      := REAL | INTEGER | WORD | QUOTED | "(" list ")"

WORD is ``[A-Za-z_.]+``; a word ``dict.key`` names a variable (stats, capabilities, extra, volume, qos), read
then turned into int, else float, else kept (quotes removed from strings), exactly as Cinder's EvalConstant does
(so ``capabilities.x`` reported as 2.5 reads as 2). Operator words match as prefixes, as pyparsing's one_of does.
Any failure (a parse error, a missing variable, a type error) raises ``EvaluationError``: DriverFilter then fails
the backend and GoodnessWeigher scores it 0, as Cinder does.

Parsing is memoized per expression text; evaluation walks a small tuple tree.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any


class EvaluationError(Exception):
    """The expression cannot be parsed or evaluated for these values."""


_WS = re.compile(r"\s*")
_REAL = re.compile(r"\d+\.\d+")
_INT = re.compile(r"\d+")
_WORD = re.compile(r"[A-Za-z_.]+")
_QUOTED = re.compile(r"\"(?:[^\"\n\\]|\\.|\"\")*\"|'(?:[^'\n\\]|\\.|'')*'")
_VARIABLE = re.compile(r"^[a-zA-Z_]+\.[a-zA-Z_]+$")
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "!=": operator.ne, "==": operator.eq, "<>": operator.ne,
}
# longest first, as pyparsing's one_of orders alternatives that are prefixes of others
_COMPARE_OPS = ("<=", "<>", ">=", "!=", "==", "<", ">")
_OR = ("OR", "or", "||")
_AND = ("AND", "and", "&&")
_NOT = ("NOT", "not", "!")
_FUNCTIONS: dict[str, Callable[..., Any]] = {"abs": abs, "max": max, "min": min}
_MAX_LENGTH = 4096
_MAX_DEPTH = 200

Node = tuple[Any, ...]


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    def skip(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()  # type: ignore[union-attr]  # _WS matches the empty string

    def peek(self, options: tuple[str, ...]) -> str | None:
        self.skip()
        for option in options:
            if self.text.startswith(option, self.pos):
                return option
        return None

    def take(self, options: tuple[str, ...]) -> str | None:
        found = self.peek(options)
        if found is not None:
            self.pos += len(found)
        return found

    def fail(self, what: str) -> EvaluationError:
        return EvaluationError(f"parse error at character {self.pos}: expected {what}")

    def nested(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise EvaluationError("expression nested too deeply")

    def parse(self) -> Node:
        node = self.list_()
        self.skip()
        if self.pos != len(self.text):
            raise self.fail("end of text")
        return node

    def list_(self) -> Node:
        self.nested()
        left = self.or_()
        if self.take((",",)):
            return ("list", left, self.list_())
        self.depth -= 1
        return left

    def _binary(self, kind: str, ops: tuple[str, ...], below: Callable[[], Node]) -> Node:
        first = below()
        operands = [first]
        while self.take(ops):
            operands.append(below())
        return first if len(operands) == 1 else (kind, operands[0], operands[1])

    def or_(self) -> Node:
        return self._binary("or", _OR, self.and_)

    def and_(self) -> Node:
        return self._binary("and", _AND, self.ternary)

    def ternary(self) -> Node:
        condition = self.compare()
        branches: list[Node] = []
        while True:
            start = self.pos
            if not self.take(("?",)):
                break
            yes = self.compare()
            if not self.take((":",)):
                self.pos = start  # pyparsing's group needs the whole "? a : b"; without it, nothing is taken
                break
            branches.append((yes, self.compare()))
        if not branches:
            return condition
        return ("if", condition, branches[0][0], branches[0][1])

    def compare(self) -> Node:
        first = self.negate()
        chain: list[tuple[str, Node]] = []
        while (op := self.take(_COMPARE_OPS)) is not None:
            chain.append((op, self.negate()))
        return first if not chain else ("compare", first, tuple(chain))

    def negate(self) -> Node:
        if self.take(_NOT):
            self.nested()
            node = ("not", self.negate())
            self.depth -= 1
            return node
        return self.sum()

    def sum(self) -> Node:
        return self._chain("sum", ("+", "-"), self.product)

    def product(self) -> Node:
        return self._chain("product", ("*", "/"), self.signed)

    def _chain(self, kind: str, ops: tuple[str, ...], below: Callable[[], Node]) -> Node:
        first = below()
        rest: list[tuple[str, Node]] = []
        while True:
            start = self.pos
            op = self.take(ops)
            if op is None:
                break
            try:
                rest.append((op, below()))
            except EvaluationError:
                self.pos = start  # "1 -" : the operator is not taken; parseAll then fails on it
                break
        return first if not rest else (kind, first, tuple(rest))

    def signed(self) -> Node:
        sign = self.take(("+", "-"))
        if sign is None:
            return self.power()
        self.nested()
        node = ("sign", -1 if sign == "-" else 1, self.signed())
        self.depth -= 1
        return node

    def power(self) -> Node:
        base = self.call()
        start = self.pos
        if self.take(("^",)):
            try:
                self.nested()
                exponent = self.power()
                self.depth -= 1
            except EvaluationError:
                self.pos = start
                return base
            return ("pow", base, exponent)
        return base

    def call(self) -> Node:
        self.skip()
        start = self.pos
        word = _WORD.match(self.text, self.pos)
        if word is not None:
            self.pos = word.end()
            after = self.pos
            try:
                self.nested()
                argument = self.call()
                self.depth -= 1
                return ("call", word.group(), argument)
            except EvaluationError:
                self.pos = after
                self.depth -= 1
            self.pos = start
        return self.atom()

    def atom(self) -> Node:
        self.skip()
        for pattern in (_REAL, _INT, _WORD, _QUOTED):
            found = pattern.match(self.text, self.pos)
            if found is not None:
                self.pos = found.end()
                return ("const", found.group())
        if self.take(("(",)):
            inner = self.list_()
            if not self.take((")",)):
                raise self.fail("')'")
            return inner
        raise self.fail("an operand")


def parse(text: str) -> Node:
    """The expression's tree; EvaluationError when it does not parse."""
    tree, error = _parse(text)
    if error is not None:
        raise EvaluationError(error)
    assert tree is not None
    return tree


@functools.lru_cache(maxsize=1024)
def _parse(text: str) -> tuple[Node | None, str | None]:
    if len(text) > _MAX_LENGTH:
        return None, f"expression longer than {_MAX_LENGTH} characters"
    try:
        return _Parser(text).parse(), None
    except EvaluationError as exc:
        return None, str(exc)
    except RecursionError:
        return None, "expression nested too deeply"


def _constant(token: str, names: Mapping[str, Any]) -> Any:
    value: Any = token
    if _VARIABLE.match(token):
        which, entry = token.split(".")
        try:
            value = names[which][entry]
        except KeyError:
            raise EvaluationError(f"no variable {token}") from None
        except TypeError:
            raise EvaluationError(f"{which} is not a dictionary") from None
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return value.replace('"', "").replace("'", "") if isinstance(value, str) else value


# Bounds Cinder does not have: a backend's expression must not make a decision take seconds or gigabytes
# ("9 ^ 9 ^ 9", "'x' * 100000000"). Within them, results are Cinder's; beyond them the expression is an error.
_MAX_EXPONENT = 1024
_MAX_REPEAT = 4096


def _power(base: Any, exponent: Any) -> Any:
    if isinstance(exponent, int | float) and isinstance(base, int | float) and abs(exponent) > _MAX_EXPONENT \
            and abs(base) > 1:
        raise EvaluationError("exponent too large")
    return pow(base, exponent)


def _times(left: Any, right: Any) -> Any:
    for seq, count in ((left, right), (right, left)):
        if isinstance(seq, str | list) and isinstance(count, int) and count * max(1, len(seq)) > _MAX_REPEAT:
            raise EvaluationError("repetition too large")
    return left * right


def _eval(node: Node, names: Mapping[str, Any]) -> Any:
    kind = node[0]
    if kind == "const":
        return _constant(node[1], names)
    if kind == "list":
        left, right = _eval(node[1], names), _eval(node[2], names)
        return [left, *right] if type(right) is list else [left, right]
    if kind == "or":
        left, right = _eval(node[1], names), _eval(node[2], names)
        return left or right
    if kind == "and":
        left, right = _eval(node[1], names), _eval(node[2], names)
        return left and right
    if kind == "if":
        return _eval(node[2], names) if _eval(node[1], names) else _eval(node[3], names)
    if kind == "compare":
        left = _eval(node[1], names)
        for op, operand in node[2]:
            right = _eval(operand, names)
            if not _COMPARE[op](left, right):
                return False
            left = right
        return True
    if kind == "not":
        return not _eval(node[1], names)
    if kind == "sum":
        total = _eval(node[1], names)
        for op, operand in node[2]:
            total = total + _eval(operand, names) if op == "+" else total - _eval(operand, names)
        return total
    if kind == "product":
        product = _eval(node[1], names)
        for op, operand in node[2]:
            if op == "*":
                product = _times(product, _eval(operand, names))
            else:
                divisor = float(_eval(operand, names))
                if divisor == 0:
                    raise EvaluationError("division by zero")
                product = product / divisor
        return product
    if kind == "sign":
        return node[1] * _eval(node[2], names)
    if kind == "pow":
        return _power(_eval(node[1], names), _eval(node[2], names))
    if kind == "call":
        function = _FUNCTIONS.get(node[1])
        if function is None:
            raise EvaluationError(f"no function {node[1]!r}")
        args = _eval(node[2], names)
        return function(*args) if type(args) is list else function(args)
    raise AssertionError(kind)  # pragma: no cover


def evaluate(text: str, **names: Any) -> Any:
    """Evaluate ``text`` with the variable dictionaries given (extra, stats, capabilities, volume, qos)."""
    tree = parse(text)
    try:
        return _eval(tree, names)
    except EvaluationError:
        raise
    except (ArithmeticError, TypeError, ValueError, AttributeError, RecursionError, MemoryError) as exc:
        raise EvaluationError(f"{type(exc).__name__}: {exc}") from None
