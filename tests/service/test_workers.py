"""``gantt serve --workers N``: N processes on one store, each with its own replica fed by the change feed."""

from __future__ import annotations

import json
import socket
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from gantt.service.server import ServeOptions, worker_config
from tests.conftest import host_stats
from tests.service.server import ServerProcess


def test_workers_share_one_store(tmp_path: Path) -> None:
    pytest.importorskip("gantt.store.sqlite")
    config = {"filter_scheduler": {"enabled_filters": ["ComputeFilter"]}}
    with ServerProcess(f"sqlite:///{tmp_path}/w.sqlite", config=config, workers=2, workdir=tmp_path) as server:
        pids: set[int] = set()
        deadline = time.monotonic() + 30
        while len(pids) < 2 and time.monotonic() < deadline:
            pids.add(httpx.get(f"{server.url}/health").json()["pid"])  # a new connection each time
        assert len(pids) == 2, "both workers answer"
        with server.client() as client:
            client.update_resource_stats("shared-host", host_stats(vcpus=2))
        streak = 0
        deadline = time.monotonic() + 30
        while streak < 10 and time.monotonic() < deadline:  # new connections land on either worker
            streak = streak + 1 if httpx.get(f"{server.url}/v1/hosts/shared-host").status_code == 200 else 0
        assert streak == 10
        # every worker's replica learnt the host from the store's feed, and claims cannot double-book across them
        placed = 0
        for i in range(6):
            response = httpx.post(f"{server.url}/v1/select_destinations",
                                  json={"flavor": {"vcpus": 1, "memory_mb": 1, "root_gb": 1},
                                        "instance_uuids": [f"vm-{i}"]})
            placed += response.status_code == 200
        assert placed == 2
        assert server.stop() == 0


def test_each_worker_decides_with_its_share_of_the_instances_subset_slot(tmp_path: Path) -> None:
    """Every worker is a replica claiming on its own: alike, they would pick the same hosts at once and lose claims
    to one another. The file's slot is the instance's; each worker takes its share of it."""
    path = tmp_path / "gantt.toml"
    path.write_text("[gantt]\nsubset_slots = 3\nsubset_slot = 2\nseed = 10\n")
    options = ServeOptions(store="etcd://127.0.0.1:2379", host="127.0.0.1", port=0, config_path=str(path),
                           workers=2)
    assert [(c.gantt.subset_slot, c.gantt.subset_slots, c.gantt.seed)
            for c in (worker_config(options, w) for w in range(2))] == [(2, 6, 10), (5, 6, 11)]
    options.workers = 1
    assert (worker_config(options, 0).gantt.subset_slot, worker_config(options, 0).gantt.subset_slots) == (2, 3)


def test_sqlite_workers_keep_the_files_subset_slot(tmp_path: Path) -> None:
    """On one SQLite file the workers' claims check room through one writer, not node revisions: they lose nothing
    to one another, and a split slot would take the block pick from every decision at large tables."""
    path = tmp_path / "gantt.toml"
    path.write_text("[gantt]\nsubset_slots = 3\nsubset_slot = 2\nseed = 10\n")
    options = ServeOptions(store=f"sqlite:///{tmp_path / 'g.sqlite'}", host="127.0.0.1", port=0,
                           config_path=str(path), workers=2)
    assert [(c.gantt.subset_slot, c.gantt.subset_slots, c.gantt.seed)
            for c in (worker_config(options, w) for w in range(2))] == [(2, 3, 10), (2, 3, 10)]


def _get(sock: socket.socket, path: str) -> tuple[dict[str, Any], bool]:
    """One GET on a keep-alive connection: the JSON answer, and whether the server ends the connection after it."""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: gantt\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection before answering"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    headers = dict(line.split(b":", 1) for line in head.split(b"\r\n")[1:])
    headers = {k.strip().lower(): v.strip().lower() for k, v in headers.items()}
    length = int(headers[b"content-length"])
    while len(body) < length:
        body += sock.recv(65536)
    return json.loads(body), headers.get(b"connection") == b"close"


def test_keep_alive_connections_spread_evenly_over_the_workers(tmp_path: Path) -> None:
    """Connections opened at once pile onto whichever worker accepts first (one shared listening socket, as here
    through ServerProcess's --fd): the workers move the excess with "Connection: close" until the split is even,
    and then stop moving them."""
    with ServerProcess(f"sqlite:///{tmp_path}/w.sqlite", workers=2, workdir=tmp_path) as server:
        pids: set[int] = set()
        deadline = time.monotonic() + 30
        while len(pids) < 2 and time.monotonic() < deadline:
            pids.add(httpx.get(f"{server.url}/health").json()["pid"])
        assert len(pids) == 2, "both workers serve"
        address = ("127.0.0.1", server.port)
        conns = [socket.create_connection(address, timeout=10) for _ in range(16)]
        reconnects = 0
        try:
            for _ in range(12):
                for i in range(len(conns)):
                    _, closing = _get(conns[i], "/health")
                    if closing:
                        reconnects += 1
                        conns[i].close()
                        conns[i] = socket.create_connection(address, timeout=10)
            # where each connection is now (a reconnected one answers its first request where it landed)
            where = [_get(conn, "/health") for conn in conns]
        finally:
            for conn in conns:
                conn.close()
        split = sorted(Counter(answer["pid"] for answer, _ in where).values())
        assert len(split) == 2 and split[1] - split[0] <= 1, (split, reconnects)
        assert not any(closing for _, closing in where), "an even split moves no more connections"
        # No endless ping-pong. A reconnection lands on whichever worker calls accept first, which on a loaded
        # machine (the suite's other tests) may be the same crowded one several times in a row: seen once at 53
        # reconnections for 16 connections with the load average at 7.
        assert reconnects < 6 * len(conns), reconnects
        assert server.stop() == 0
