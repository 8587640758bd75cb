"""Who may call what on the Placement face: Placement 16's default policy rules, its credentials, oslo.policy's
two options (``[oslo_policy] enforce_new_defaults`` and ``enforce_scope``).

Credentials come as Placement sees them behind its middleware. With Gantt's token configured, the token must be
it, and it is the service's own credential (roles admin and service). Without one (loopback only), as Placement's
``noauth2``: the token is ``user[:project]``, roles come from ``X-Roles`` (else ``admin`` for the user ``admin``),
the project from ``X-Project-Id`` (else the token's), and ``OpenStack-System-Scope`` makes it system-scoped.

Every rule is project-scoped: with ``enforce_scope`` a system-scoped token is refused. With
``enforce_new_defaults`` off, each rule's deprecated form (``role:admin``) grants as well, as oslo.policy does.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from gantt.placement.errors import PlacementError

_ADMIN_OR_SERVICE = "admin_or_service"
_SERVICE = "service"
_ADMIN_OR_PROJECT_READER_OR_SERVICE = "admin_or_project_reader_or_service"

# Placement's rule names, each with the base rule its default uses (placement/policies/*.py in Placement 16).
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
    "placement:usages": _ADMIN_OR_PROJECT_READER_OR_SERVICE,
    "placement:reshaper:reshape": _SERVICE,
}


@dataclass(frozen=True)
class Credentials:
    user_id: str
    project_id: str | None
    roles: frozenset[str]
    system_scope: str | None = None


@dataclass(frozen=True)
class Policy:
    enforce_new_defaults: bool = True
    enforce_scope: bool = True

    def authorize(self, rule: str, who: Credentials, project_id: str | None = None) -> None:
        """PlacementError 403 unless ``who`` may do ``rule`` (``project_id``: the project a reader asks about)."""
        allowed = not (self.enforce_scope and who.system_scope) and (
            _grants(RULES[rule], who, project_id)
            or (not self.enforce_new_defaults and "admin" in who.roles))  # the deprecated rule, role:admin
        if not allowed:
            raise PlacementError(403, f"Access was denied to this resource.\n\n Policy does not allow {rule} to be "
                                      "performed.  ")


def _grants(base: str, who: Credentials, project_id: str | None) -> bool:
    roles = who.roles
    if base == _SERVICE:
        return "service" in roles
    if "admin" in roles or "service" in roles:
        return True
    return base == _ADMIN_OR_PROJECT_READER_OR_SERVICE and "reader" in roles and project_id is not None \
        and project_id == who.project_id


def credentials(request: Request, *, service_token: bool) -> Credentials:
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
