"""Who may call what on the Placement face: Placement 16's policy rules, its credentials, and oslo.policy's
options (``[oslo_policy] enforce_new_defaults``, ``enforce_scope`` and ``policy_file``).

Credentials come as Placement sees them behind its middleware. With Gantt's token configured, the token must be
it, and it is the service's own credential (roles admin and service). Without one (loopback only), as Placement's
``noauth2``: the token is ``user[:project]``, roles come from ``X-Roles`` (else ``admin`` for the user ``admin``),
the project from ``X-Project-Id`` (else the token's), and ``OpenStack-System-Scope`` makes it system-scoped.

Rules are check strings, as oslo.policy reads them: ``@`` (anyone), ``!`` (no one), ``""`` (anyone),
``role:R``, ``rule:NAME``, ``KEY:VALUE`` (a credential, ``project_id``/``user_id``/``roles``/``system_scope``…,
equal to VALUE after ``%(key)s`` substitution from the target; a quoted or ``True`` KEY is a literal), joined by
``not``, ``and``, ``or`` (in that order of binding) and parentheses. A policy file (YAML or JSON, rule name ->
check string, or oslo.policy's older list form) overrides Placement's defaults rule by rule. Unlike oslo.policy,
which logs an unreadable rule and denies it, a rule that cannot be parsed, names a rule that does not exist, or is
not one of Placement's rules nor referred to by one refuses the start, naming the rule: a typo must not silently
change who may do what. Remote checks (``http:``) are refused too. The file is read once, at start.

Every API rule is project-scoped: with ``enforce_scope`` a system-scoped token is refused. With
``enforce_new_defaults`` off, each base rule Placement deprecated and the file does not override also grants to
its deprecated form, ``role:admin``, as oslo.policy does.
"""

from __future__ import annotations

import ast
import functools
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import yaml

from gantt.model import InvalidRequest
from gantt.placement.api.errors import PlacementError

if TYPE_CHECKING:
    from gantt.placement.api.wire import PlacementRequest

_ADMIN_OR_SERVICE = "rule:admin_or_service_api"

# Placement 16's base rules (placement/policies/base.py) and, for those it deprecated, the rule they replaced.
BASE_RULES: dict[str, str] = {
    "admin_api": "role:admin",
    "service_api": "role:service",
    "admin_or_service_api": "role:admin or role:service",
    "project_reader_api": "role:reader and project_id:%(project_id)s",
    "admin_or_project_reader_or_service_api": "role:admin or rule:project_reader_api or role:service",
}
DEPRECATED = {name: "role:admin" for name in BASE_RULES if name != "admin_api"}

# Placement's API rules with their defaults (placement/policies/*.py in Placement 16); all project-scoped.
RULES: dict[str, str] = {
    **{f"placement:resource_providers:{a}": _ADMIN_OR_SERVICE
       for a in ("list", "create", "show", "update", "delete", "usages")},
    **{f"placement:resource_classes:{a}": _ADMIN_OR_SERVICE for a in ("list", "create", "show", "update", "delete")},
    **{f"placement:resource_providers:inventories:{a}": _ADMIN_OR_SERVICE
       for a in ("list", "create", "show", "update", "delete")},
    **{f"placement:resource_providers:aggregates:{a}": _ADMIN_OR_SERVICE for a in ("list", "update")},
    **{f"placement:traits:{a}": _ADMIN_OR_SERVICE for a in ("list", "show", "update", "delete")},
    **{f"placement:resource_providers:traits:{a}": _ADMIN_OR_SERVICE for a in ("list", "update", "delete")},
    **{f"placement:allocations:{a}": _ADMIN_OR_SERVICE for a in ("manage", "list", "update", "delete")},
    "placement:resource_providers:allocations:list": _ADMIN_OR_SERVICE,
    "placement:allocation_candidates:list": _ADMIN_OR_SERVICE,
    "placement:usages": "rule:admin_or_project_reader_or_service_api",
    "placement:reshaper:reshape": "rule:service_api",
}

# A check: (target, credentials, the compiled rules by name) -> granted.
Check = Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], bool]


class _Target(dict[str, Any]):
    """Any key: lets a check string's ``%(key)s`` be validated at start without knowing the target."""

    def __missing__(self, key: str) -> str:
        return ""


