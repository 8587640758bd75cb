"""The Cinder reference's virtualenv: cinder==29.0.0 from PyPI, built once and kept in the user's cache.

Apart from Gantt's venv and Nova's (tests/venvs.py): Cinder's dependency pins reach neither.

pyparsing is pinned too: Cinder 29 allows any pyparsing >= 3, but from pyparsing 3.2 on its driver-filter
evaluator reads every variable as a function call (``stats.x > 1`` no longer parses: the ``fn`` operator of its
infix grammar swallows the name), so DriverFilter fails every backend and GoodnessWeigher scores every one 0.
3.1.4 is the last release under which the evaluator works as Cinder documents it; that is the behaviour Gantt
matches.
"""

from __future__ import annotations

from pathlib import Path

from tests.venvs import cached_venv

CINDER = "cinder==29.0.0"
PINS = [CINDER, "pyparsing==3.1.4"]


def python() -> Path:
    """The reference interpreter, building its venv first if needed (a few minutes, once per machine)."""
    return cached_venv(f"reference-{CINDER.replace('==', '-')}", PINS) / "bin" / "python"


if __name__ == "__main__":
    print(python())
