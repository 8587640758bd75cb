"""What ``python -m gantt.nova.functional`` changes in a test worker before Nova's tests import: Gantt in place of
Placement, and (unless ``placement`` alone is asked) in place of Nova's scheduler.

The changes are made as the modules they change are imported (``_AfterImport``), never by importing them early:
the worker imports Nova in the order the reference run does (``nova.tests`` monkey-patches with eventlet first),
and a test that never imports Nova's scheduler never has it imported for it.

- ``nova.tests.functional.fixtures.PlacementFixture`` (every functional test's Placement) becomes
  ``GanttPlacementFixture``: Placement's own fixture keeps its configuration part (tests set Placement options on
  its ``conf_fixture``) but neither its database nor its in-process app; Nova's report client is sent over real
  HTTP to a fresh ``gantt serve`` of the test's own (forkserver.py), at ``<server>/placement``.
- With the scheduler swapped: ``nova.service.SERVICE_MANAGERS['nova-scheduler']`` names Gantt's manager, whose
  ``[gantt] store`` is the test's server's store (an SQLite file), so a decision and its allocations are one commit
  in the store the Placement face serves; and Nova's own scheduling code (its manager's ``select_destinations``,
  ``HostManager.get_filtered_hosts`` and ``get_weighed_hosts``, the weighers' handler and the report client's
  ``get_allocation_candidates``) raises if called, and a call, even one whose exception something caught, fails
  the test at its cleanup.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import tempfile
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from gantt.nova.functional.forkserver import Factory

# The environment the runner passes to its workers: which parts to swap ("placement", "scheduler").
MODE_ENV = "GANTT_NOVA_SWAP"
LOG_ENV = "GANTT_NOVA_LOG_DIR"
MANAGER = "gantt.nova.functional.manager.FunctionalSchedulerManager"
# The Gantt options every test's server starts with: Nova's services report no Gantt heartbeat here, and the
# placement face's answers must not depend on a clock. The policy options are those Placement's fixture gave
# Placement (``server_config``).
SERVER_CONFIG = '[DEFAULT]\nservice_down_time = 86400\n\n[gantt]\nseed = 7\n\n'


def server_config(oslo_policy: Any) -> str:
    """Gantt's options for a test whose Placement would have had ``oslo_policy`` (its fixture's ``[oslo_policy]``:
    Placement's fixture turns ``enforce_new_defaults`` off, so that an ``admin`` token may do what Placement's
    deprecated ``role:admin`` rules allowed, such as ``POST /reshaper``)."""
    from oslo_config import cfg

    try:
        scope = bool(oslo_policy.enforce_scope)
    except cfg.NoSuchOptError:  # oslo.policy without the option always enforces scope
        scope = True
    return SERVER_CONFIG + (f"[oslo_policy]\nenforce_new_defaults = {str(oslo_policy.enforce_new_defaults).lower()}"
                            f"\nenforce_scope = {str(scope).lower()}\n")

# What must not run when Gantt schedules: (module, attribute path).
NOVA_SCHEDULING = (
    ("nova.scheduler.manager", "SchedulerManager.select_destinations"),
    ("nova.scheduler.host_manager", "HostManager.get_filtered_hosts"),
    ("nova.scheduler.host_manager", "HostManager.get_weighed_hosts"),
    ("nova.weights", "BaseWeightHandler.get_weighed_objects"),
    ("nova.scheduler.client.report", "SchedulerReportClient.get_allocation_candidates"),
)


class _Loader(importlib.abc.Loader):
    """The module's own loader, then ``after(module)``."""

    def __init__(self, loader: Any, after: Callable[[ModuleType], None]) -> None:
        self.loader = loader
        self.after = after

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        created: ModuleType | None = self.loader.create_module(spec)
        return created

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        self.after(module)


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, hooks: dict[str, Callable[[ModuleType], None]]) -> None:
        self.hooks = hooks

    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        after = self.hooks.pop(name, None)  # once: a module re-imported under test is not changed twice
        if after is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, after)
                return spec
        return None


class Servers:
    """This worker's Gantt servers: one per test, from one factory, under one scratch directory."""

    def __init__(self) -> None:
        base = os.environ.get(LOG_ENV)
        self.root = Path(tempfile.mkdtemp(prefix="gantt-nova-functional-", dir=base))
        self.factory = Factory(self.root)
        atexit.register(self.factory.close)

    def start(self, store_kind: str, config: str) -> tuple[int, str, str, Path]:
        """(pid, url, store URL, directory) of a new server with the options ``config`` (TOML); its log is the
        directory's server.log."""
        workdir = self.root / uuid.uuid4().hex[:12]
        workdir.mkdir()
        (workdir / "gantt.toml").write_text(config)
        store = "memory://" if store_kind == "memory" else f"sqlite:///{workdir}/gantt.sqlite"
        pid, port = self.factory.serve(store, workdir / "gantt.toml", workdir / "server.log")
        return pid, f"http://127.0.0.1:{port}", store, workdir

    def stop(self, pid: int, workdir: Path) -> None:
        self.factory.stop(pid)
        for path in sorted(workdir.iterdir()):
            if path.name.startswith("gantt.sqlite"):
                path.unlink()  # the store goes; the log stays for a failed test's reader


_SERVERS: Servers | None = None


def servers() -> Servers:
    global _SERVERS
    if _SERVERS is None:
        _SERVERS = Servers()
    return _SERVERS


