"""``python -m gantt.nova.functional [--reference | --placement-only] [--workdir DIR] [stestr run arguments]``

Runs Nova's functional tests (``nova.tests.functional`` of the installed nova) with stestr, in this interpreter's
environment, and exits with stestr's status. Without a filter stestr runs every functional test; name modules with
a regex (``'nova\\.tests\\.functional\\.test_aggregates\\b'``) or ``--modules small`` / ``--modules eleven`` for
the sets the issue's figures are for.

- ``--reference``: the tests untouched (Nova's scheduler, Placement's own fixture).
- ``--placement-only``: Gantt's Placement face in place of Placement; Nova's scheduler decides.
- neither: Gantt's Placement face and Gantt's scheduler manager (``gantt.nova.manager``).

Each mode keeps its stestr repository apart, in ``--workdir`` (default ``~/.cache/gantt/nova-functional/<mode>``),
so ``stestr last`` / ``stestr failing`` there tell one mode's story; the Gantt servers' logs are under its
``servers/``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from gantt.nova.functional import LARGE, SMALL
from gantt.nova.functional.swap import LOG_ENV, MODE_ENV

MODES = {"reference": "", "placement": "placement", "gantt": "placement,scheduler"}
PREFIX = "nova.tests.functional."


def module_regex(modules: tuple[str, ...]) -> str:
    """One stestr filter for exactly these modules (a module's name never matches another's prefix)."""
    names = "|".join(m.replace(".", r"\.") for m in modules)
    return rf"^nova\.tests\.functional\.(?:{names})\."


def default_workdir(mode: str) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "gantt" / "nova-functional" / mode


def prepare(workdir: Path) -> Path:
    """The stestr config for the installed nova's functional tree, in ``workdir``; its path."""
    import nova

    site = Path(nova.__file__).resolve().parents[1]
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / ".stestr.conf"
    config.write_text(f"[DEFAULT]\ntest_path={site / 'nova' / 'tests' / 'functional'}\ntop_dir={site}\n")
    return config


def environment(swap: str, workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[3])  # the directory holding this gantt package
    # The workers import this Gantt, wherever it comes from (a checkout's src or site-packages).
    env["PYTHONPATH"] = os.pathsep.join([src, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    # As Nova's tox runs them: output and logs captured per test, a test stopped after 160 s.
    env.update({"OS_STDOUT_CAPTURE": "1", "OS_STDERR_CAPTURE": "1", "OS_LOG_CAPTURE": "1",
                "OS_TEST_TIMEOUT": env.get("OS_TEST_TIMEOUT", "160")})
    env.pop(MODE_ENV, None)
    env.pop("PYTHON", None)
    if swap:
        env[MODE_ENV] = swap
        env["PYTHON"] = f"{sys.executable} -m gantt.nova.functional.worker"
        logs = workdir / "servers"
        shutil.rmtree(logs, ignore_errors=True)  # the last run's, not this one's
        logs.mkdir(parents=True)
        env[LOG_ENV] = str(logs)
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gantt.nova.functional", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--reference", action="store_true", help="run the tests untouched")
    which.add_argument("--placement-only", action="store_true",
                       help="Gantt's Placement face only; Nova's own scheduler decides")
    parser.add_argument("--workdir", type=Path, help="where stestr keeps this mode's results")
    parser.add_argument("--modules", choices=("small", "eleven"),
                        help="the issue's eight modules, or those and three more")
    parser.add_argument("--swap", help=argparse.SUPPRESS)  # the harness's own test: swap.install's parts, raw
    args, rest = parser.parse_known_args(argv)
    mode = "reference" if args.reference else "placement" if args.placement_only else "gantt"
    swap = MODES[mode] if args.swap is None else args.swap
    if "scheduler" in swap.split(","):
        try:
            import gantt.nova.manager  # noqa: F401
        except ImportError as exc:
            parser.error(f"Gantt's scheduler manager cannot be imported ({exc}): use --placement-only")
    workdir = args.workdir or default_workdir(mode)
    config = prepare(workdir)
    if args.modules:
        rest.append(module_regex(SMALL if args.modules == "small" else SMALL + LARGE))
    command = [sys.executable, "-m", "stestr", "--config", str(config), "run", *rest]
    return subprocess.run(command, cwd=workdir, env=environment(swap, workdir)).returncode


if __name__ == "__main__":
    sys.exit(main())
