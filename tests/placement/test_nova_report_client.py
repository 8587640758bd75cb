"""Nova 34's own report client (``nova.scheduler.client.report.SchedulerReportClient``) against a real ``gantt
serve`` on SQLite and against Placement 16.0.0 itself: the same sequence a compute host and a scheduler run
(tests/placement/nova_report_driver.py, in Nova's reference venv) must see the same answers from both.

Gantt runs as deployed behind Nova: with a token of its own (Nova's ``[placement]`` credentials carry it), which is
the service's credential. Placement runs with noauth2 and the roles keystone would give Nova's service user.
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.parity.reference import python as nova_python
from tests.placement.conftest import CONFIG
from tests.placement.real_placement import RealPlacement
from tests.service.server import ServerProcess

DRIVER = Path(__file__).with_name("nova_report_driver.py")
TOKEN = "nova-service-token"


def drive(url: str, token: str) -> list[dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(nova_python()), "-W", "ignore", str(DRIVER), url, token], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"the driver failed against {url}:\n{done.stderr[-4000:]}"
    steps: list[dict[str, Any]] = json.loads(done.stdout)
    return [normalized(step) for step in steps]


def normalized(step: dict[str, Any]) -> dict[str, Any]:
    """A candidate's mappings and a summary's traits are lists in no promised order (Placement's follow its SQL
    and its sets)."""
    value = step.get("value")
    if step["step"] == "get_allocation_candidates" and value:
        for request in value["allocation_requests"]:
            request["mappings"] = {group: sorted(rps) for group, rps in request.get("mappings", {}).items()}
        for summary in value["provider_summaries"].values():
            summary["traits"] = sorted(summary.get("traits", []))
    return step


def on_gantt(workdir: Path) -> list[dict[str, Any]]:
    with ServerProcess(f"sqlite:///{workdir}/gantt.sqlite", config=CONFIG, token=TOKEN, workdir=workdir) as gantt:
        return drive(gantt.url + "/placement", TOKEN)


def on_placement() -> list[dict[str, Any]]:
    with RealPlacement() as placement:
        return drive(placement.url, "nova")


def test_nova_report_client_sees_gantt_as_it_sees_placement(tmp_path: Path) -> None:
    nova_python()  # built once, before two threads would both wait for it
    with ThreadPoolExecutor(2) as pool:  # the two runs are independent: side by side, the test takes one's time
        gantt_run, placement_run = pool.submit(on_gantt, tmp_path), pool.submit(on_placement)
        ours, theirs = gantt_run.result(), placement_run.result()
    assert [s["step"] for s in ours] == [s["step"] for s in theirs]
    for mine, reference in zip(ours, theirs, strict=True):
        assert mine == reference, f"step {reference['step']!r}:\n gantt:     {mine}\n placement: {reference}"
    # the sequence did what it says, so that agreeing is not agreeing on nothing
    seen = {s["step"]: s.get("value", s.get("raised")) for s in theirs}
    assert len(seen["get_allocation_candidates"]["allocation_requests"]) == 2
    assert seen["claim_resources"] is True and seen["put_allocations too big"] is False
    assert seen["put_allocations stale consumer generation"] == "AllocationUpdateFailed"
    assert seen["drop an inventory in use"] == "InventoryInUse"
    numa0 = "00000000-0000-0000-0000-0000000000a0"
    assert seen["migration after reshape"]["allocations"][numa0]["resources"] == {"MEMORY_MB": 1024}
    assert seen["usages after deletes"] == {}
