"""The Placement face's options, with placement.conf's section names: ``[oslo_policy]`` (who may call what; the
rules themselves are gantt.placement.api.policy's, which reads the file when the face is built) and ``[cors]``."""

from __future__ import annotations

from msgspec import Struct, field

from gantt.config.checks import refuse_without_effect
from gantt.model.prepare import prepare_types

OSLO_POLICY_FILE = "policy.yaml"  # oslo.policy's default [oslo_policy] policy_file
# oslo.policy's options Gantt does not implement (see refuse_without_effect).
_OSLO_POLICY_WITHOUT_EFFECT = {
    "policy_default_rule": "Gantt's Placement rules are all defined; there is no default rule to fall back to",
    "policy_dirs": "Gantt reads policy_file alone, no directory of rule files",
}


class OsloPolicySection(Struct, forbid_unknown_fields=True, kw_only=True):
    """The Placement face's policy, with oslo.policy's option names and defaults (placement.conf's section)."""

    enforce_new_defaults: bool = True  # False: Placement's deprecated rules (role:admin) also grant
    enforce_scope: bool = True  # a system-scoped token is refused by Placement's project-scoped rules
    # A YAML or JSON file of rule overrides (rule name -> check string), read when the Placement face is built
    # (``gantt serve`` does it before it starts its workers); a relative path is taken from the configuration
    # file's directory. None: Placement's default rules.
    policy_file: str | None = None
    # oslo.policy's options Gantt does not implement: see _OSLO_POLICY_WITHOUT_EFFECT.
    policy_default_rule: str = "default"
    policy_dirs: list[str] = field(default_factory=lambda: ["policy.d"])

    def __post_init__(self) -> None:
        refuse_without_effect("oslo_policy", self, _OSLO_POLICY_WITHOUT_EFFECT)


class CorsSection(Struct, forbid_unknown_fields=True, kw_only=True):
    """oslo.middleware's ``[cors]`` for the Placement face (placement.conf's section: the same names, and the
    defaults Placement's WSGI application sets): off until ``allowed_origin`` names an origin (``*`` for any)."""

    allowed_origin: list[str] = field(default_factory=list)
    allow_credentials: bool = True
    expose_headers: list[str] = field(default_factory=lambda: [
        "X-Auth-Token", "X-Openstack-Request-Id", "X-Subject-Token", "X-Service-Token", "OpenStack-API-Version"])
    max_age: int = 3600
    allow_methods: list[str] = field(default_factory=lambda: ["GET", "PUT", "POST", "DELETE", "PATCH"])
    allow_headers: list[str] = field(default_factory=lambda: [
        "X-Auth-Token", "X-Openstack-Request-Id", "X-Identity-Status", "X-Roles", "X-Service-Catalog", "X-User-Id",
        "X-Tenant-Id", "OpenStack-API-Version"])


prepare_types(globals())  # build msgspec type info before any thread decodes (see gantt.model.prepare)
