"""The reference implementation's virtualenv: nova==34.0.0 from PyPI, built once and kept in the user's cache.

Separate from Gantt's own venv so that Nova's dependency pins never reach Gantt. Rebuilt when the pinned version
changes (the directory name carries it).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

NOVA = "nova==34.0.0"


def venv_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "gantt" / f"reference-{NOVA.replace('==', '-')}-py{sys.version_info[0]}{sys.version_info[1]}"


def python() -> Path:
    """The reference interpreter, building its venv first if needed (a few minutes, once per machine)."""
    path = venv_dir()
    exe = path / "bin" / "python"
    stamp = path / ".installed"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # test workers (xdist) and scripts may ask at once: one builds
        if not stamp.exists():
            base = os.environ.get("GANTT_REFERENCE_PYTHON", "python3")
            subprocess.run([base, "-m", "venv", "--clear", str(path)], check=True)
            subprocess.run([str(exe), "-m", "pip", "install", "-q", "--disable-pip-version-check", NOVA],
                           check=True)
            stamp.write_text(NOVA + "\n")
    return exe


if __name__ == "__main__":
    print(python())
