"""Issue 31 beyond pre-selection, against Nova 34's own code (``presel_driver.py`` in the reference venv):

- the JSON text Nova stores in compute_nodes for ``numa_topology`` and ``pci_stats`` reads as the decoded form;
- ComputeCapabilitiesFilter over every HostState attribute Nova exposes (``caps_cases``);
- image properties Nova's ``ImageMeta.from_dict`` refuses are refused by Gantt at request time, naming the field.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from gantt import Scheduler
from tests.parity import numa_pci_cases, reference
from tests.venvs import run_json

SEEDS = int(os.environ.get("GANTT_PARITY_SEEDS", "20"))
REQUESTS = int(os.environ.get("GANTT_PARITY_REQUESTS", "50"))
DRIVER = Path(__file__).with_name("presel_driver.py")


@pytest.fixture(scope="module")
def stored_hosts() -> list[dict[str, Any]]:
    hosts = [host for seed in range(3) for host in numa_pci_cases.cases(seed, 8, 0)["hosts"]]
    return [{**host, "host": f"s{i}", "node": f"s{i}"} for i, host in enumerate(hosts)]


@pytest.fixture(scope="module")
def nova(stored_hosts: list[dict[str, Any]]) -> dict[str, Any]:
    doc = {"stored": [{"numa_topology": h["stats"].get("numa_topology"), "pci_stats": h["stats"].get("pci_stats")}
                      for h in stored_hosts]}
    return run_json(reference.python(), DRIVER, doc, timeout=900)  # type: ignore[no-any-return]


def test_novas_stored_json_text_reads_as_the_decoded_form(stored_hosts: list[dict[str, Any]],
                                                          nova: dict[str, Any]) -> None:
    """Item 11: compute_nodes.numa_topology and pci_stats are JSON text; a report may carry them as they are."""
    decoded, text = Scheduler(), Scheduler()
    texts = 0
    for host, stored in zip(stored_hosts, nova["stored"], strict=True):
        stats = {k: v for k, v in host["stats"].items() if v is not None}
        decoded.update_resource_stats(host["host"], stats)
        as_text = {**stats, **{k: v for k, v in stored.items() if v is not None}}
        texts += sum(isinstance(as_text.get(k), str) for k in ("numa_topology", "pci_stats"))
        text.update_resource_stats(host["host"], as_text)
    assert texts >= len(stored_hosts)
    for host in stored_hosts:
        key = (host["host"], host["node"])
        a, b = decoded.table.row_of(key), text.table.row_of(key)
        assert a is not None and b is not None
        assert decoded.table.node_numa(a) == text.table.node_numa(b)
        assert sorted(map(repr, decoded.table.node_pci_pools(a))) == sorted(map(repr, text.table.node_pci_pools(b)))
