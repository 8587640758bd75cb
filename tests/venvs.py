"""Virtualenvs for the reference implementations and clients the tests run beside Gantt (Nova, Placement,
python-openstackclient): each built once per machine in the user's cache, holding exactly its pinned packages,
apart from Gantt's own venv so that their dependency pins never reach Gantt."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def cached_venv(stem: str, packages: list[str]) -> Path:
    """``~/.cache/gantt/<stem>-pyXY`` with ``packages`` installed, built (or rebuilt, when the pins changed) first
    if needed: a minute or so, once per machine. Returns the venv's directory."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = cache / "gantt" / f"{stem}-py{sys.version_info[0]}{sys.version_info[1]}"
    stamp = path / ".installed"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # xdist workers and scripts may ask at once: one builds
        if not stamp.exists() or stamp.read_text().split() != packages:
            base = os.environ.get("GANTT_REFERENCE_PYTHON", "python3")
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # Gantt's own tree stays out
            for argv in ([base, "-m", "venv", "--clear", str(path)],
                         [str(path / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                          *packages]):
                done = subprocess.run(argv, env=env, capture_output=True, text=True)
                if done.returncode:
                    raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
            stamp.write_text("\n".join(packages) + "\n")
    return path


def run_json(python: Path, script: Path, payload: Any, timeout: float) -> Any:
    """Run ``script`` under a reference interpreter with ``payload`` as JSON on stdin; its stdout, parsed.

    Gantt's own ``PYTHON*`` settings (its path above all) stay out of the reference's process; only the fault
    handler passes, so that a reference that crashes prints its stack."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") or k == "PYTHONFAULTHANDLER"}
    done = subprocess.run([str(python), str(script)], input=json.dumps(payload), capture_output=True, text=True,
                          env=env, timeout=timeout)
    if done.returncode:
        raise AssertionError(f"{script.name} under {python} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout)
