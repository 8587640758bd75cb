"""Pre-selection parity with Nova 34, proven by Nova's own ``HostManager.get_filtered_hosts`` (issue 31).

Generated clouds and requests (``presel_cases``): ignore_hosts, force_hosts, force_nodes and the requested
destination in any letter case, ``_nova_check_type`` (a rebuild, or another check), with Nova's filter classes
behind them. Per request the nodes Gantt keeps must be the nodes Nova keeps; a rebuild must answer the node Nova
would check (or NoValidHost when Nova has none) and claim nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.parity import presel_cases, reference
from tests.venvs import run_json

SEEDS = int(os.environ.get("GANTT_PARITY_SEEDS", "20"))
REQUESTS = int(os.environ.get("GANTT_PARITY_REQUESTS", "50"))
DRIVER = Path(__file__).with_name("presel_driver.py")


@pytest.fixture(scope="module")
def outcome() -> dict[str, Any]:
    clouds = [presel_cases.cloud(seed, REQUESTS) for seed in range(SEEDS)]
    ours = [presel_cases.gantt_answers(c) for c in clouds]
    nova = run_json(reference.python(), DRIVER, {"presel": clouds}, timeout=900)["presel"]
    return {"clouds": clouds, "ours": ours, "nova": nova}


def test_preselection_agrees_with_novas_host_manager(outcome: dict[str, Any]) -> None:
    disagreements: list[str] = []
    kinds = {"rebuild": 0, "rebuild refused": 0, "forced": 0, "ignored": 0, "destination": 0, "none kept": 0}
    total = 0
    for c, ours, nova in zip(outcome["clouds"], outcome["ours"], outcome["nova"], strict=True):
        for spec, mine, theirs in zip(c["requests"], ours, nova, strict=True):
            total += 1
            rebuild = spec["scheduler_hints"].get("_nova_check_type") == ["rebuild"]
            kinds["rebuild"] += rebuild
            kinds["forced"] += bool(spec.get("force_hosts") or spec.get("force_nodes"))
            kinds["ignored"] += bool(spec.get("ignore_hosts"))
            kinds["destination"] += "requested_destination" in spec
            kinds["none kept"] += not theirs
            wrong = mine["nodes"] != theirs
            if rebuild:
                # Nova's legacy path (no Placement, no claim) picks among what get_filtered_hosts kept.
                kinds["rebuild refused"] += not theirs
                wrong = wrong or mine["booked"] or (mine["chosen"] is None) != (not theirs) or \
                    (mine["chosen"] is not None and mine["chosen"] not in theirs)
            if wrong and len(disagreements) < 15:
                shown = {k: spec.get(k) for k in ("ignore_hosts", "force_hosts", "force_nodes",
                                                  "requested_destination", "scheduler_hints")}
                disagreements.append(f"seed {c['seed']} {shown}: gantt {mine} nova {theirs}")
    print(f"\npre-selection: {total} requests, {kinds}")
    assert disagreements == []
    # The cases must put every part to work.
    assert kinds["rebuild"] > total // 5 and kinds["rebuild refused"] > total // 50, kinds
    assert min(kinds["forced"], kinds["ignored"], kinds["destination"]) > total // 10, kinds