def _wait_ready(url: str, pid: int, workdir: Path, timeout: float = 60.0) -> None:
    """Until the server answers: a server that cannot start says why in the test that asked for it."""
    import time

    import requests

    deadline = time.monotonic() + timeout
    while True:
        try:
            if requests.get(url + "/health", timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass
        if time.monotonic() > deadline:
            log = (workdir / "server.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"gantt serve (pid {pid}) not ready after {timeout}s:\n{log}")
        time.sleep(0.02)


def _forbid(fixtures: Any, calls: list[str]) -> list[Any]:
    """Fixtures replacing Nova's scheduling code with a function that notes the call and raises."""
    patches = []
    for module, attribute in NOVA_SCHEDULING:
        name = f"{module}.{attribute}"

        def forbidden(*args: Any, _name: str = name, **kwargs: Any) -> Any:
            calls.append(_name)
            raise AssertionError(f"{_name} was called while Gantt schedules")

        patches.append(fixtures.MonkeyPatch(name, forbidden))
    return patches


def serve_placement_from_gantt(cls: type[Any], *, scheduler: bool, forbid: bool) -> None:
    """Nova's PlacementFixture ``cls``, changed in place to be served by Gantt (see the module's docstring).

    In place, not by a subclass bound to the module's name: Nova's methods call ``super(PlacementFixture, self)``,
    which would find the subclass again."""
    import fixtures

    init, set_up, configure = cls.__init__, cls.setUp, cls._configure_placement

    def __init__(self: Any, token: str = "admin", conf_fixture: Any = None, db: bool = True,
                 use_intercept: bool = True, register_opts: bool = True) -> None:
        # Placement's database and in-process app are Gantt's server here, whatever the test asked.
        init(self, token=token, conf_fixture=conf_fixture, db=False, use_intercept=False,
             register_opts=register_opts)

    def _configure_placement(self: Any, conf_fixture: Any) -> None:
        configure(self, conf_fixture)
        # Placement's options must parse (the database's is required); nothing opens this one.
        conf_fixture.config(group="placement_database", connection="sqlite://")

    def setUp(self: Any) -> None:
        set_up(self)
        pool = servers()
        pid, url, store, workdir = pool.start("sqlite" if scheduler else "memory",
                                              server_config(self.conf_fixture.conf.oslo_policy))
        self.addCleanup(pool.stop, pid, workdir)
        _wait_ready(url, pid, workdir)
        self.gantt_url, self.gantt_store, self.gantt_log = url, store, workdir / "server.log"
        self.endpoint = url + "/placement"
        if scheduler:
            _swap_scheduler(self, store)
        if forbid:
            _forbid_nova_scheduling(self, fixtures)

    # Nova's fixture is changed in place: its methods call super(PlacementFixture, self)
    cls.__init__ = __init__
    cls._configure_placement = _configure_placement
    cls.setUp = setUp


def _swap_scheduler(fixture: Any, store: str) -> None:
    import nova.conf
    from oslo_config import fixture as config_fixture

    from gantt.nova import conf as gantt_conf

    gantt_conf.register(nova.conf.CONF)
    conf = fixture.useFixture(config_fixture.Config(nova.conf.CONF))
    conf.config(group=gantt_conf.GROUP, store=store, seed=7)


def _forbid_nova_scheduling(fixture: Any, fixtures: Any) -> None:
    calls: list[str] = []
    fixture.addCleanup(_check_not_called, calls)
    for patch in _forbid(fixtures, calls):
        fixture.useFixture(patch)


def _check_not_called(calls: list[str]) -> None:
    if calls:
        raise AssertionError(f"Nova's own scheduling code ran while Gantt schedules: {sorted(set(calls))}")


def install(parts: set[str]) -> None:
    """Swap ``parts`` ("placement", "scheduler") as their modules are imported. ``forbid`` (implied by
    ``scheduler``) makes Nova's own scheduling code fail the test that calls it: alone, with Nova's scheduler still
    deciding, it shows that the guard catches a call (tests/nova/test_functional_ratchet.py)."""
    unknown = parts - {"placement", "scheduler", "forbid"}
    if unknown or not parts:
        raise ValueError(f"{MODE_ENV} must name placement, scheduler or forbid, not {sorted(unknown) or 'nothing'}")
    scheduler = "scheduler" in parts
    forbid = scheduler or "forbid" in parts
    if "placement" not in parts:
        raise ValueError("every swap starts from Gantt's Placement face (Gantt's scheduler claims in its store)")

    def fixtures_module(module: ModuleType) -> None:
        serve_placement_from_gantt(module.PlacementFixture, scheduler=scheduler, forbid=forbid)

    def service_module(module: ModuleType) -> None:
        module.SERVICE_MANAGERS["nova-scheduler"] = MANAGER
        # Imported now, as the tests are loaded, not by the first test's scheduler service: Nova's fixtures fail a
        # test that calls os.uname, which numpy does once, on import.
        importlib.import_module(MANAGER.rpartition(".")[0])
        from gantt.nova.functional import weighers

        weighers.install()

    hooks: dict[str, Callable[[ModuleType], None]] = {"nova.tests.functional.fixtures": fixtures_module}
    if scheduler:
        hooks["nova.service"] = service_module
    sys.meta_path.insert(0, _AfterImport(hooks))


def install_from_environment() -> None:
    value = os.environ.get(MODE_ENV, "")
    install({part for part in value.split(",") if part})
