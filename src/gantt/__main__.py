"""``python -m gantt``: the ``gantt`` command."""

import sys

from gantt.cli import main

sys.exit(main())