def _substituted(match: str, target: Mapping[str, Any]) -> str | None:
    try:
        return match % target
    except KeyError:  # as oslo.policy: a key the target lacks denies
        return None


def _role(match: str) -> Check:
    def check(target: Mapping[str, Any], creds: Mapping[str, Any], rules: Mapping[str, Any]) -> bool:
        wanted = _substituted(match, target)
        return wanted is not None and wanted.lower() in {r.lower() for r in creds.get("roles", ())}
    return check


def _rule(name: str) -> Check:
    def check(target: Mapping[str, Any], creds: Mapping[str, Any], rules: Mapping[str, Any]) -> bool:
        return bool(rules[name](target, creds, rules))
    return check


def _generic(kind: str, match: str) -> Check:
    try:
        literal: Any = ast.literal_eval(kind)
    except (ValueError, SyntaxError):
        literal = None
        path = kind.split(".")
    else:
        path = []

    def found(value: Any, segments: list[str], wanted: str) -> bool:
        if not segments:
            return wanted == str(value)
        if not isinstance(value, Mapping) or segments[0] not in value:
            return False
        inner = value[segments[0]]
        if isinstance(inner, (list, tuple, frozenset, set)):
            return any(found(v, segments[1:], wanted) for v in inner)
        return found(inner, segments[1:], wanted)

    def check(target: Mapping[str, Any], creds: Mapping[str, Any], rules: Mapping[str, Any]) -> bool:
        wanted = _substituted(match, target)
        if wanted is None:
            return False
        return wanted == str(literal) if not path else found(creds, path, wanted)
    return check


def _constant(value: bool) -> Check:
    return lambda target, creds, rules: value


def _atom(token: str, refers: set[str]) -> Check:
    if token == "@":
        return _constant(True)
    if token == "!":
        return _constant(False)
    kind, colon, match = token.partition(":")
    if not colon or not kind:
        raise ValueError(f"{token!r} is not a check (KIND:MATCH, @ or !)")
    try:
        match % _Target()
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{token!r}: bad %(key)s substitution ({exc})") from None
    if kind in ("http", "https"):
        raise ValueError(f"{token!r}: remote (http) checks are not supported")
    if kind == "rule":
        refers.add(match)
        return _rule(match)
    if kind == "role":
        return _role(match)
    return _generic(kind, match)


def _tokens(text: str) -> list[str]:
    # As oslo.policy: words split on blanks; parentheses are taken off a word's start and end only (a match may
    # hold "%(key)s").
    out: list[str] = []
    for word in text.split():
        opening = len(word) - len(word.lstrip("("))
        closing = len(word) - len(word.rstrip(")"))
        core = word[opening:len(word) - closing] if closing else word[opening:]
        out += ["("] * opening + ([core] if core else []) + [")"] * closing
    return out


def parse(text: str, refers: set[str] | None = None) -> Check:
    """A check string as one check (ValueError naming what is wrong). ``refers`` collects the rule names it
    names."""
    refers = refers if refers is not None else set()
    if not text:
        return _constant(True)
    tokens = _tokens(text)
    position = 0

    def peek() -> str | None:
        return tokens[position].lower() if position < len(tokens) else None

    def take() -> str:
        nonlocal position
        position += 1
        return tokens[position - 1]

    def any_of() -> Check:
        parts = [all_of()]
        while peek() == "or":
            take()
            parts.append(all_of())
        return parts[0] if len(parts) == 1 else lambda t, c, r: any(p(t, c, r) for p in parts)

    def all_of() -> Check:
        parts = [negated()]
        while peek() == "and":
            take()
            parts.append(negated())
        return parts[0] if len(parts) == 1 else lambda t, c, r: all(p(t, c, r) for p in parts)

    def negated() -> Check:
        if peek() == "not":
            take()
            inner = negated()
            return lambda t, c, r: not inner(t, c, r)
        if peek() == "(":
            take()
            inner = any_of()
            if peek() != ")":
                raise ValueError("a '(' without its ')'")
            take()
            return inner
        if peek() in (None, ")", "and", "or"):
            raise ValueError(f"a check expected {'at the end' if peek() is None else f'before {peek()!r}'}")
        return _atom(take(), refers)

    check = any_of()
    if position != len(tokens):
        raise ValueError(f"unexpected {tokens[position]!r}")
    return check


