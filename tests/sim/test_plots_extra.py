"""matplotlib is the ``sim`` extra's, not a base dependency: without it the simulator says what to install."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _names(requirements: list[str]) -> set[str]:
    return {r.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0].strip().lower()
            for r in requirements}


def test_matplotlib_is_the_sim_extra_and_the_tests_pull_it() -> None:
    project = _project()
    assert "matplotlib" not in _names(project["dependencies"])
    assert "matplotlib" in _names(project["optional-dependencies"]["sim"])
    assert "gantt[sim]" in project["optional-dependencies"]["test"]


def test_plots_without_matplotlib_say_what_to_install(tmp_path: Path) -> None:
    plots = tmp_path / "plots"
    # The interpreter as a machine without matplotlib sees it: its import fails.
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from gantt.sim.cli import main\n"
            f"sys.exit(main([{str(ROOT / 'examples' / 'small.toml')!r}, '--requests', '20', '--quiet', "
            f"'--plots', {str(plots)!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 2, done.stderr[-2000:]
    assert "pip install 'gantt[sim]'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not plots.exists()  # refused before the run, nothing written


def test_the_plots_work_with_the_extra(tmp_path: Path) -> None:
    from gantt.sim.report import require_plots

    require_plots()  # the test extra pulls gantt[sim]: matplotlib is here
