"""Issue 30 (11): the SQLite files deleted (or replaced) under a running server.

SQLite goes on writing into the unlinked inodes it holds open: before, placements still answered 200 and /health
stayed ok, and a restart on the path found an empty store, every write since gone. Now the store notices its
files are not the ones it opened (device and inode), /health answers 503 naming the file, and every write is
refused with a 503 problem instead of being acknowledged.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

import httpx
import pytest

from gantt.cli.server_process import ServerProcess
from gantt.model import HostReport, HostStats, StoreUnavailable
from gantt.store.base import Batch
from gantt.store.sqlite import LOOK_INTERVAL, SQLiteStore
from tests.conftest import host_stats, request

LATEST = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}
CONFIG = {"DEFAULT": {"service_down_time": 86400}, "gantt": {"seed": 7}}


def _files(path: Path) -> list[Path]:
    return [p for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()]


def _delete(path: Path) -> None:
    for p in _files(path):
        p.unlink()


def _replace(path: Path) -> None:
    """Another file moved in at the path (a restore from a backup under a running server, say)."""
    copy = path.with_name("copy.sqlite")
    shutil.copyfile(path, copy)
    os.replace(copy, path)


def _report(host: str) -> Batch:
    return Batch(reports=[HostReport(host=host, stats=HostStats(**host_stats()), reported_at=time.time())])


@pytest.mark.parametrize("what", ["deleted", "wal deleted", "replaced"])
def test_a_store_whose_file_went_refuses_writes_and_says_so(tmp_path: Path, what: str) -> None:
    path = tmp_path / "gantt.sqlite"
    store = SQLiteStore(f"sqlite:///{path}")
    try:
        store.commit(_report("h1"))
        assert store.last_write_error is None
        if what == "deleted":
            _delete(path)
        elif what == "wal deleted":
            Path(f"{path}-wal").unlink()
        else:
            _replace(path)
        with pytest.raises(StoreUnavailable, match="while the store was open"):
            store.commit(_report("h2"))
        time.sleep(LOOK_INTERVAL)
        error = store.last_write_error
        assert error is not None and str(path) in error.message
        assert ("replaced" if what == "replaced" else "deleted") in error.message
        with pytest.raises(StoreUnavailable):  # and stays so
            store.commit(_report("h3"))
    finally:
        store.close()


def test_a_server_whose_files_are_deleted_goes_unhealthy_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "gantt.sqlite"
    with ServerProcess(f"sqlite:///{path}", config=CONFIG, workdir=tmp_path) as server, \
            httpx.Client(base_url=server.url, timeout=30) as http:
        for i in range(3):
            assert http.post("/v1/resource-stats", json={"name": f"h{i}", "stats": host_stats()}).status_code == 200
        placed = http.post("/v1/select_destinations", json=request(vcpus=1, instance_uuids=["vm-1"]))
        assert placed.status_code == 200
        assert http.get("/health").status_code == 200
        _delete(path)
        time.sleep(2 * LOOK_INTERVAL)  # /health looks at the files at most every LOOK_INTERVAL (a commit, always)

        health = http.get("/health")
        assert health.status_code == 503 and health.json()["status"] == "degraded"
        assert "deleted" in health.json()["last_write_error"]["message"]
        refusals = {
            "placement": http.post("/v1/select_destinations", json=request(vcpus=1, instance_uuids=["vm-2"])),
            "report": http.post("/v1/resource-stats", json={"name": "h9", "stats": host_stats()}),
            # the same figures again: a report that repeats its node's record, taken to be written later before
            "repeated report": http.post("/v1/resource-stats", json={"name": "h0", "stats": host_stats()}),
            "release": http.delete("/v1/allocations/vm-1"),
            "aggregate": http.put("/v1/aggregates/a1", json={"id": "a1", "name": "a1", "hosts": ["h0"]}),
        }
        for name, answer in refusals.items():
            assert answer.status_code == 503, (name, answer.status_code, answer.text)
            assert answer.headers["content-type"] == "application/problem+json", name
            assert "deleted while the store was open" in answer.json()["detail"], (name, answer.text)
        rp = http.post("/placement/resource_providers", headers=LATEST, json={"name": "r1", "uuid": str(uuid.uuid4())})
        assert rp.status_code == 503 and "deleted" in rp.json()["errors"][0]["detail"], rp.text
        # What the server still holds, it still answers; nothing refused was taken.
        assert http.get("/v1/allocations/vm-1").status_code == 200
        assert http.get("/v1/allocations/vm-2").status_code == 404
        assert http.get("/health").status_code == 503  # and it stays unhealthy
