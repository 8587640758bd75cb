"""Issue 33 item 4, as deployed: `gantt serve` is Nova's Placement endpoint on a SQLite file, Gantt's nova-scheduler
managers decide and claim on the same file, nova-compute's report client registers the nodes
(tests/nova/one_claim_driver.py, in Nova's venv). The decision and the instance's Placement allocations are one
record and one commit; two managers racing for the last slots never double-book; a node is one record whatever
its names (several nodes per compute service, an FQDN node name, registered before or after its cell row)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.nova.venv import python_or_skip
from tests.service.server import ServerProcess
from tests.venvs import run_json

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
TOKEN = "nova-service-token"


def test_one_claim_through_gantt_serve_as_placement(tmp_path: Path) -> None:
    python = python_or_skip()
    store = f"sqlite:///{tmp_path}/gantt.sqlite"
    work = tmp_path / "nova"
    work.mkdir()
    with ServerProcess(store, config={"gantt": {"seed": 7}}, token=TOKEN, workdir=tmp_path) as serve:
        done = run_json(python, HERE / "one_claim_driver.py",
                        {"src": str(SRC), "tmp": str(work), "transport_url": "fake:/",
                         "placement_url": serve.url + "/placement", "token": TOKEN, "store": store}, timeout=600)
    assert done["nova_calls"] == {}  # Nova's filters, weighers and allocation candidates never ran
    got: dict[str, Any] = done["result"]
    assert "error" not in got, got["error"]
    nodes = got["nodes"]
    by_uuid = {u: name.split("/") for name, u in nodes.items()}

    # one record per node, as Placement names it (the node) and as the cells name it (host, node)
    assert got["providers"] == sorted([u, name.split("/")[1]] for name, u in nodes.items())
    assert got["records"] == [sorted(by_uuid.values())] * 2

    # the trait only Placement knows found its node; Placement shows exactly the booking, from one commit
    [[gold]] = got["gold"]["selections"]
    assert (gold["host"], gold["nodename"]) == ("c1", "c1-n2") and gold["uuid"] == nodes["c1/c1-n2"]
    booked = gold["allocation_request"]["allocations"]
    shown = got["gold_placement"]
    assert {rp: a["resources"] for rp, a in shown["allocations"].items()} == {
        rp: a["resources"] for rp, a in booked.items()} == {nodes["c1/c1-n2"]: {
            "VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10}}
    assert shown["project_id"] == "p" and shown["user_id"] == "u"
    assert shown["consumer_generation"] == 1  # where Placement's PUT leaves a new consumer: Nova's next write names 1
    assert len(got["gold_commits"]) == 1 and got["gold_changes"] == ["allocation"]

    # six boots at once through two managers, two slots: two placed on distinct nodes, four refused
    race = got["race"]
    placed = race["placed"]
    assert len(placed) == 2 and len(race["refused"]) == 4
    assert all("NoValidHost" in e["classes"] for e in race["refused"])
    assert {s["uuid"] for s in placed.values()} == {nodes["c1/c1-n1"], nodes["c2/c2.example.org"]}
    for instance, selection in placed.items():
        assert list(got["race_placement"][instance]) == [selection["uuid"]]
    for usage in got["usages_after_race"].values():
        assert usage["VCPU"] == 2  # every node full, none beyond

    # the last slot, freed through Placement: one of the two racing managers gets it, on that node
    last = got["last_slot"]
    assert len(last["placed"]) == 1 and len(last["refused"]) == 1
    [(instance, selection)] = last["placed"].items()
    assert selection["uuid"] == got["freed_node"]
    assert list(got["last_placement"][instance]) == [got["freed_node"]]
    assert all(usage["VCPU"] == 2 for usage in got["usages_at_end"].values())
    # the Placement-only root (no compute node) was never chosen, though it had room for every boot
    assert not any(got["orphan_usages"].values())
