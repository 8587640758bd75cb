"""The Nova side of the nova.conf parity test: runs under the reference virtualenv (nova==34.0.0, oslo.config),
never imports gantt.

Reads ``{"conf": PATH, "options": [[section, name], ...]}`` on stdin; loads the file with oslo.config as
nova-scheduler does (Nova's own options registered, plus oslo.policy's and oslo.middleware's cors options the
generator lists for nova.conf) and writes, for each option, ``{"type": oslo type name, "value": what oslo.config
gives}`` or ``{"type": ..., "error": why}`` (a value oslo.config refuses), or ``{"unknown": true}`` (no such
option), as JSON on stdout.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import warnings

warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)

import nova.conf  # noqa: E402
from oslo_config import cfg, generator  # noqa: E402


def main() -> None:
    payload = json.load(sys.stdin)
    conf = cfg.ConfigOpts()
    # The options the sample lists for nova.conf in the sections asked about, registered as the generator finds
    # them (the others' required options, keystoneauth's, would stop the load).
    wanted = {section for section, _ in payload["options"]}
    for _namespace, groups in generator._list_opts(["nova.conf", "oslo.policy", "oslo.middleware"]):
        for group, opts in groups:
            name = "DEFAULT" if group is None else (group if isinstance(group, str) else group.name)
            if name not in wanted:
                continue
            for opt in opts:
                with contextlib.suppress(cfg.DuplicateOptError):
                    conf.register_opt(opt, group=None if name == "DEFAULT" else name)
    conf([], project="nova", default_config_files=[payload["conf"]], use_env=False)
    out = {}
    for section, name in payload["options"]:
        group = conf if section == "DEFAULT" else getattr(conf, section, None)
        try:
            opt = conf._get_opt_info(name, None if section == "DEFAULT" else section)["opt"]
        except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
            out[f"{section}.{name}"] = {"unknown": True}
            continue
        kind = type(opt.type).__name__
        try:
            value = getattr(group, name)
        except (ValueError, cfg.ConfigFileValueError) as exc:
            out[f"{section}.{name}"] = {"type": kind, "error": str(exc)}
            continue
        out[f"{section}.{name}"] = {"type": kind, "multi": bool(opt.multi), "value": value,
                                    "default": opt.default}
    json.dump(out, sys.stdout, default=str)


if __name__ == "__main__":
    main()
    _ = nova.conf  # imported for its options' registration side effects
