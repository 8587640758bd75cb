"""bench/nova_rpc.py at a tiny size: Nova's own nova-scheduler (HostManager, filters, weighers, a real Placement)
and ``gantt nova-scheduler``, asked through Nova's ``SchedulerAPI`` over a RabbitMQ the bench starts and stops on
loopback, in Nova's venv. Behaviour, not timing: the report's shape, and that both schedulers put every instance of
the sequence on the same hosts, the ones the fixture's rule names (most free memory first, disabled services left
out, a host's own claims counted before the next request)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.nova import rabbit
from tests.nova.venv import python_or_skip

BENCH = Path(__file__).resolve().parents[2] / "bench" / "nova_rpc.py"
NODES, REQUESTS, DISABLED_EVERY = 20, 4, 7


def test_nova_and_gantt_choose_the_same_hosts(tmp_path: Path) -> None:
    rabbit.require()
    python = python_or_skip()
    # the bench puts the checkout's src first itself; Gantt's own PYTHON* settings stay out of Nova's venv
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run([str(python), str(BENCH), "--nodes", str(NODES), "--requests", str(REQUESTS),
                           "--workdir", str(tmp_path)], capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout)
    assert {"cpu", "cores", "load", "load_after", "date"} <= set(report["machine"])
    [size] = report["sizes"]
    assert size["nodes"] == NODES and size["max_placement_results"] == NODES
    assert size["requests"] == REQUESTS
    for kind in ("nova", "gantt"):
        stats = size[kind]
        assert stats["n"] == REQUESTS
        assert 0 < stats["p50_ms"] <= stats["p99_ms"] <= stats["max_ms"]
        assert stats["first_ms"] > 0 and stats["mean_ms"] > 0
        assert size["ready_s"][kind] >= 0
    assert set(size["speedup"]) == {"p50", "p99", "mean"}
    assert size["speedup"]["p50"] == round(size["nova"]["p50_ms"] / size["gantt"]["p50_ms"], 1)
    agreement = size["agreement"]
    # the first (unmeasured) request is compared too
    assert agreement["requests"] == REQUESTS + 1
    assert agreement["nova_refused"] == agreement["gantt_refused"] == 0, agreement
    assert agreement["same_host"] == agreement["same_host_and_alternates"] == REQUESTS + 1, agreement
    assert agreement["differences"] == []
    # memory grows with the node's index and one node in 7 is disabled: the largest enabled nodes, one each (a
    # node's first instance makes it weigh less than the next one), whichever scheduler decided
    enabled = [f"cmp{i:05d}" for i in reversed(range(NODES)) if i % DISABLED_EVERY != 3]
    expected = [f"{host}/{host}" for host in enabled[:REQUESTS + 1]]
    assert size["chosen"] == {"nova": expected, "gantt": expected}
    # the bench leaves nothing behind: its work directory is removed with the broker's files
    assert list(tmp_path.iterdir()) == []
