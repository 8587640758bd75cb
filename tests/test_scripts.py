"""``scripts/setup`` (what ``scripts/demo`` runs) installs Gantt alone: no test tools, no system packages, no
reference venvs, which ``scripts/setup --test`` (``scripts/test``, CI) adds. Run on a copy of the checkout, as on a
fresh machine; the demo then runs from that venv."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _copy_checkout(to: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / name)


@pytest.mark.slow
def test_the_demos_setup_installs_gantt_alone_and_the_demo_runs_from_it(tmp_path: Path) -> None:
    copy = tmp_path / "checkout"
    _copy_checkout(copy)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["COLUMNS"] = "200"
    done = subprocess.run([str(copy / "scripts" / "setup")], cwd=copy, capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr + (copy / ".setup.log").read_text()[-3000:]
    assert done.stdout.splitlines() == ["setup: creating .venv", "setup: installing Gantt into .venv"], done.stdout
    python = copy / ".venv" / "bin" / "python"
    for absent in ("pytest", "matplotlib", "playwright"):  # the test extra's and the sim extra's
        probe = subprocess.run([str(python), "-c", f"import {absent}"], capture_output=True, env=env)
        assert probe.returncode != 0, f"{absent} was installed by the demo's set-up"
    again = subprocess.run([str(copy / "scripts" / "setup")], cwd=copy, capture_output=True, text=True, env=env,
                           timeout=120)
    assert again.returncode == 0 and again.stdout == ""  # nothing missing: nothing done
    demo = subprocess.run([str(copy / ".venv" / "bin" / "gantt"), "demo", "--hosts", "20", "--requests", "30"],
                          cwd=copy, capture_output=True, text=True, env=env, timeout=300)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "requests placed" in demo.stdout


def test_the_test_command_sets_up_everything_the_suite_needs() -> None:
    test = (ROOT / "scripts" / "test").read_text()
    assert "scripts/setup --test" in test
    assert "exec scripts/test" in (ROOT / ".ci" / "run").read_text()
    setup = (ROOT / "scripts" / "setup").read_text()
    tail = setup[setup.index('if [ "$TEST" = 0 ]'):]
    for what in ("etcd-server", "chromium", "zsh", "'.[test]'", "tests.parity.reference", "tests.placement.osc",
                 "tests.parity.cinder_reference", "tests.placement.real_placement"):
        assert what in tail.split("exit 0", 1)[1], f"scripts/setup --test no longer installs {what}"
