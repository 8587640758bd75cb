"""A test worker of ``python -m gantt.nova.functional``: stestr starts it as ``$PYTHON -m
stestr.subunit_runner.run discover …`` with ``PYTHON`` set to ``<python> -m gantt.nova.functional.worker``. It
installs the swap ``GANTT_NOVA_SWAP`` names (swap.py), then runs the module it was given as ``__main__``, with that
module's arguments, as the interpreter would have."""

from __future__ import annotations

import runpy
import sys

from gantt.nova.functional import swap


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[1] != "-m":
        raise SystemExit("usage: python -m gantt.nova.functional.worker -m MODULE [ARGS...]")
    module = sys.argv[2]
    swap.install_from_environment()
    sys.argv = [module, *sys.argv[3:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
