"""What the scripts under bench/ share: the machine's CPU model (every report names it), and loading a sibling
script as a module (bench/ is a folder of scripts, not a package)."""

from __future__ import annotations

import importlib.util
import platform
from pathlib import Path
from typing import Any


def bench_script(beside: str, name: str) -> Any:
    """The bench script ``name`` (``http_api``, ``mixed``) in the folder of ``beside`` (a script's ``__file__``),
    loaded as a module: bench/ is a folder of scripts, not a package, and some reuse another's client, report
    shapes or /proc readings."""
    path = Path(beside).resolve().parent / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"gantt_bench_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"no bench script at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
