"""The writers of one SQLite file queue on its ``-wlock`` side file (store.sqlite_lock), and stay bounded by
``busy_timeout``: a holder that stops makes the others' writes fail after it, never hang them."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gantt.model import StoreUnavailable
from gantt.store.base import Batch
from gantt.store.sqlite import SQLiteStore
from gantt.store.sqlite_lock import WriteLock
from tests.store.contract import report


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "gantt.sqlite")


def test_a_writer_that_gave_up_leaves_the_lock_to_the_next(path: str) -> None:
    """Two lock objects (two open files, as two processes have): the second waits, gives up after its timeout,
    and its waiter, which gets the lock once the first lets go, hands it on instead of keeping it."""
    first, second = WriteLock(f"{path}-wlock"), WriteLock(f"{path}-wlock")
    try:
        assert first.acquire(1.0)
        assert not second.acquire(0.1)
        assert second.waits == 1
        first.release()  # second's waiter takes the lock now, and lets it go: its writer gave up
        assert first.acquire(30.0)  # would wait for ever if the waiter kept it
        assert not second.acquire(0.1)
        first.release()
        assert second.acquire(30.0)  # handed over by the waiter still blocked from the try before
        assert not first.acquire(0.05)
        second.release()
        assert first.acquire(30.0)
        first.release()
    finally:
        first.close()
        second.close()


def _hold(url: str, lock_path: str, sqlite_too: bool, held: Any, release: Any) -> None:
    """Another process's writer: the file's write lock (and SQLite's, when ``sqlite_too``) until told."""
    lock = WriteLock(lock_path)
    assert lock.acquire(10.0)
    conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    if sqlite_too:
        conn.execute("BEGIN IMMEDIATE")
    held.set()
    release.wait(120)
    if sqlite_too:
        conn.execute("ROLLBACK")
    lock.release()
    lock.close()


def _holder(url: str, *, sqlite_too: bool) -> tuple[Any, Any, Any]:
    ctx = multiprocessing.get_context("spawn")
    held, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold, args=(url, f"{url.removeprefix('sqlite:///')}-wlock", sqlite_too, held, release))
    proc.start()
    assert held.wait(60), "the holder process did not start"
    return proc, held, release


def test_a_writer_waits_for_another_process_holding_the_file_lock(path: str) -> None:
    """The writer queues on the side file: while another process holds it, the commit waits (counted as a lock
    wait) and goes through once it is let go."""
    url = f"sqlite:///{path}"
    store = SQLiteStore(url)
    try:
        store.commit(Batch(reports=[report("h0")]))
        proc, _, release = _holder(url, sqlite_too=False)
        try:
            waits = store.lock_waits
            future = store.commit_soon(Batch(reports=[report("h1")]))
            deadline = time.monotonic() + 30
            while store.lock_waits == waits and time.monotonic() < deadline:
                time.sleep(0.005)
            assert store.lock_waits == waits + 1  # waiting for the other process, not writing past it
            assert not future.done()
            release.set()
            assert future.result(timeout=60).revision == 2
        finally:
            release.set()
            proc.join(30)
        assert proc.exitcode == 0
    finally:
        store.close()


def test_a_stopped_holder_makes_the_write_fail_after_busy_timeout_not_hang(path: str) -> None:
    """A process stopped (SIGSTOP) while it holds the locks: the other's write fails with StoreUnavailable once
    busy_timeout has passed, as on SQLite's own lock; once the holder goes on and lets go, writes go through."""
    url = f"sqlite:///{path}"
    store = SQLiteStore(url, busy_timeout=0.5)
    try:
        store.commit(Batch(reports=[report("h0")]))
        proc, _, release = _holder(url, sqlite_too=True)
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            outcome: list[BaseException | int] = []

            def write() -> None:
                try:
                    outcome.append(store.commit(Batch(reports=[report("h1")])).revision)
                except BaseException as exc:  # the outcome is the assertion
                    outcome.append(exc)

            writer = threading.Thread(target=write)
            writer.start()
            writer.join(60)  # a guard only: the write fails after busy_timeout (0.5 s)
            assert not writer.is_alive(), "the write hung behind a stopped holder"
            [failed] = outcome
            assert isinstance(failed, StoreUnavailable) and "cannot take the write lock" in str(failed)
            assert store.last_write_error is not None
        finally:
            os.kill(proc.pid, signal.SIGCONT)
            release.set()
            proc.join(30)
        assert proc.exitcode == 0
        assert store.commit(Batch(reports=[report("h2")])).revision == 2
        assert store.last_write_error is None
    finally:
        store.close()
