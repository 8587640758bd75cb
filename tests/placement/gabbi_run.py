"""Placement's own functional suite (the gabbi YAML files of openstack-placement 16.0.0, from its installed package
in the reference virtualenv: never copied here) run against a live server, one fresh server and store per file.

    python -m tests.placement.gabbi_run                 # every file, against gantt serve on SQLite
    python -m tests.placement.gabbi_run --against placement aggregate.yaml allocations.yaml
    python -m tests.placement.gabbi_run --json

Each file's ``fixtures:`` are set up over HTTP before it runs: Placement's fixture classes run in the reference
venv with their data helpers swapped for REST calls (tests/placement/gabbi_fixtures.py), and the environment they
export (``RP_UUID``, ``CN1_UUID`` ...) is handed to ``gabbi-run``. Policy fixtures (OpenPolicy, SecureRBAC,
LegacyRBAC) and CORS configure Placement in-process: gantt serve is started with the same settings as options
(``gantt_config``: the policy defaults, OpenPolicy's rules as a ``[oslo_policy] policy_file``, ``[cors]``), with
the Placement face at the server's root (``[gantt] placement_mount = "/"``), where the suite runs.

gabbi runs as ``gabbi-run`` with one client-side change (tests/placement/gabbi_client.py): a request its HTTP
client (httpx over h11) refuses to send, such as basic-http.yaml's ``content-length: hi mom``, is written on a socket
as raw bytes, as the file spells it, and the answer parsed by the standard library; every other request goes
through httpx unchanged. The server is thus tested on the bytes the test means, and nothing looks at a test's name.

``--against placement`` runs the same files against Placement 16.0.0 itself (tests/placement/real_placement.py),
with the policy each file's fixture sets in-process (legacy admin rules, new defaults, or open): the harness's
own check.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import uuid as uuidlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gantt.cli.server_process import ServerProcess
from tests.placement.real_placement import RealPlacement, open_policy_file, python

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "gabbi_fixtures.py"
CLIENT = HERE / "gabbi_client.py"  # gabbi-run; sends as raw bytes what its HTTP client refuses to send
# Fixtures that configure the server in-process (policy, CORS): nothing to create over HTTP.
IN_PROCESS = {"OpenPolicyFixture", "SecureRBACPolicyFixture", "LegacyRBACPolicyFixture", "CORSFixture"}
_RESULT = re.compile(r"^\s*\.\.\. (\S+) gabbi-runner\.input_(.+?)\s*$")
_PASSED = {"✓"}
_SKIPPED = {"-", "S"}


@dataclass
class FileResult:
    name: str
    fixtures: list[str]
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    error: str = ""
    output: str = ""

    @property
    def total(self) -> int:
        return len(self.passed) + len(self.failed)


def gabbits_dir() -> Path:
    exe = python()
    found = subprocess.run([str(exe), "-c", "import placement, os; print(os.path.dirname(placement.__file__))"],
                           capture_output=True, text=True, check=True, env=_clean_env()).stdout.strip()
    return Path(found) / "tests" / "functional" / "gabbits"


def _clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # Gantt's tree stays out of the reference
    env.update(extra or {})
    return env


# What Placement's CORSFixture configures (its [cors] options), as gantt serve's options.
CORS_FIXTURE = {"allowed_origin": ["http://valid.example.com"], "allow_headers": ["openstack-api-version"]}


def gantt_config(fixtures: list[str], workdir: Path) -> dict[str, Any]:
    """gantt serve's options for what the file's fixtures set in Placement in-process: Placement at the server's
    root (where the suite runs), the new policy defaults for SecureRBAC (APIFixture's are the deprecated ones),
    OpenPolicyFixture's rules as a policy file, CORSFixture's [cors]."""
    config: dict[str, Any] = {"DEFAULT": {"service_down_time": 86400}, "gantt": {"placement_mount": "/"},
                              "oslo_policy": {"enforce_new_defaults": "SecureRBACPolicyFixture" in fixtures}}
    if "OpenPolicyFixture" in fixtures:
        (workdir / "policy.yaml").write_text(open_policy_file())
        config["oslo_policy"]["policy_file"] = "policy.yaml"
    if "CORSFixture" in fixtures:
        config["cors"] = CORS_FIXTURE
    return config


@contextlib.contextmanager
def gantt_server(store: str, fixtures: list[str]) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="gabbi-") as tmp:
        url = "memory://" if store == "memory" else f"sqlite:///{tmp}/gantt.sqlite"
        with ServerProcess(url, workdir=tmp, config=gantt_config(fixtures, Path(tmp))) as server:
            yield server.url


@contextlib.contextmanager
def placement_server(fixtures: list[str]) -> Iterator[str]:
    """Placement with what its test fixtures set in-process: the deprecated admin-for-all rules unless the file
    asks for the new defaults (SecureRBAC) or an open policy; CORSFixture's [cors]."""
    policy = "open" if "OpenPolicyFixture" in fixtures else "default" if "SecureRBACPolicyFixture" in fixtures \
        else "legacy"
    with RealPlacement(policy=policy, cors=CORS_FIXTURE if "CORSFixture" in fixtures else None) as real:
        yield real.url


# What Placement's APIFixture exports (it makes no data): fresh uuids, and its custom class names.
_API_UUIDS = ("RP_UUID", "RP_NAME", "RP_UUID1", "RP_NAME1", "RP_UUID2", "RP_NAME2", "PROJECT_ID", "ADMIN_PROJECT_ID",
              "SERVICE_PROJECT_ID", "USER_ID", "PROJECT_ID_ALT", "USER_ID_ALT", "INSTANCE_UUID", "MIGRATION_UUID",
              "CONSUMER_UUID", "PARENT_PROVIDER_UUID", "ALT_PARENT_PROVIDER_UUID")


def api_fixture_environment() -> dict[str, str]:
    env = {name: str(uuidlib.uuid4()) for name in _API_UUIDS}
    env.update(CUSTOM_RES_CLASS="CUSTOM_IRON_NFV", CUSTOM_RES_CLASS1="CUSTOM_IRON_NFV1",
               CUSTOM_RES_CLASS2="CUSTOM_IRON_NFV2")
    return env


def run_file(path: Path, against: str, store: str) -> FileResult:
    document = yaml.safe_load(path.read_text())
    fixtures = list(document.get("fixtures") or [])
    result = FileResult(path.name, fixtures)
    body = re.sub(r"^fixtures:\n(?:[ \t]+-.*\n|[ \t]*#.*\n|[ \t]*\n)*", "", path.read_text(), flags=re.M)
    server = gantt_server(store, fixtures) if against == "gantt" else placement_server(fixtures)
    try:
        with server as url:
            data_fixtures = [f for f in fixtures if f not in IN_PROCESS] or ["APIFixture"]
            if data_fixtures == ["APIFixture"]:
                env = _clean_env(api_fixture_environment())  # no data to make: spare the reference venv's start
            else:
                made = subprocess.run([str(python()), str(FIXTURES), url, *data_fixtures], capture_output=True,
                                      text=True, env=_clean_env(), timeout=120)
                if made.returncode:
                    result.error = f"fixtures {data_fixtures} failed:\n{made.stderr[-3000:]}"
                    return result
                env = _clean_env(json.loads(made.stdout.strip().splitlines()[-1]))
            ran = subprocess.run([str(python()), str(CLIENT), url], input=body, capture_output=True,
                                 text=True, env=env, timeout=600)
    except Exception as exc:  # a server that does not start is this file's error, not the run's
        result.error = f"{type(exc).__name__}: {exc}"
        return result
    result.output = ran.stdout + ran.stderr
    seen: dict[str, int] = {}
    for line in result.output.splitlines():
        match = _RESULT.match(line)
        if match is None:
            continue
        mark, name = match.groups()
        # A file may name two tests alike (usage-secure-rbac.yaml does): the second is "name#2", so that the
        # ratchet sees each of them.
        seen[name] = seen.get(name, 0) + 1
        name = name if seen[name] == 1 else f"{name}#{seen[name]}"
        (result.passed if mark in _PASSED else result.skipped if mark in _SKIPPED else result.failed).append(name)
    if not result.total and not result.skipped:
        result.error = f"no test ran:\n{result.output[-3000:]}"
    return result


def run(names: list[str] | None = None, *, against: str = "gantt", store: str = "sqlite",
        jobs: int = 2) -> list[FileResult]:
    directory = gabbits_dir()
    paths = [directory / n for n in names] if names else sorted(directory.glob("*.yaml"))
    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(lambda p: run_file(p, against, store), paths))


