"""Issue 11: broken or foreign store files give one line naming the file and the problem, a distinct exit
status (3), and no write to a file that is not a Gantt store; one undecodable row is reported, not fatal."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gantt.model import HostReport, HostStats
from gantt.replication.replica import Replica
from gantt.store.base import Batch
from gantt.store.sqlite import SQLiteStore
from tests.conftest import host_stats


def _gantt(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gantt", *args], capture_output=True, text=True, timeout=60)


def _store(path: Path, hosts: int = 50) -> None:
    with SQLiteStore(f"sqlite:///{path}") as store:
        store.commit(Batch(reports=[HostReport(host=f"h{i}", stats=HostStats(**host_stats()), reported_at=time.time())
                                    for i in range(hosts)]))


def _garbage(path: Path) -> None:
    path.write_bytes(b"not a database at all" * 500)


def _truncated(path: Path) -> None:
    _store(path, 400)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _bad_page(path: Path) -> None:
    _store(path, 400)
    data = bytearray(path.read_bytes())
    page = 4096
    data[3 * page: 4 * page] = b"\xa5" * page  # a b-tree page overwritten
    path.write_bytes(bytes(data))


def _missing_meta(path: Path) -> None:
    _store(path)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM meta WHERE key='revision'")


def _foreign(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
        conn.execute("INSERT INTO users VALUES ('alice')")


CORRUPTIONS = {"garbage": (_garbage, "not a SQLite database or damaged"),
               "truncated": (_truncated, "damaged"),
               "bad page": (_bad_page, "damaged"),
               "missing meta row": (_missing_meta, "meta row 'revision' is missing"),
               "foreign database": (_foreign, "not a Gantt store")}


@pytest.mark.parametrize("command", ["audit", "serve"])
@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_a_broken_or_foreign_file_is_one_line_and_exit_3(tmp_path: Path, kind: str, command: str) -> None:
    path = tmp_path / "store.sqlite"
    make, expected = CORRUPTIONS[kind]
    make(path)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    args = ["audit", "--store", f"sqlite:///{path}"] if command == "audit" else \
        ["serve", "--store", f"sqlite:///{path}", "--port", "0"]
    done = _gantt(*args)
    assert done.returncode == 3, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(path) in lines[0] and expected in lines[0], done.stderr
    assert "Traceback" not in done.stderr and "serving" not in done.stdout
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before  # nothing written to it


def test_a_read_only_store_is_refused_by_serve_and_audited(tmp_path: Path) -> None:
    """Issue 11: a read-only store file printed "serving" and failed later. As root, permissions do not stop a
    write, so the file is made immutable (chattr +i), which stops root too; otherwise mode 0444 does."""
    path = tmp_path / "store.sqlite"
    _store(path)
    immutable = os.geteuid() == 0 and subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0
    if not immutable:
        if os.geteuid() == 0:
            pytest.fail("cannot make a file read-only for root here (chattr +i failed)")
        path.chmod(0o444)
    try:
        done = _gantt("serve", "--store", f"sqlite:///{path}", "--port", "0")
        assert done.returncode == 3, done.stderr
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and str(path) in lines[0] and "cannot be written" in lines[0], done.stderr
        assert "serving" not in done.stdout
        audited = _gantt("audit", "--store", f"sqlite:///{path}")
        assert audited.returncode == 0 and "audit ok" in audited.stdout, audited.stderr
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(path)], check=True)


def test_audit_never_creates_a_store(tmp_path: Path) -> None:
    path = tmp_path / "typo.sqlite"
    done = _gantt("audit", "--store", f"sqlite:///{path}")
    assert done.returncode == 3 and "no such store" in done.stderr
    assert not path.exists()


def test_an_undecodable_row_is_reported_with_its_key_and_the_rest_loads(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    _store(path, 3)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE hosts SET data = x'ff00' WHERE host = 'h1'")
    store = SQLiteStore(f"sqlite:///{path}")
    replica = Replica(store).start(follow=False)
    assert sorted({host for host, _ in replica.table}) == ["h0", "h2"]
    assert store.skipped and "host h1/h1" in store.skipped[0]
    store.close()
    done = _gantt("audit", "--store", f"sqlite:///{path}")
    assert done.returncode == 1 and "unreadable row, skipped: host h1/h1" in done.stdout
