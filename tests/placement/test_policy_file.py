"""``[oslo_policy] policy_file``: our check-string evaluator against oslo.policy itself (from Placement 16's
reference venv) on generated rules, credentials and targets; files refused at start with the rule named; and a
real gantt serve enforcing a file's overrides (YAML and JSON), in both policy modes."""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from gantt.config import load_config
from gantt.model import InvalidRequest
from gantt.placement.api.policy import Credentials, Policy, parse
from tests.placement.real_placement import python
from tests.service.server import ServerProcess

# Runs in the reference venv: every case's rule evaluated by oslo.policy's own Enforcer.
_OSLO = """
import json, sys
from oslo_config import cfg
from oslo_policy import _checks, _parser, policy
out = []
for case in json.load(sys.stdin):
    if "parse" in case:  # only: does oslo.policy understand it (anything but its fail-closed FalseCheck)?
        out.append(not isinstance(_parser.parse_rule(case["parse"]), _checks.FalseCheck))
        continue
    enforcer = policy.Enforcer(cfg.ConfigOpts(), use_conf=False)
    enforcer.set_rules(policy.Rules.from_dict(case["rules"]), use_conf=False)
    out.append(bool(enforcer.enforce("it", case["target"], case["creds"])))
print(json.dumps(out))
"""

_ATOMS = ["@", "!", "role:admin", "role:Reader", "role:service", "rule:base", "rule:other",
          "project_id:%(project_id)s", "user_id:%(user_id)s", "project_id:p1", "roles:member",
          "system_scope:all", "'p1':%(project_id)s", "True:%(flag)s", "user_id:%(missing)s", "role:%(role)s",
          "is_admin_project:True"]


def _expression(rng: random.Random, depth: int, atoms: list[str] = _ATOMS) -> str:
    roll = rng.random()
    if depth == 0 or roll < 0.35:
        return rng.choice(atoms)
    if roll < 0.45:
        return f"{rng.choice(['not', 'NOT', 'Not'])} {_expression(rng, depth - 1, atoms)}"
    if roll < 0.55:
        return f"({_expression(rng, depth - 1, atoms)})"
    joiner = rng.choice(["and", "or", "AND", "Or"])
    return f" {joiner} ".join(_expression(rng, depth - 1, atoms) for _ in range(rng.randint(2, 3)))


def _case(rng: random.Random) -> dict[str, Any]:
    creds = {"roles": rng.sample(["admin", "reader", "READER", "member", "service"], rng.randint(0, 3)),
             "project_id": rng.choice(["p1", "p2", None]), "user_id": rng.choice(["u1", "u2"]),
             "system_scope": rng.choice([None, "all"]), "is_admin_project": rng.choice([True, False])}
    target = {"project_id": rng.choice(["p1", "p2", None]), "user_id": rng.choice(["u1", "u2"]),
              "flag": rng.choice([True, False, "True"]), "role": rng.choice(["admin", "reader"])}
    rules = {"it": _expression(rng, 3), "base": _expression(rng, 1, [a for a in _ATOMS if a != "rule:base"]),
             "other": rng.choice(_ATOMS[:4])}
    return {"rules": rules, "target": target, "creds": creds}


def _oslo(cases: list[dict[str, Any]]) -> list[bool]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    ran = subprocess.run([str(python()), "-c", _OSLO], input=json.dumps(cases), capture_output=True, text=True,
                         env=env, check=True, timeout=120)
    return json.loads(ran.stdout)


def _ours(case: dict[str, Any]) -> bool:
    checks = {name: parse(text) for name, text in case["rules"].items()}
    return checks["it"](case["target"], case["creds"], checks)


def test_check_strings_evaluate_as_oslo_policy_does() -> None:
    rng = random.Random(13)
    cases = [_case(rng) for _ in range(600)]
    expected = _oslo(cases)
    wrong = [(c["rules"], c["target"], c["creds"]) for c, want in zip(cases, expected, strict=True)
             if _ours(c) != want]
    assert not wrong, f"{len(wrong)} of {len(cases)} differ from oslo.policy, e.g. {wrong[:3]}"
    assert 0.2 < sum(expected) / len(expected) < 0.8  # the generator exercises both answers


# oslo.policy logs these and denies (its FalseCheck); we refuse them at start.
UNREADABLE = ["role:admin or", "and role:admin", "(role:admin", "role:admin)", "role", "not", "   ",
              "role:admin role:service", "'quoted'", "role:admin or or role:service", "()"]


def test_what_oslo_policy_cannot_read_we_refuse() -> None:
    understood = _oslo([{"parse": text} for text in [*UNREADABLE, "", "@", "role:a or (not role:b)"]])
    assert understood == [False] * len(UNREADABLE) + [True] * 3
    for text in UNREADABLE:
        with pytest.raises(ValueError):
            parse(text)


def _policy(tmp_path: Path, policy_text: str, name: str = "policy.yaml", **options: Any) -> Policy:
    """The Placement face's policy as a configuration file's ``[oslo_policy]`` sets it."""
    (tmp_path / name).write_text(policy_text)
    lines = [f"policy_file = {json.dumps(name)}", *(f"{k} = {json.dumps(v)}" for k, v in options.items())]
    (tmp_path / "gantt.toml").write_text("[oslo_policy]\n" + "\n".join(lines) + "\n")
    # the file is named relative to the config file's directory
    return Policy.of(load_config(tmp_path / "gantt.toml").oslo_policy)


