"""Cinder parity, proven by Cinder's own code: every volume filter and weigher, on generated clouds.

Gantt's volume domain and Cinder 29 (its BackendState/PoolState, filter classes and OrderedHostWeightHandler, in
a separate virtualenv: tests/parity/cinder_reference.py) judge the same generated backends and requests; per
filter the verdict on every pool, per weigher (and for all of them together) the weight of every candidate must
agree. Where Cinder raises (its whole request fails), Gantt answers on its own terms, and the test asserts which:

- a filter that raises on a pool (``<in>`` on a number, a JSON query comparing a string with a number, a zero
  total available capacity): Gantt fails that pool;
- a filter that raises on a malformed request (InstanceLocalityFilter's non-UUID instance): Gantt refuses the
  request (``invalid``);
- CapacityWeigher when every candidate's capacity is 'infinite'/'unknown' under a multiplier <= 0 (Cinder 29
  takes max() of nothing): Gantt weighs them all 0;
- GoodnessWeigher when a goodness function yields something other than a number or a boolean (Cinder compares
  it with 0 and raises): Gantt rates it 0.

GANTT_CINDER_SEEDS x GANTT_CINDER_REQUESTS cases (CI keeps them small; 20 x 50 agree as well).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest

from gantt.config.volume import FILTER_NAMES, WEIGHER_NAMES
from gantt.volume.filters import Request, function_results
from gantt.volume.model import VolumeRequest
from gantt.volume.table import NUMBER
from tests.parity import cinder_cases, cinder_reference
from tests.venvs import run_json

SEEDS = int(os.environ.get("GANTT_CINDER_SEEDS", "4"))
REQUESTS = int(os.environ.get("GANTT_CINDER_REQUESTS", "25"))
DRIVER = Path(__file__).with_name("cinder_driver.py")


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


@pytest.fixture(scope="module")
def outcome() -> dict[str, Any]:
    clouds = [cinder_cases.cloud(seed, REQUESTS) for seed in range(SEEDS)]
    ours = [answer for c in clouds for answer in cinder_cases.gantt_answers(c)]
    cinder = run_json(cinder_reference.python(), DRIVER, {"clouds": clouds}, timeout=900)
    cases = [(c, spec) for c in clouds for spec in c["requests"]]
    return {"ours": ours, "cinder": cinder["results"], "cases": cases}


def _filter_agrees(name: str, ours: Any, cinder: dict[str, Any]) -> str:
    """'agreed', 'documented' or 'differs'."""
    if ours == cinder:
        return "agreed"
    if ours == "invalid":
        return "documented" if name == "InstanceLocalityFilter" and all(v == "error" for v in cinder.values()) \
            else "differs"
    if set(ours) == set(cinder) and all(ours[p] == cinder[p] or (cinder[p] == "error" and ours[p] is False)
                                        for p in ours):
        return "documented"
    return "differs"


def _documented_weights(name: str, cloud: dict[str, Any], spec: dict[str, Any],
                        ours: dict[str, dict[str, float]], cinder: dict[str, Any]) -> bool:
    """Cinder raised while weighing: is it for a reason the module's docstring lists, handled as it says?"""
    if cinder.get("error") == "filter":
        return True  # a default filter raised: Cinder's request fails before weighing
    table, _scheduler = cinder_cases.build(cloud["options"], cloud["backends"], cloud["volumes"])
    rows = [r for r in range(table.n) if table.report(r).pool_host in ours[name]]
    req = Request(VolumeRequest(**cinder_cases._decode(spec)))
    unbounded = all(table.total_kind[r] != NUMBER or table.free_kind[r] != NUMBER for r in rows)
    capacity_case = unbounded and cloud["options"]["capacity_weight_multiplier"] <= 0 and \
        all(v == 0 for v in ours["CapacityWeigher"].values())
    odd_goodness = any(not isinstance(x, int | float | Exception | type(None))
                       for r in rows for x in function_results(table, r, req, "goodness_function"))
    if name == "CapacityWeigher":
        return capacity_case and cinder.get("error") == "ValueError"
    if name == "GoodnessWeigher":
        return odd_goodness and cinder.get("error") == "TypeError"
    return name == "all" and (capacity_case or odd_goodness)


def test_gantt_agrees_with_cinder(outcome: dict[str, Any]) -> None:
    table: dict[str, list[int]] = {}
    disagreements: list[str] = []
    for index, (ours, cinder) in enumerate(zip(outcome["ours"], outcome["cinder"], strict=True)):
        cloud, spec = outcome["cases"][index]
        for name in FILTER_NAMES:
            row = table.setdefault(f"filter {name}", [0, 0, 0])
            verdict = _filter_agrees(name, ours["filters"][name], cinder["filters"][name])
            row[0] += 1
            row[1] += verdict == "agreed"
            row[2] += verdict == "documented"
            if verdict == "differs" and len(disagreements) < 20:
                disagreements.append(f"case {index} {name}: gantt {ours['filters'][name]} "
                                     f"cinder {cinder['filters'][name]}")
        for name in [*WEIGHER_NAMES, "all"]:
            row = table.setdefault(f"weigher {name}", [0, 0, 0])
            row[0] += 1
            mine, theirs = ours["weights"][name], cinder["weights"][name]
            if "error" not in theirs and set(mine) == set(theirs) and all(_close(mine[p], theirs[p]) for p in mine):
                row[1] += 1
            elif "error" in theirs and _documented_weights(name, cloud, spec, ours["weights"], theirs):
                row[2] += 1
            elif len(disagreements) < 20:
                disagreements.append(f"case {index} {name}: gantt {mine} cinder {theirs}")
    width = max(len(k) for k in table)
    lines = [f"{'compared':<{width}}  cases  agreed  documented difference",
             *(f"{k:<{width}}  {v[0]:>5}  {v[1]:>6}  {v[2]:>21}" for k, v in sorted(table.items()))]
    print("\n" + "\n".join(lines))
    Path(os.environ.get("GANTT_PARITY_TABLE", "/dev/null")).write_text("\n".join(lines) + "\n")
    assert disagreements == []


def test_the_cases_decide_both_ways(outcome: dict[str, Any]) -> None:
    """A suite where every pool passes proves nothing: each filter must split the pools in some cases, and the
    weighers must tell candidates apart."""
    split = dict.fromkeys(FILTER_NAMES, 0)
    spread = dict.fromkeys([*WEIGHER_NAMES, "all"], 0)
    for cinder in outcome["cinder"]:
        for name, verdict in cinder["filters"].items():
            values = list(verdict.values())
            split[name] += 0 < sum(v is True for v in values) < len(values)
        for name, weights in cinder["weights"].items():
            spread[name] += "error" not in weights and len(set(weights.values())) > 1
    assert all(count > 0 for count in split.values()), split
    assert all(count > 0 for count in spread.values()), spread


def test_weights_are_finite(outcome: dict[str, Any]) -> None:
    for ours in outcome["ours"]:
        for weights in ours["weights"].values():
            assert all(math.isfinite(w) for w in weights.values())
