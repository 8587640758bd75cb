"""NUMATopologyFilter parity with Nova 34, proven by Nova's own code (issue 14).

Generated NUMA hosts and requests (``numa_cases``) go to Gantt and to Nova's ``NUMATopologyFilter.host_passes``
(with the guest topology from Nova's ``numa_get_constraints``, as Nova's API derives it): per request, the same
nodes must pass, or both must refuse the request. Nova's own stored form of each host's topology must read as
the plain form does. Some hosts' cells declare the networks their NICs serve and some requests carry their
networks (NUMA affinity of networks): the same nodes must pass with them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gantt.compute.numa import HostNUMA
from gantt.model import HostStats, decode
from tests.parity import numa_cases, reference
from tests.venvs import run_json

SEEDS = int(os.environ.get("GANTT_NUMA_PARITY_SEEDS", "3"))
REQUESTS = int(os.environ.get("GANTT_NUMA_PARITY_REQUESTS", "150"))
HOSTS = 12
DRIVER = Path(__file__).with_name("nova_driver.py")


@pytest.fixture(scope="module")
def outcome() -> dict[str, Any]:
    docs = [numa_cases.cases(seed, HOSTS, REQUESTS) for seed in range(SEEDS)]
    ours = [numa_cases.gantt_answers(doc) for doc in docs]
    return {"docs": docs, "ours": ours, "nova": run_json(reference.python(), DRIVER, {"numa": docs}, timeout=600)}


def test_gantt_agrees_with_nova_on_numa(outcome: dict[str, Any]) -> None:
    disagreements: list[str] = []
    kinds = {"refused": 0, "none pass": 0, "some pass": 0, "all pass": 0}
    for doc, ours, nova in zip(outcome["docs"], outcome["ours"], outcome["nova"], strict=True):
        for i, (mine, theirs) in enumerate(zip(ours, nova["results"], strict=True)):
            if isinstance(mine, dict) and isinstance(theirs, dict):
                kinds["refused"] += 1
                continue
            if mine != theirs and len(disagreements) < 10:
                disagreements.append(f"{json.dumps(doc['requests'][i]['flavor'])} "
                                     f"{doc['requests'][i]['image']['properties']}: gantt {mine} nova {theirs}")
            if isinstance(mine, list):
                kinds["none pass" if not mine else "all pass" if len(mine) == HOSTS else "some pass"] += 1
    assert disagreements == []
    # The cases must exercise the decision, not only the refusals or the trivial answers.
    total = SEEDS * REQUESTS
    assert kinds["some pass"] > total // 4 and kinds["none pass"] > total // 20 and kinds["refused"] > total // 10, \
        kinds


def test_network_affinity_decides_some_requests(outcome: dict[str, Any]) -> None:
    """The cases with network metadata must exercise it: for some, the nodes that pass differ from those that
    would pass without it (so the agreement above covers Nova's network check, not only the cells' fit)."""
    decided = with_networks = 0
    for doc, ours in zip(outcome["docs"], outcome["ours"], strict=True):
        plain = {**doc, "requests": [{k: v for k, v in r.items() if k != "network_metadata"}
                                     for r in doc["requests"]]}
        for spec, mine, without in zip(doc["requests"], ours, numa_cases.gantt_answers(plain), strict=True):
            if "network_metadata" in spec and isinstance(mine, list):
                with_networks += 1
                decided += mine != without
    assert decided > with_networks // 10, (decided, with_networks)


def test_novas_stored_topology_reads_as_the_plain_one(outcome: dict[str, Any]) -> None:
    for doc, nova in zip(outcome["docs"], outcome["nova"], strict=True):
        for host, stored in zip(doc["hosts"], nova["stored"], strict=True):
            plain = host["stats"]["numa_topology"]
            if plain is None:
                assert stored is None
                continue
            # Nova stores sets as lists in its own order: compared as the cells a fit reads.
            from_nova = HostNUMA.of(decode({"numa_topology": stored}, HostStats).numa_topology)
            assert from_nova == HostNUMA.of(decode({"numa_topology": plain}, HostStats).numa_topology)
