"""A claim confirmed by Nova's instance info (gantt.nova.confirm), end to end: Gantt's manager served by Nova's
service framework, asked and told by Nova's own SchedulerAPI, on real Nova databases whose compute node row is
updated as nova-compute's resource tracker does (tests/nova/confirm_driver.py). Two pinned guests in a row on a
node with room for both: the second fits once ``update_instance_info`` lists the first (it counted twice before,
refused: the row's pins and the claim's); a claim the row does not show yet keeps counting whatever else moved the
row or what the periodic sync lists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.nova.venv import python_or_skip
from tests.venvs import run_json

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
NAME = "confirm_by_instance_info"


def _placed(answer: dict[str, Any]) -> str:
    assert "selections" in answer, answer
    host: str = answer["selections"][0][0]["host"]
    return host


def _refused(answer: dict[str, Any]) -> None:
    assert "error" in answer and "NoValidHost" in answer["error"]["classes"], answer


def test_the_second_pinned_guest_fits_once_instance_info_lists_the_first(tmp_path: Path) -> None:
    python = python_or_skip()
    work = tmp_path / "nova"
    work.mkdir()
    out = run_json(python, HERE / "confirm_driver.py",
                   {"src": str(SRC), "tmp": str(work), "transport_url": "fake:/", "scenarios": [NAME]}, timeout=600)
    assert out["nova_calls"] == {}  # every decision Gantt's
    result = out["scenarios"][NAME]
    assert "error" not in result, result.get("error")
    assert _placed(result["a"]) == "n1"
    # the row shows a, the periodic sync lists it: a still counts on top (safe), no room for b
    _refused(result["b_before"])
    assert result["a_confirmed_before"] is False
    # update_instance_info lists a: the row, read since, counts it; b fits beside it, on the CPUs left
    assert _placed(result["b"]) == "n1"
    assert result["a_confirmed"] is True
    assert result["disjoint"] is True
    # b not applied yet: a row moved for another reason, the sync's list, a cast about a: b counts, node full
    assert result["b_confirmed_early"] is False
    _refused(result["c_while_b_unshown"])
    # b applied and listed: counted once, by the row, which is full
    assert result["b_confirmed"] is True
    _refused(result["c_after"])