@pytest.mark.parametrize(("text", "named"), [
    ('"placement:traits:list": "role:admin or"\n', "placement:traits:list"),
    ('"placement:traits:list": "rule:no_such_rule"\n', "no_such_rule"),
    ('"placement:trait:list": "@"\n', "placement:trait:list"),  # a typo of a rule name
    ('"placement:traits:list": "http://example.invalid/check"\n', "placement:traits:list"),
    ('"placement:traits:list": "project_id:%(project_id"\n', "placement:traits:list"),
    ('"placement:traits:list": 3\n', "placement:traits:list"),
    ("- a list\n", "rule names to check strings"),
    ('"placement:traits:list": [[3]]\n', "placement:traits:list"),
    ('"admin_api": "rule:mine"\n"mine": "role:x or rule:admin_api"\n', "admin_api -> mine -> admin_api"),
])
def test_a_file_that_cannot_be_enforced_as_written_is_refused_naming_the_rule(tmp_path: Path, text: str,
                                                                             named: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        _policy(tmp_path, text)
    assert named in str(refused.value) and "policy_file" in str(refused.value)


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "gantt.toml").write_text('[oslo_policy]\npolicy_file = "nowhere.yaml"\n')
    with pytest.raises(InvalidRequest, match=r"nowhere\.yaml"):
        Policy.of(load_config(tmp_path / "gantt.toml").oslo_policy)


def test_an_edited_file_is_read_anew_by_the_next_load(tmp_path: Path) -> None:
    assert _policy(tmp_path, '"placement:traits:list": "@"\n').allows("placement:traits:list", _who())
    with pytest.raises(InvalidRequest, match="placement:traits:list"):
        _policy(tmp_path, '"placement:traits:list": "@ or"  \n')


def _who(*roles: str, project: str | None = "p1", system: str | None = None) -> Credentials:
    return Credentials("u1", project, frozenset(roles), system)


def test_overrides_replace_defaults_and_the_legacy_rule_only_where_not_overridden(tmp_path: Path) -> None:
    text = ('"admin_or_service_api": "role:service"\n'  # admins lose the common rule ...
            '"placement:traits:list": "rule:custom or rule:admin_or_service_api"\n'
            '"custom": "role:auditor and not role:banned"\n'  # ... a rule of the file's own, referred to
            '"placement:resource_classes:list": [["role:a", "role:b"], ["role:c"]]\n')  # oslo's list form
    new = _policy(tmp_path, text)
    assert not new.allows("placement:resource_providers:list", _who("admin"))
    assert new.allows("placement:resource_providers:list", _who("service"))
    assert new.allows("placement:traits:list", _who("auditor"))
    assert not new.allows("placement:traits:list", _who("auditor", "banned"))
    assert new.allows("placement:resource_classes:list", _who("a", "b"))
    assert new.allows("placement:resource_classes:list", _who("c"))
    assert not new.allows("placement:resource_classes:list", _who("a"))
    # enforce_scope: a system-scoped token is refused whatever the file says (Placement's rules are project's)
    assert not new.allows("placement:traits:list", _who("auditor", system="all"))
    legacy = _policy(tmp_path, text, enforce_new_defaults=False)
    # legacy mode ORs role:admin into the deprecated base rules the file leaves alone, not into the overridden
    assert not legacy.allows("placement:resource_providers:list", _who("admin"))
    assert legacy.allows("placement:reshaper:reshape", _who("admin"))
    assert not Policy().allows("placement:reshaper:reshape", _who("admin"))
    unscoped = _policy(tmp_path, text, enforce_scope=False)
    assert unscoped.allows("placement:traits:list", _who("auditor", system="all"))


def test_gantt_serve_enforces_a_json_policy_file(tmp_path: Path) -> None:
    (tmp_path / "policy.json").write_text(json.dumps({"placement:traits:list": "role:reader",
                                                      "placement:traits:show": "!",
                                                      "placement:usages": "project_id:%(project_id)s"}))
    config = {"oslo_policy": {"policy_file": str(tmp_path / "policy.json")}}
    headers = {"openstack-api-version": "placement latest", "x-auth-token": "user"}
    with ServerProcess("memory://", config=config, workdir=tmp_path) as server, \
            httpx.Client(base_url=server.url + "/placement", headers=headers) as http:
        assert http.get("/traits", headers={"x-roles": "reader"}).status_code == 200
        assert http.get("/traits", headers={"x-roles": "member"}).status_code == 403
        assert http.get("/traits/HW_CPU_X86_AVX", headers={"x-roles": "admin"}).status_code == 403  # "!"
        # usages: the target is the project asked about, as Placement's handler names it
        mine = {"x-roles": "member", "x-project-id": "p1"}
        assert http.get("/usages", params={"project_id": "p1"}, headers=mine).status_code == 200
        assert http.get("/usages", params={"project_id": "p2"}, headers=mine).status_code == 403
        # a rule the file leaves alone keeps Placement's default
        assert http.get("/resource_providers", headers={"x-roles": "reader"}).status_code == 403
        assert http.get("/resource_providers", headers={"x-roles": "service"}).status_code == 200


def test_gantt_serve_refuses_to_start_with_an_unreadable_rule(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text('"placement:allocations:list": "role:admin and (role:reader"\n')
    server = ServerProcess("memory://", config={"oslo_policy": {"policy_file": "policy.yaml"}}, workdir=tmp_path)
    with pytest.raises(RuntimeError) as failed:
        server.start(timeout=20)
    server.close()
    assert "placement:allocations:list" in str(failed.value)
