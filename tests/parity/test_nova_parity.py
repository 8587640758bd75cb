"""Nova parity, proven by Nova's own code: every filter and weigher Gantt registers, on generated clouds.

Gantt and Nova 34 (its HostState, filter classes and HostWeightHandler, in a separate virtualenv) answer the
same generated requests; per filter the passing nodes, per weigher (and for all weighers summed) the weight of
every candidate must agree. ``scripts/parity`` runs this module alone and prints the agreement table.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.parity import cases, reference
from tests.venvs import run_json

SEEDS = int(os.environ.get("GANTT_PARITY_SEEDS", "20"))
REQUESTS = int(os.environ.get("GANTT_PARITY_REQUESTS", "50"))
DRIVER = Path(__file__).with_name("nova_driver.py")


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def _same_weights(ours: dict[str, Any], nova: dict[str, Any]) -> bool:
    if "error" in ours or "error" in nova:
        return ours == nova
    return set(ours) == set(nova) and all(_close(ours[n], float(nova[n])) for n in ours)


@pytest.fixture(scope="module")
def outcome() -> dict[str, Any]:
    filters, weighers = cases.registered()
    compared = [f for f in filters if f not in cases.NO_NOVA_REFERENCE]
    clouds = [cases.cloud(seed, REQUESTS) for seed in range(SEEDS)]
    ours = [answer for c in clouds for answer in cases.gantt_answers(c, compared, weighers)]
    nova = run_json(reference.python(), DRIVER, {"clouds": clouds}, timeout=900)
    return {"filters": filters, "weighers": weighers, "compared": compared, "ours": ours, "nova": nova,
            "clouds": clouds}


def test_every_registered_filter_and_weigher_is_compared_or_listed(outcome: dict[str, Any]) -> None:
    nova_filters = set(outcome["nova"]["filters"])
    assert set(outcome["compared"]) <= nova_filters, "a compared filter is not in Nova 34"
    assert set(outcome["weighers"]) <= set(outcome["nova"]["weighers"])
    # What has no Nova 34 counterpart must really have none (else it belongs in the comparison).
    assert not (cases.NO_NOVA_REFERENCE & nova_filters)


def test_gantt_agrees_with_nova(outcome: dict[str, Any]) -> None:
    table: dict[str, list[int]] = {}
    disagreements: list[str] = []
    specs = [(c, case["spec"]) for c in outcome["clouds"] for case in c["requests"]]
    for index, (ours, nova) in enumerate(zip(outcome["ours"], outcome["nova"]["results"], strict=True)):
        cloud, spec = specs[index]
        for name, nodes in ours["filters"].items():
            row = table.setdefault(f"filter {name}", [0, 0, 0])
            row[0] += 1
            if nodes == nova["filters"][name]:
                row[1] += 1
            elif cases.documented_difference(cloud, spec, name, nodes, nova["filters"][name]):
                row[2] += 1
            elif len(disagreements) < 20:
                disagreements.append(f"case {index} {name}: gantt {nodes} nova {nova['filters'][name]}")
        for name, weights in ours["weights"].items():
            row = table.setdefault(f"weigher {name}", [0, 0, 0])
            row[0] += 1
            if _same_weights(weights, nova["weights"][name]):
                row[1] += 1
            elif len(disagreements) < 20:
                disagreements.append(f"case {index} {name}: gantt {weights} nova {nova['weights'][name]}")
    width = max(len(k) for k in table)
    lines = [f"{'compared':<{width}}  cases  agreed  documented difference",
             *(f"{k:<{width}}  {v[0]:>5}  {v[1]:>6}  {v[2]:>21}" for k, v in sorted(table.items()))]
    lines.append(f"no Nova 34 counterpart: {', '.join(sorted(cases.NO_NOVA_REFERENCE))}")
    print("\n" + "\n".join(lines))
    Path(os.environ.get("GANTT_PARITY_TABLE", "/dev/null")).write_text("\n".join(lines) + "\n")
    assert disagreements == []


def test_the_pci_cases_decide_both_ways(outcome: dict[str, Any]) -> None:
    """The PCI cases must put Nova's pool rules to work: many requests that some nodes pass and others fail."""
    specs = [(c, case["spec"]) for c in outcome["clouds"] for case in c["requests"]]
    split = sum(1 for (cloud, spec), ours in zip(specs, outcome["ours"], strict=True)
                if "pci_passthrough:alias" in spec["flavor"]["extra_specs"]
                and 0 < len(ours["filters"]["PciPassthroughFilter"]) < len(cloud["hosts"]))
    assert split >= len(specs) // 5, split


def test_the_port_pci_cases_decide_both_ways(outcome: dict[str, Any]) -> None:
    """SR-IOV ports' PCI requests (RequestSpec.pci_requests, matched by physical network and tags rather than by
    vendor and product) must be put to work as well: requests that some nodes pass and others fail."""
    specs = [(c, case["spec"]) for c in outcome["clouds"] for case in c["requests"]]
    ported = [(cloud, ours) for (cloud, spec), ours in zip(specs, outcome["ours"], strict=True)
              if spec.get("pci_requests")]
    split = sum(1 for cloud, ours in ported if 0 < len(ours["filters"]["PciPassthroughFilter"]) < len(cloud["hosts"]))
    # (most pools carry no remote_managed tag, which a port's spec names: fewer split than the aliases' cases)
    assert len(ported) >= len(specs) // 4 and split >= len(ported) // 10, (len(ported), split)
