"""The venv Nova 34's own functional tests run in (``python -m gantt.nova.functional``): nova==34.0.0 and
openstack-placement==16.0.0 (the reference suite's pins), the test libraries Nova's functional tree imports, and
Gantt's runtime dependencies, so that the same tests can run untouched (``--reference``) or with Gantt swapped in.
Gantt itself is not installed: the runner puts the checkout's ``src`` on the path, so the tree under test is what
runs. Built once per machine in the user's cache (tests/venvs.py)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from tests.parity.reference import NOVA
from tests.placement.real_placement import PLACEMENT
from tests.venvs import cached_venv

ROOT = Path(__file__).resolve().parents[2]
# Nova's functional tests import these (its test-requirements.txt, the part the functional tree uses); with
# SQLAlchemy 2.1 Nova's own warning fixture turns a deprecation warning into failures, hence the bound.
TEST_LIBRARIES = ["fixtures", "oslotest", "stestr", "testtools", "testscenarios", "requests-mock", "wsgi-intercept",
                  "ddt", "osprofiler", "python-barbicanclient", "sqlalchemy<2.1"]


def packages() -> list[str]:
    """The pins, then Gantt's runtime dependencies exactly as pyproject.toml states them (a change there rebuilds
    the venv, since cached_venv compares the list)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [NOVA, PLACEMENT, *TEST_LIBRARIES, *project["dependencies"]]


def link_api_paste(venv: Path) -> None:
    """Nova's test config finds ``etc/nova/api-paste.ini`` under ``$pybasedir`` (site-packages, beside the nova
    package); the wheel installs it under the venv's own ``etc/``: a link makes the two one."""
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import os, nova\n"
                                "print(os.path.dirname(os.path.dirname(nova.__file__)))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    link = site / "etc" / "nova" / "api-paste.ini"
    target = venv / "etc" / "nova" / "api-paste.ini"
    if not target.exists():
        raise RuntimeError(f"nova's wheel put no {target}")
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)


def venv() -> Path:
    """The venv's directory, building it first if needed (a few minutes, once per machine)."""
    path = cached_venv(f"nova-functional-{NOVA.replace('==', '-')}", packages())
    link_api_paste(path)
    return path


def python() -> Path:
    return venv() / "bin" / "python"


if __name__ == "__main__":
    print(python())
    sys.exit(0)
