"""The reference implementation's virtualenv: nova==34.0.0 from PyPI, built once and kept in the user's cache.

Separate from Gantt's own venv so that Nova's dependency pins never reach Gantt (tests/venvs.py).
"""

from __future__ import annotations

from pathlib import Path

from tests.venvs import cached_venv

NOVA = "nova==34.0.0"


def python() -> Path:
    """The reference interpreter, building its venv first if needed (a few minutes, once per machine)."""
    return cached_venv(f"reference-{NOVA.replace('==', '-')}", [NOVA]) / "bin" / "python"


if __name__ == "__main__":
    print(python())
