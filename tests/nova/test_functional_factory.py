"""The Gantt server factory ``python -m gantt.nova.functional`` gives each of Nova's tests (forkserver.py): every
server is a real ``gantt serve`` with its own store, serving the Placement face over loopback HTTP; a stopped one is
gone, and closing the factory leaves no server behind."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import httpx

from gantt.nova.functional.forkserver import Factory

LATEST = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_each_server_is_a_placement_face_of_its_own(tmp_path: Path) -> None:
    config = tmp_path / "gantt.toml"
    config.write_text("[gantt]\nseed = 7\n")
    factory = Factory(tmp_path)
    pids = []
    try:
        first = factory.serve("memory://", config, tmp_path / "first.log")
        second = factory.serve(f"sqlite:///{tmp_path}/second.sqlite", config, tmp_path / "second.log")
        pids = [first[0], second[0]]
        rp = str(uuid.uuid4())
        with httpx.Client(base_url=f"http://127.0.0.1:{first[1]}/placement", headers=LATEST, timeout=30) as one:
            assert one.post("/resource_providers", json={"uuid": rp, "name": "cn1"}).status_code == 200
            assert [p["uuid"] for p in one.get("/resource_providers").json()["resource_providers"]] == [rp]
        with httpx.Client(base_url=f"http://127.0.0.1:{second[1]}/placement", headers=LATEST, timeout=30) as two:
            assert two.get("/resource_providers").json()["resource_providers"] == []
        factory.stop(first[0])
        assert not _alive(first[0])
        try:
            httpx.get(f"http://127.0.0.1:{first[1]}/health", timeout=5)
            raise AssertionError("a stopped server still answers")
        except httpx.TransportError:
            pass
    finally:
        factory.close()
    assert not any(_alive(pid) for pid in pids)
