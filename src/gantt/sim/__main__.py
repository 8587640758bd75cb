"""``python -m gantt.sim SCENARIO.toml`` — the same as ``gantt simulate``."""

import sys

from gantt.sim.cli import main

sys.exit(main())