def summary(results: list[FileResult]) -> dict[str, Any]:
    return {"files": len(results), "passed": sum(len(r.passed) for r in results),
            "failed": sum(len(r.failed) for r in results), "skipped": sum(len(r.skipped) for r in results),
            "errors": [r.name for r in results if r.error],
            "per_file": {r.name: {"fixtures": r.fixtures, "passed": len(r.passed), "failed": len(r.failed),
                                  **({"error": r.error[:500]} if r.error else {})} for r in results}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="gabbi files by name (default: all)")
    parser.add_argument("--against", choices=["gantt", "placement"], default="gantt")
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite", help="Gantt's store")
    parser.add_argument("--jobs", type=int, default=2, help="files run at once (default 2)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--failures", action="store_true", help="print what gabbi said of each failure")
    args = parser.parse_args()
    results = run(args.files or None, against=args.against, store=args.store, jobs=args.jobs)
    if args.json:
        print(json.dumps(summary(results), indent=2))
        return
    for r in results:
        state = f"ERROR {r.error.splitlines()[0]}" if r.error else f"{len(r.passed)}/{r.total} passed"
        print(f"{r.name:48} {','.join(r.fixtures):40} {state}")
        if args.failures and r.failed:
            print(r.output)
    total = summary(results)
    print(f"total: {total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped, "
          f"{len(total['errors'])} files in error, {total['files']} files")
    sys.exit(0)


if __name__ == "__main__":
    main()
