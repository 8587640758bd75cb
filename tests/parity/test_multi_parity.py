"""Multi-instance parity, proven by Nova's own ``_schedule``: the node each instance of a request lands on.

Nova places a request's instances one by one: it sorts the hosts (a stable sort by weight of the list the
previous instance left, that instance's host first), picks one of the best ``host_subset_size``, consumes it and
sorts again. Equal weights, the rule on a uniform cloud, go the way that list leaves them. Two families:

- ``host_subset_size = 1``: Nova's choice is deterministic; Gantt's nodes must be Nova's, instance by instance,
  or both refuse the request.
- ``host_subset_size`` 2-4: Gantt picks with a seeded RNG; Nova's run replays Gantt's picks (its
  ``random.choice`` takes the node Gantt took when it is among Nova's choices). Per instance the set of nodes
  the instance could land on must be Nova's: for Gantt every index its RNG may draw, tried; for Nova each node
  of its subset, or, when that node's claim fails (Placement's candidates are fetched once per request, so a
  node the earlier instances filled is still weighed and picked), the node its claim loop falls to. And every
  instance must land where Nova puts it when Nova makes Gantt's picks.

``GANTT_MULTI_PARITY_SEEDS`` × ``GANTT_MULTI_PARITY_REQUESTS`` per family (default 20 × 20).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

from tests.parity import multi_cases, reference
from tests.venvs import run_json

SEEDS = int(os.environ.get("GANTT_MULTI_PARITY_SEEDS", "20"))
REQUESTS = int(os.environ.get("GANTT_MULTI_PARITY_REQUESTS", "20"))
DRIVER = Path(__file__).with_name("multi_driver.py")


def _nova(clouds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return run_json(reference.python(), DRIVER, {"clouds": clouds}, timeout=900)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def deterministic() -> dict[str, Any]:
    clouds = [multi_cases.cloud(seed, REQUESTS) for seed in range(SEEDS)]
    ours = [multi_cases.answer(c, case["spec"]) for c in clouds for case in c["requests"]]
    return {"clouds": clouds, "ours": ours, "nova": _nova(clouds)}


@pytest.fixture(scope="module")
def subset() -> dict[str, Any]:
    clouds = [multi_cases.cloud(seed, REQUESTS, subset=True) for seed in range(SEEDS)]
    ours = []
    for c in clouds:
        for k, case in enumerate(c["requests"]):
            rng = random.Random(f"{c['seed']}-{k}")
            script = [rng.randrange(4) for _ in case["spec"]["instance_uuids"]]
            found = multi_cases.answer(c, case["spec"], script)
            found["subsets"] = multi_cases.subsets(c, case["spec"], script)
            case["replay"] = found["chosen"]
            ours.append(found)
    return {"clouds": clouds, "ours": ours, "nova": _nova(clouds)}


def _table(name: str, rows: dict[str, list[int]]) -> None:
    lines = [f"{name:<40}  cases  agreed", *(f"{k:<40}  {v[0]:>5}  {v[1]:>6}" for k, v in sorted(rows.items()))]
    print("\n" + "\n".join(lines))


def test_the_nodes_each_instance_lands_on_are_novas(deterministic: dict[str, Any]) -> None:
    rows = {"multi-create chosen nodes": [0, 0], "multi-create refused by both": [0, 0]}
    wrong = []
    for index, (ours, nova) in enumerate(zip(deterministic["ours"], deterministic["nova"], strict=True)):
        rows["multi-create chosen nodes"][0] += 1
        if ours["chosen"] == nova["chosen"]:
            rows["multi-create chosen nodes"][1] += 1
            if nova["chosen"] is None:
                rows["multi-create refused by both"][1] += 1
        elif len(wrong) < 20:
            wrong.append(f"case {index}: gantt {ours['chosen']} nova {nova['chosen']}")
    rows["multi-create refused by both"][0] = sum(1 for n in deterministic["nova"] if n["chosen"] is None)
    _table("compared (host_subset_size = 1)", rows)
    assert wrong == []


def test_the_cases_have_ties_to_break(deterministic: dict[str, Any]) -> None:
    """The suite must exercise equal weights after consumption: many requests land twice on one node while an
    equal node is free, or alternate between equal nodes."""
    repeats = sum(1 for n in deterministic["nova"] if n["chosen"] and len(set(n["chosen"])) < len(n["chosen"]))
    assert repeats >= len(deterministic["nova"]) // 5, repeats
    assert sum(1 for n in deterministic["nova"] if n["chosen"] is None) >= 1


def test_the_picks_among_the_best_are_novas(subset: dict[str, Any]) -> None:
    rows = {"host_subset_size: picks possible": [0, 0], "host_subset_size: replayed in Nova": [0, 0]}
    wrong = []
    for index, (ours, nova) in enumerate(zip(subset["ours"], subset["nova"], strict=True)):
        placed = len(ours["chosen"] or [])
        rows["host_subset_size: replayed in Nova"][0] += 1
        if ours["chosen"] == nova["chosen"]:
            rows["host_subset_size: replayed in Nova"][1] += 1
        elif len(wrong) < 20:
            wrong.append(f"case {index}: gantt {ours['chosen']} nova {nova['chosen']}")
        for k in range(min(placed, len(nova["subsets"]))):
            rows["host_subset_size: picks possible"][0] += 1
            if ours["subsets"][k] == nova["landings"][k]:
                rows["host_subset_size: picks possible"][1] += 1
            elif len(wrong) < 20:
                wrong.append(f"case {index} instance {k}: gantt could land on {ours['subsets'][k]}, "
                             f"nova {nova['landings'][k]} (its subset {nova['subsets'][k]})")
    _table("compared (host_subset_size 2-4)", rows)
    assert wrong == []
    assert any(len(s) > 1 for ours in subset["ours"] for s in ours["subsets"])


def test_each_instances_alternates_are_novas(deterministic: dict[str, Any]) -> None:
    """Nova's ``_get_alternate_hosts``: after every instance is claimed, the hosts are filtered and weighed once
    more (a request of several instances) and each instance gets the first ``max_attempts - 1`` of them that no
    instance of the request took, an alternate another instance took being replaced by the next one. Gantt's
    core answers the same lists (one cell here; the Nova seam keeps an alternate's cell as Nova does)."""
    rows = {"alternates, one instance": [0, 0], "alternates, several instances": [0, 0]}
    wrong = []
    for index, (ours, nova) in enumerate(zip(deterministic["ours"], deterministic["nova"], strict=True)):
        if nova["chosen"] is None or ours["chosen"] != nova["chosen"]:
            continue  # the chosen nodes are compared above
        row = rows["alternates, one instance" if len(nova["chosen"]) == 1 else "alternates, several instances"]
        row[0] += 1
        if ours["alternates"] == nova["alternates"]:
            row[1] += 1
        elif len(wrong) < 20:
            wrong.append(f"case {index}: gantt {ours['alternates']} nova {nova['alternates']}")
    _table("compared (alternates)", rows)
    assert wrong == []
    several = rows["alternates, several instances"][0]
    assert several >= 20 and any(len(n["chosen"] or ()) > 1 and any(n["alternates"])
                                 for n in deterministic["nova"])
