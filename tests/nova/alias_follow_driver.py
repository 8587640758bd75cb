"""Runs in Nova's venv (tests/nova/venv.py): gantt.nova.conf.RequestOptions (the one follower of the options Nova reads
per request) on Nova's own ``nova.conf.CONF``, with ``[pci] alias`` and ``[scheduler] max_attempts`` changed after
Gantt's Config was read, as Nova's functional tests do with ``self.flags``. Reads ``{"src": ...}`` on stdin, writes
what the Config held at each step."""

from __future__ import annotations

import json
import sys
import warnings

warnings.filterwarnings("ignore")


def main() -> None:
    doc = json.load(sys.stdin)
    sys.path.insert(0, doc["src"])
    import nova.conf

    from gantt.model import InvalidRequest
    from gantt.nova import conf as gantt_conf

    conf = nova.conf.CONF
    conf([], project="nova", default_config_files=[])
    conf.set_override("alias", ['{"name": "a-pci", "vendor_id": "8086", "product_id": "1520"}'], group="pci")
    config = gantt_conf.gantt_config(conf)
    options = gantt_conf.RequestOptions(conf)
    out: dict[str, object] = {"start": [sorted(config.pci.aliases), options.follow(config)]}
    # Nova 34's PCI-in-Placement alias, defined after the scheduler started
    conf.set_override("alias", ['{"name": "a-gpu", "resource_class": "GPU", "traits": "purple"}', " "], group="pci")
    conf.set_override("max_attempts", 5, group="scheduler")
    changed = options.follow(config)
    out["followed"] = [sorted(config.pci.aliases), config.pci.alias, config.scheduler.max_attempts, changed]
    conf.set_override("alias", ['{"name": "bad", "vendor_id": "80861", "product_id": "1520"}'], group="pci")
    for step in ("refused", "refused_again"):  # at each request while it is set
        try:
            options.follow(config)
            out[step] = None
        except InvalidRequest as exc:
            out[step] = [exc.field, exc.message]
    out["kept"] = sorted(config.pci.aliases)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
