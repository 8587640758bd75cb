"""``gantt nova-scheduler --config-file /etc/nova/nova.conf``: Nova's scheduler service with Gantt's manager, started
as Nova's own ``nova-scheduler`` console script starts it (nova/cmd/scheduler.py): oslo.config reads the command
line and nova.conf, logging and RPC are set up, and ``nova.service.Service`` serves the manager on topic
``scheduler``. One process: a deployment runs several (on one machine or several) sharing ``[gantt] store``;
``[scheduler] workers`` (forked workers, each needing its own replica) is refused above 1.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

# imported with this module, so that `gantt nova-scheduler` without nova fails at its import (the CLI's clear error)
from nova import monkey_patch

MANAGER = "gantt.nova.manager.SchedulerManager"


def main(argv: Sequence[str] | None = None) -> int:
    # as nova-scheduler: the threading backend, patched before the rest of nova is imported
    monkey_patch.patch(backend="threading")

    import nova.conf
    from nova import config, objects, service
    from nova.scheduler import rpcapi
    from oslo_log import log as logging

    argv = list(sys.argv if argv is None else argv)
    conf = nova.conf.CONF
    from gantt.nova import conf as gantt_conf

    gantt_conf.register(conf)
    config.parse_args(argv)
    logging.setup(conf, "nova")
    objects.register_all()
    objects.Service.enable_min_version_cache()
    log = logging.getLogger(__name__)
    if conf.scheduler.workers not in (None, 1):
        log.error("[scheduler] workers = %s: Gantt's nova-scheduler is one process; run several side by side on "
                  "one [gantt] store instead", conf.scheduler.workers)
        return 2
    service.SERVICE_MANAGERS["nova-scheduler"] = MANAGER
    server = service.Service.create(binary="nova-scheduler", topic=rpcapi.RPC_TOPIC, manager=MANAGER)
    service.serve(server, workers=1, no_fork=True)  # one process: its replica's threads live where it serves
    service.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
