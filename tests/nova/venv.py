"""The venv ``gantt.nova`` is tested in: one for every test of tests/nova, the one Nova's functional tests run in
(tests/nova/functional_venv.py: nova==34.0.0, openstack-placement==16.0.0, Nova's test libraries and Gantt's
runtime dependencies), as a deployment that installs ``gantt[nova]`` into Nova's environment would have. Gantt
itself is not installed: the drivers put the checkout's ``src`` first on the path, so the tests run the tree under
test. One venv, not two, since the functional one holds everything the others need and CI builds each once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.nova import functional_venv


def python() -> Path:
    """The interpreter, building its venv first if needed (a few minutes, once per machine)."""
    return functional_venv.python()


def python_or_skip() -> Path:
    """The interpreter for a test: a venv that cannot be built here (no network) is a skip locally, a failure in
    CI (``CI=true``)."""
    try:
        return python()
    except RuntimeError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"Nova's venv cannot be built here: {str(exc)[:300]}")


if __name__ == "__main__":
    print(python())
