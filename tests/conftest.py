"""Shared test helpers: a scheduler with a few hosts, built the way a cloud reports them."""

from __future__ import annotations

import faulthandler
import os
import threading
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest

from gantt import Scheduler
from gantt.config import Config
from gantt.replication.replica import Replica
from gantt.store.sqlite import SQLiteStore

# Every process a test starts (servers, workers, spawned claimers) inherits this: a crash prints its stack.
os.environ["PYTHONFAULTHANDLER"] = "1"

# A test that outlives pytest-timeout (whose signal handler cannot run while the main thread is stuck in C code
# or waits for the GIL) is ended by faulthandler's own watchdog thread, which needs no GIL: it prints every
# thread's stack to the terminal and exits the worker, which pytest-xdist reports as a crash and replaces. A hang
# then costs minutes and shows where it is, instead of holding CI until its deadline.
HANG_SECONDS = float(os.environ.get("GANTT_TEST_HANG_SECONDS", "420"))
_terminal: IO[str] | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _terminal
    # Duplicated before capture replaces fd 2: the stacks must reach the terminal, not a test's capture file.
    _terminal = os.fdopen(os.dup(2), "w")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    if _terminal is not None:
        _terminal.write("")  # the file must be open: faulthandler keeps only its descriptor
        # A test that declares a longer pytest-timeout (the upstream gabbi suite) gets the same margin over it.
        marker = item.get_closest_marker("timeout")
        limit = max(HANG_SECONDS, float(marker.args[0]) + 120) if marker and marker.args else HANG_SECONDS
        faulthandler.dump_traceback_later(limit, exit=True, file=_terminal)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish() -> None:
    # A worker must also exit after its last test: threads or children left behind that block shutdown are a
    # hang too, ended the same way.
    if _terminal is not None:
        faulthandler.dump_traceback_later(120, exit=True, file=_terminal)


class FakeClock:
    """A clock the tests move by hand (liveness, claim timeouts)."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def host_stats(**overrides: Any) -> dict[str, Any]:
    """A typical KVM node: 16 vCPUs, 64 GiB, 1 TB, nothing used."""
    stats: dict[str, Any] = {
        "vcpus": 16, "vcpus_used": 0, "memory_mb": 65536, "memory_mb_used": 0, "local_gb": 1000,
        "local_gb_used": 0, "hypervisor_type": "QEMU", "hypervisor_version": 8002000,
        "cpu_allocation_ratio": 1.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
        "supported_instances": [["x86_64", "kvm", "hvm"]],
    }
    stats.update(overrides)
    return stats


def make_scheduler(hosts: dict[str, dict[str, Any]] | int = 3, *, filters: list[str] | None = None,
                   weighers: list[str] | None = None, clock: FakeClock | None = None,
                   **sections: dict[str, Any]) -> Scheduler:
    """A Scheduler with ``hosts`` (name -> stats overrides, or a count of identical hosts h0..hN-1).

    ``filters``/``weighers`` set enabled_filters / weight_classes; other keyword arguments are config sections.
    """
    config: dict[str, Any] = {k: dict(v) for k, v in sections.items()}
    fs = config.setdefault("filter_scheduler", {})
    if filters is not None:
        fs["enabled_filters"] = filters
    if weighers is not None:
        fs["weight_classes"] = weighers
    config.setdefault("gantt", {}).setdefault("seed", 7)
    sched = Scheduler(config, clock=clock or FakeClock())
    if isinstance(hosts, int):
        hosts = {f"h{i}": {} for i in range(hosts)}
    for name, overrides in hosts.items():
        sched.update_resource_stats(name, host_stats(**overrides))
    return sched


def request(vcpus: int = 1, memory_mb: int = 512, root_gb: int = 1, **fields: Any) -> dict[str, Any]:
    extra_specs = fields.pop("extra_specs", {})
    spec: dict[str, Any] = {"flavor": {"name": "m1.test", "vcpus": vcpus, "memory_mb": memory_mb,
                                       "root_gb": root_gb, "extra_specs": extra_specs},
                            "project_id": "p1", "user_id": "u1"}
    spec.update(fields)
    return spec


def passing(sched: Scheduler, spec: dict[str, Any]) -> set[str]:
    """Host names (nodes, for multi-node hosts) that pass every filter for ``spec``."""
    return {c.nodename for c in sched.candidates(spec)}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def scheduler_factory() -> Callable[..., Scheduler]:
    return make_scheduler


def churn_concurrently(sched: Any, *, threads: int = 4, steps: int = 60, zones: tuple[str | None, ...] = (None,),
                       report_hosts: int = 0) -> None:
    """Threads placing and releasing on ``sched`` at once (and, with ``report_hosts``, reporting new usage for
    hosts ``h0``...), each from its own seed; then no resource class of any node is used past its capacity. A
    thread's error is raised here."""
    import random
    import threading

    import numpy as np

    from gantt import NoValidHost
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        rng = random.Random(index)
        mine: list[str] = []
        try:
            for step in range(steps):
                uuid = f"t{index}-{step}"
                flavor = rng.choice([(1, 2048, 20), (4, 8192, 80), (16, 65536, 160)])
                try:
                    sched.select_destinations(request(*flavor, project_id="p1", instance_uuids=[uuid],
                                                      availability_zone=rng.choice(zones)))
                    mine.append(uuid)
                except NoValidHost:
                    pass
                if mine and rng.random() < 0.3:
                    sched.release(mine.pop(rng.randrange(len(mine))))
                if report_hosts and rng.random() < 0.3:
                    used = rng.randrange(0, 6)
                    sched.update_resource_stats(f"h{rng.randrange(report_hosts)}",
                                                {"vcpus_used": used, "memory_mb_used": used * 3072})
        except BaseException as exc:  # raised by the calling thread
            errors.append(exc)

    running = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    if errors:
        raise errors[0]
    table = sched.table
    for rc in table.rc_index:
        capacity = table.rc_col("capacity", rc)
        assert capacity is not None
        assert np.all(table.used(rc) <= capacity + 1e-6), rc


class TableLockHolder:
    """Another thread holding a table's lock (as the feed thread applying a batch does) from ``start()`` until
    ``release`` is set, 5 s at most: how long a caller that took the lock itself would wait there."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self.taken, self.release = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._hold)

    def start(self) -> TableLockHolder:
        self.thread.start()
        assert self.taken.wait(5)
        return self

    def stop(self) -> None:
        self.release.set()
        self.thread.join()

    def __enter__(self) -> TableLockHolder:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _hold(self) -> None:
        with self.table.lock:
            self.taken.set()
            self.release.wait(5.0)


@contextmanager
def sqlite_replica_pair(directory: Path, config: Config,
                        start: float) -> Iterator[tuple[Replica, Replica, list[float], str]]:
    """Two replicas of one SQLite file (two workers of one ``serve``) on one clock the test sets (``now[0]``);
    neither follows the store on its own, so a test decides when each reads what the other wrote."""
    url = f"sqlite:///{directory}/gantt.sqlite"
    now = [start]
    a = Replica(SQLiteStore(url), config, clock=lambda: now[0]).start_owning(follow=False)
    b = Replica(SQLiteStore(url), config, clock=lambda: now[0]).start_owning(follow=False)
    try:
        yield a, b, now, url
    finally:
        a.close()
        b.close()
