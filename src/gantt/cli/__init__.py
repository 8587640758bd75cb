"""The ``gantt`` command: run the service, talk to it, audit a store, run benchmarks, the simulator, the demo.

Client commands take ``--url`` (GANTT_URL, default http://127.0.0.1:8780), ``--token`` (GANTT_TOKEN) and
``--namespace`` (GANTT_NAMESPACE, default the service's default namespace, compute). Exit status: see
terminal.EXIT_STATUS (printed by ``gantt --help``). The parser and dispatch are in dispatch.py; each command's
module is named for what it acts on (hosts, scheduling, allocations, audit, launch, volume).
"""

from gantt.cli.dispatch import main

__all__ = ["main"]
