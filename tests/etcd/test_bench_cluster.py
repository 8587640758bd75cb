"""bench/cluster.py on the module's cluster, small: one instance of two workers places without double-booking, its
callers split between them, and ``--profile`` names where its threads spent their CPU (issue 35: the next lever
visible without an ad-hoc build)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.etcd.cluster import LocalCluster

pytestmark = pytest.mark.etcd

ROOT = Path(__file__).resolve().parents[2]


def test_one_instance_of_two_workers_profiled(healthy: LocalCluster) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "cluster.py"), "--etcd", healthy.url(""),
                           "--instances", "1", "--workers", "2", "--threads", "4", "--hosts", "300",
                           "--free-hosts", "20", "--duration", "2", "--profile", "--json"],
                          capture_output=True, text=True, timeout=280, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    [run] = json.loads(done.stdout)["runs"]
    assert run["placements"] > 0 and run["workers_per_instance"] == 2
    # the instance's 4 callers split between its 2 workers, as a served instance's connections are
    assert run["threads_per_instance"] == 4 and run["threads_per_process"] == [2, 2]
    assert run["overcommit"] == 0 and run["acknowledged_missing"] == 0
    # where the claims' commits waited: every txn sent was a call to etcd, every claim answered woke its caller
    timing = run["group_timing_ms"]
    assert timing["call"] > 0 and timing["wake"] > 0 and timing["linger"] >= 0, timing
    profile = run["profile"]
    assert {"all", "client", "gantt-etcd-commit"} <= set(profile)
    functions = {kind: [e["function"] for e in profile[kind]["total"]] for kind in profile}
    # the clients decide (the engine) and the committer plans and sends the shared txns (the etcd store)
    assert any("(engine.py)" in f for f in functions["client"]), functions["client"]
    assert any(f.startswith("commit_group (etcd_group.py)") for f in functions["gantt-etcd-commit"]), functions
    assert profile["client"]["seconds"] > 0


def test_the_http_benchmark_serves_one_instance_on_etcd(healthy: LocalCluster) -> None:
    """bench/http_api.py --etcd: one instance as ``gantt serve --store etcd://…`` runs it, HTTP included, places
    without double-booking on the cluster and counts the members' CPU per placement beside the server's."""
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "http_api.py"), "--etcd", healthy.url(""),
                           "--hosts", "300", "--duration", "2", "--single-reports", "200", "--placements", "300",
                           "--warmup", "30", "--workers", "1", "--concurrency", "8", "--json"],
                          capture_output=True, text=True, timeout=280, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["store"].startswith("etcd")
    [run] = summary["per_run"]
    assert run["placements"]["placed"] > 0
    assert run["audit"]["overcommitted"] == 0 and run["audit"]["acknowledged_missing"] == 0
    assert run["audit"]["allocations"] > 0  # audited on the cluster, where the placements went
    assert run["cpu_ms_per_placement"]["server"] > 0
