"""nova.conf's ``[gantt]`` section, and Gantt's Config read from Nova's own oslo.config object.

The manager runs inside Nova's service framework, which has parsed nova.conf (and, in Nova's functional tests,
had options set with ``self.flags``) into ``nova.conf.CONF``: Gantt's options are read from that object, not from
the file again, so what Nova's code sees and what Gantt decides with are the same values. Nova's options Gantt
implements come from their sections by Gantt's field names; those Gantt refuses unless at Nova's default
(``gantt.config``'s ``*_WITHOUT_EFFECT``) are refused here too; an option set away from its default in a section
that decides placements and that Gantt neither implements nor lists as not used (``novaconf.NOT_USED``) is refused,
as ``gantt serve`` refuses it in a file.
"""

from __future__ import annotations

import threading
from typing import Any

import msgspec
from oslo_config import cfg

from gantt.config import Config, novaconf, per_request
from gantt.model import InvalidRequest

GROUP = "gantt"

OPTS = [
    cfg.StrOpt("store", help="Gantt's store URL: sqlite:///path (one machine; every nova-scheduler on it shares the "
               "file), etcd://host:port[,host:port...] (several machines) or memory:// (one process, tests). "
               "Default: sqlite:///$state_path/gantt.sqlite."),
    cfg.FloatOpt("cell_poll_interval", default=10.0, min=0.5,
                 help="Seconds between two reads of the cell databases' compute nodes and services. A read writes "
                      "only what changed; a decision also reads first when a cheap check sees a change. Must be "
                      "well below [DEFAULT] service_down_time: each read is the nodes' heartbeat in Gantt."),
    cfg.FloatOpt("claim_timeout", default=600.0, min=1.0,
                 help="A claim a compute node has not listed (instance info) by then is released."),
    cfg.IntOpt("claim_retries", default=8, min=0,
               help="How many store conflicts one select_destinations absorbs before it fails."),
    cfg.IntOpt("seed", help="Seed of Gantt's random choices (tests only)."),
]

# The sections of Gantt's Config filled from Nova's options of the same names ([gantt] apart).
_SECTIONS = ("filter_scheduler", "scheduler", "metrics", "DEFAULT", "compute", "pci", "workarounds")
# Sections whose options decide placements: one Gantt neither implements nor lists as not used must be at its default.
_DECIDING = ("filter_scheduler", "scheduler", "metrics", "pci")


def register(conf: cfg.ConfigOpts) -> None:
    """Register ``[gantt]`` (idempotent: the options are the same objects each time)."""
    conf.register_opts(OPTS, group=GROUP)


def store_url(conf: cfg.ConfigOpts) -> str:
    register(conf)
    if conf.gantt.store:
        return str(conf.gantt.store)
    return f"sqlite:///{conf.state_path}/gantt.sqlite"


def _group(conf: cfg.ConfigOpts, section: str) -> Any:
    return conf if section == "DEFAULT" else conf[section]


def _registered(conf: cfg.ConfigOpts, section: str) -> dict[str, Any]:
    """The options registered in ``section`` (name -> Opt)."""
    if section == "DEFAULT":
        return {name: info["opt"] for name, info in conf._opts.items()}
    if section not in conf:
        return {}
    return {name: info["opt"] for name, info in conf._groups[section]._opts.items()}


def gantt_config(conf: cfg.ConfigOpts) -> Config:
    """Gantt's Config from Nova's parsed options. Raises ``gantt.model.InvalidRequest`` naming the option Gantt
    cannot honour."""
    register(conf)
    data: dict[str, Any] = {}
    for section in _SECTIONS:
        known = {f.name for f in msgspec.structs.fields(_section_type(section))}
        opts = _registered(conf, section)
        group = _group(conf, section)
        values: dict[str, Any] = {}
        for name, opt in opts.items():
            value = getattr(group, name)
            if name in known:
                values[name] = list(value) if isinstance(value, list | tuple) else value
            elif (section in _DECIDING and name not in novaconf.NOT_USED.get(section, {})
                  and value != opt.default):
                raise InvalidRequest(f"[{section}] {name} = {value!r}: Gantt does not implement this option; "
                                     "leave it at Nova's default", field=f"{section}.{name}")
        data[section] = values
    _nova_decides_same_host(data["DEFAULT"])
    gantt = conf[GROUP]
    data["gantt"] = {"store": store_url(conf), "claim_timeout": gantt.claim_timeout,
                     "claim_retries": gantt.claim_retries, "seed": gantt.seed,
                     "cell_poll_interval": gantt.cell_poll_interval}
    return Config.from_dict(data)


class RequestOptions:
    """Nova's options its scheduler reads at each request (``gantt.config.per_request.PER_REQUEST``, ``[pci] alias``
    and ``[scheduler] max_attempts`` among them), followed from nova.conf into the running Config: a change after
    start (a functional test's ``self.flags``, oslo.config's mutate) applies to the next request, which reads them
    from that Config only. Cheap while nothing changed: one read of each option, one comparison."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self._conf = conf
        self._names = tuple((section, name) for section, names in per_request.PER_REQUEST.items()
                            for name in names if name in _registered(conf, section))
        self._lock = threading.Lock()
        self._seen = self._read()  # what the Config was built from (``gantt_config``, just before)
        self._refused: InvalidRequest | None = None

    def _read(self) -> tuple[Any, ...]:
        groups = {section: _group(self._conf, section) for section in {section for section, _ in self._names}}
        return tuple(getattr(groups[section], name) for section, name in self._names)

    def follow(self, config: Config) -> bool:
        """``config`` takes nova.conf's values now; returns whether any changed (the caller's engine then needs new
        filters and weighers: ``Engine.retune``). Raises ``gantt.model.InvalidRequest`` naming a value Gantt
        cannot honour (at each request while it is set; the Config keeps the values it had)."""
        seen = self._read()
        with self._lock:
            if seen != self._seen:
                values: dict[str, dict[str, Any]] = {}
                for (section, name), value in zip(self._names, seen, strict=True):
                    values.setdefault(section, {})[name] = value
                self._seen = seen
                try:
                    changed = per_request.retune(config, values)
                except InvalidRequest as exc:
                    self._refused = exc
                    raise
                self._refused = None
                return bool(changed)
            refused = self._refused
        if refused is not None:  # a fresh exception each time: one raised again would pile up tracebacks
            raise InvalidRequest(refused.message, field=refused.field)
        return False


def _nova_decides_same_host(default: dict[str, Any]) -> None:
    """Nova's scheduler never excludes a move's source host itself: nova-api does, by putting it in the
    RequestSpec's ``ignore_hosts`` unless ``allow_resize_to_same_host`` (a resize) or the node's
    COMPUTE_SAME_HOST_COLD_MIGRATE trait (a cold migration) allows it. Gantt's own exclusion (its
    ``allow_resize_to_same_host``, for its own API) would refuse what the API allowed, so it is off here."""
    default["allow_resize_to_same_host"] = True


def _section_type(section: str) -> type[msgspec.Struct]:
    return type(getattr(Config(), "default" if section == "DEFAULT" else section))