def _from_list(rule: list[Any]) -> str:
    """oslo.policy's older list form: a list of alternatives, each a list of checks that must all hold."""
    if not rule:
        return "@"
    alternatives = []
    for alternative in rule:
        checks = alternative if isinstance(alternative, list) else [alternative]
        if not checks or not all(isinstance(c, str) for c in checks):
            raise ValueError("a list rule is a list of lists of check strings")
        alternatives.append("(" + " and ".join(f"({c})" for c in checks) + ")")
    return " or ".join(alternatives)


def read_policy_file(path: str | Path) -> dict[str, str]:
    """The rule overrides a policy file holds (YAML, or JSON), as check strings."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise InvalidRequest(f"[oslo_policy] policy_file {p}: {exc.strerror}", field="oslo_policy.policy_file") \
            from None
    try:
        data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise InvalidRequest(f"[oslo_policy] policy_file {p}: not YAML or JSON: {exc}",
                             field="oslo_policy.policy_file") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidRequest(f"[oslo_policy] policy_file {p}: rule names to check strings expected",
                             field="oslo_policy.policy_file")
    rules: dict[str, str] = {}
    for name, rule in data.items():
        if isinstance(rule, list):
            try:
                rule = _from_list(rule)
            except ValueError as exc:
                raise InvalidRequest(f"[oslo_policy] policy_file {p}: rule {name!r}: {exc}",
                                     field="oslo_policy.policy_file") from None
        if not isinstance(name, str) or not isinstance(rule, str):
            raise InvalidRequest(f"[oslo_policy] policy_file {p}: rule {name!r}: a check string expected, "
                                 f"not {rule!r}", field="oslo_policy.policy_file")
        rules[name] = rule
    return rules


class PolicyOptions(Protocol):
    """``[oslo_policy]``'s options (gantt.config.OsloPolicySection)."""

    enforce_new_defaults: bool
    enforce_scope: bool
    policy_file: str | None


class Policy:
    """Placement's rules as configured: its defaults, the file's overrides, the deprecated forms in legacy mode.
    InvalidRequest, naming the rule, if the overrides cannot be enforced as written."""

    def __init__(self, enforce_new_defaults: bool = True, enforce_scope: bool = True,
                 overrides: Mapping[str, str] | None = None, source: str = "policy") -> None:
        self.enforce_new_defaults = enforce_new_defaults
        self.enforce_scope = enforce_scope
        overrides = dict(overrides or {})
        strings = {**BASE_RULES, **RULES, **overrides}
        self.checks: dict[str, Check] = {}
        self._decided: dict[tuple[str, Credentials], bool] = {}
        referred: set[str] = set()
        graph: dict[str, set[str]] = {}
        for name, text in strings.items():
            refers: set[str] = set()
            try:
                check = parse(text, refers)
            except ValueError as exc:
                raise InvalidRequest(f"[oslo_policy] {source}: rule {name!r}: cannot read {text!r}: {exc}",
                                     field="oslo_policy.policy_file") from None
            if name in DEPRECATED and name not in overrides and not enforce_new_defaults:
                check = _either(check, _role("admin"))
            self.checks[name] = check
            for target in refers:
                if target not in strings:
                    raise InvalidRequest(f"[oslo_policy] {source}: rule {name!r} refers to rule {target!r}, "
                                         "which no rule defines", field="oslo_policy.policy_file")
            referred |= refers
            graph[name] = refers
        _refuse_cycles(graph, source)
        unused = sorted(set(overrides) - set(RULES) - set(BASE_RULES) - referred)
        if unused:
            raise InvalidRequest(f"[oslo_policy] {source}: rule {unused[0]!r} is not one of Placement's rules and "
                                 "no rule refers to it (a typo?)", field="oslo_policy.policy_file")

    @classmethod
    def from_file(cls, path: str | None, *, enforce_new_defaults: bool = True,
                  enforce_scope: bool = True) -> Policy:
        overrides = read_policy_file(path) if path else {}
        return cls(enforce_new_defaults, enforce_scope, overrides, f"policy_file {path}" if path else "policy")

    @staticmethod
    def of(options: PolicyOptions) -> Policy:
        """Placement's rules as ``[oslo_policy]`` sets them. The configuration holds the file's name; it is read
        here, when the face is built (``gantt serve`` builds it once before it starts its workers, so that a file
        that cannot be enforced as written refuses the start, naming the rule)."""
        path = options.policy_file
        return _policy(options.enforce_new_defaults, options.enforce_scope, path, _version(path))

    def allows(self, rule: str, who: Credentials, target: Mapping[str, Any] | None = None) -> bool:
        if self.enforce_scope and who.system_scope:  # every API rule is project-scoped
            return False
        if target is not None:
            return bool(self.checks[rule](target, who.values(), self.checks))
        # Without a target the answer is a function of the rule and the caller alone, and the rules do not change
        # while the service runs: decided once per caller, not walked per request (a few callers make them all).
        decided = self._decided.get((rule, who))
        if decided is None:
            own = {"project_id": who.project_id, "user_id": who.user_id}
            decided = bool(self.checks[rule](own, who.values(), self.checks))
            if len(self._decided) >= 4096:
                self._decided.clear()
            self._decided[(rule, who)] = decided
        return decided

    def authorize(self, rule: str, who: Credentials, target: Mapping[str, Any] | None = None) -> None:
        """PlacementError 403 unless ``who`` may do ``rule`` on ``target`` (by default the caller's own project
        and user, as Placement's context gives)."""
        if not self.allows(rule, who, target):
            raise PlacementError(403, f"Access was denied to this resource.\n\n Policy does not allow {rule} to be "
                                      "performed.  ")


