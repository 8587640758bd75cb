"""The venv ``gantt.nova`` is tested in: nova==34.0.0 (the reference suite's pin) beside Gantt's own runtime
dependencies, as a deployment that installs ``gantt[nova]`` into Nova's environment would have. Gantt itself is
not installed: the driver puts the checkout's ``src`` first on its path, so the tests always run the tree under
test. Built once per machine in the user's cache (tests/venvs.py); the reference Nova venv is left alone."""

from __future__ import annotations

import tomllib
from pathlib import Path

from tests.parity.reference import NOVA
from tests.venvs import cached_venv

ROOT = Path(__file__).resolve().parents[2]


def packages() -> list[str]:
    """Nova's pin, then Gantt's runtime dependencies exactly as pyproject.toml states them (a change there
    rebuilds the venv, since cached_venv compares the list)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [NOVA, *project["dependencies"]]


def python() -> Path:
    """The interpreter, building its venv first if needed (a few minutes, once per machine)."""
    return cached_venv(f"nova-gantt-{NOVA.replace('==', '-')}", packages()) / "bin" / "python"


if __name__ == "__main__":
    print(python())
