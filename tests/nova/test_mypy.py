"""gantt.nova type-checked where it runs: the main venv's mypy, with pyproject's [tool.mypy], resolving imports in
Nova's venv (``--python-executable``), so gantt.nova's use of Gantt's own modules is checked against them.
pyproject's run (scripts/test) cannot: it has no nova to import, and excludes the package. Nova and oslo are Any
here (no type information; pyproject says why), so what this holds is Gantt's side of the seam."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.nova.venv import python_or_skip

ROOT = Path(__file__).resolve().parents[2]
NOVA = ROOT / "src" / "gantt" / "nova"


def test_gantt_nova_type_checks_in_novas_venv() -> None:
    python = python_or_skip()
    # Named one by one: pyproject's exclude (which keeps the main run off gantt.nova) applies only to directories.
    files = sorted(str(path.relative_to(ROOT)) for path in NOVA.rglob("*.py"))
    assert len(files) > 5
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--python-executable", str(python),
         # A cache of its own: the main run's, made without Nova's venv, would be thrown away each time
         "--cache-dir", str(ROOT / ".mypy_cache" / "gantt-nova"), *files],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"no issues found in {len(files)} source files" in done.stdout