def _version(path: str | None) -> tuple[int, int]:
    try:
        stat = os.stat(path) if path else None
    except OSError:
        return (0, 0)  # the read that follows names the problem
    return (stat.st_mtime_ns, stat.st_size) if stat else (0, 0)


@functools.lru_cache(maxsize=8)
def _policy(enforce_new_defaults: bool, enforce_scope: bool, path: str | None, version: tuple[int, int]) -> Policy:
    # Config copies (with_overrides, a worker's load after the start-up check) share one parse of the file as it
    # is; a load after the file was edited reads it anew (a running app keeps the Policy it was built with).
    return Policy.from_file(path, enforce_new_defaults=enforce_new_defaults, enforce_scope=enforce_scope)


def _refuse_cycles(graph: Mapping[str, set[str]], source: str) -> None:
    """A rule that refers to itself, through others or not, could never be decided (oslo.policy recurses until
    Python gives up, at the first request)."""
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            loop = " -> ".join([*path[path.index(name):], name])
            raise InvalidRequest(f"[oslo_policy] {source}: rule {name!r} refers to itself: {loop}",
                                 field="oslo_policy.policy_file")
        if name in done:
            return
        for target in sorted(graph.get(name, ())):
            visit(target, [*path, name])
        done.add(name)

    for name in graph:
        visit(name, [])


def _either(first: Check, second: Check) -> Check:
    return lambda t, c, r: first(t, c, r) or second(t, c, r)


@dataclass(frozen=True)
class Credentials:
    user_id: str
    project_id: str | None
    roles: frozenset[str]
    system_scope: str | None = None

    def values(self) -> dict[str, Any]:
        """What a generic check can name (oslo.context's policy values that Placement's caller has)."""
        return {"user_id": self.user_id, "project_id": self.project_id, "roles": sorted(self.roles),
                "system_scope": self.system_scope, "is_admin_project": True}


def credentials(request: PlacementRequest, *, service_token: bool) -> Credentials:
    """The caller as Placement's middleware would see it (the token itself is checked by the app)."""
    headers = request.headers
    scope = headers.get("openstack-system-scope") or None
    if service_token:
        return Credentials("gantt", headers.get("x-project-id"), frozenset({"admin", "service"}), scope)
    user, _, project = headers.get("x-auth-token", "").partition(":")
    roles_header = headers.get("x-roles")
    if roles_header is not None:
        roles = frozenset(r.strip() for r in roles_header.split(",") if r.strip())
    else:
        roles = frozenset({"admin"}) if user == "admin" else frozenset()
    project_id = headers.get("x-project-id") or (None if scope else project or user)
    return Credentials(user, project_id, roles, scope)
