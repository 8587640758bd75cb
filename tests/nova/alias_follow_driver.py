"""Runs in Nova's venv (tests/nova/venv.py): gantt.nova.conf.follow_pci_alias on Nova's own ``nova.conf.CONF``, with
``[pci] alias`` changed after Gantt's Config was read, as Nova's functional tests do with ``self.flags``. Reads
``{"src": ...}`` on stdin, writes what the Config's aliases were at each step."""

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
    out: dict[str, object] = {"start": sorted(config.pci.aliases)}
    # Nova 34's PCI-in-Placement alias, defined after the scheduler started
    conf.set_override("alias", ['{"name": "a-gpu", "resource_class": "GPU", "traits": "purple"}', " "], group="pci")
    gantt_conf.follow_pci_alias(conf, config)
    out["followed"] = [sorted(config.pci.aliases), config.pci.alias]
    conf.set_override("alias", ['{"name": "bad", "vendor_id": "80861", "product_id": "1520"}'], group="pci")
    try:
        gantt_conf.follow_pci_alias(conf, config)
        out["refused"] = None
    except InvalidRequest as exc:
        out["refused"] = [exc.field, exc.message]
    out["kept"] = sorted(config.pci.aliases)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
