"""Nova's PCPU -> VCPU fallback query against Nova 34's own code, on generated flavors x images x the option.

For a guest whose ``hw:cpu_policy`` (or ``hw_cpu_policy``) is ``dedicated``, Nova's scheduler asks Placement twice
(``nova/scheduler/manager.py``): once with the CPU policies translated (PCPU, the thread policy's
HW_CPU_HYPERTHREADING trait, one more PCPU for isolated emulator threads), once without (VCPU), unless
``[workarounds] disable_fallback_pcpu_query``. Per case, Gantt's ``RequestContext`` must ask the same queries: its
own resources and traits, and its ``fallback`` (``gantt.compute.request.PcpuFallback``), or refuse where Nova's API
refuses. The cases mix every policy, thread and emulator policy, explicit ``resources:PCPU`` / ``VCPU``, the
hyperthreading trait, NUMA nodes and the image's policies. ``GANTT_PCPU_FALLBACK_PARITY_CASES`` (default 1500).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

from gantt.compute.request import RequestContext
from gantt.config import Config
from gantt.model import InvalidRequest, RequestSpec, decode
from tests.parity import reference
from tests.venvs import run_json

CASES = int(os.environ.get("GANTT_PCPU_FALLBACK_PARITY_CASES", "1500"))
DRIVER = Path(__file__).with_name("pcpu_fallback_driver.py")

EXTRA_SPECS: dict[str, list[str]] = {
    "hw:cpu_policy": ["dedicated", "dedicated", "dedicated", "shared", "mixed"],
    "hw:cpu_thread_policy": ["prefer", "isolate", "require"],
    "hw:emulator_threads_policy": ["share", "isolate"],
    "hw:cpu_dedicated_mask": ["^0"],
    "hw:numa_nodes": ["1", "2"],
    "resources:PCPU": ["VCPUS", "1"],
    "resources:VCPU": ["VCPUS"],
    "resources:DISK_GB": ["5"],
    "trait:HW_CPU_HYPERTHREADING": ["required", "forbidden"],
    "trait:CUSTOM_GOLD": ["required", "forbidden"],
}
IMAGE_PROPS: dict[str, list[str]] = {
    "hw_cpu_policy": ["dedicated", "shared"],
    "hw_cpu_thread_policy": ["isolate", "require", "prefer"],
    "trait:CUSTOM_IMG": ["required"],
}


def _cases(n: int) -> list[dict[str, Any]]:
    rng = random.Random("pcpu-fallback")
    out = []
    for _ in range(n):
        vcpus = rng.choice([1, 2, 4])
        keys = rng.sample(sorted(EXTRA_SPECS), rng.randrange(0, 4))
        if rng.random() < 0.6 and "hw:cpu_policy" not in keys:
            keys.append("hw:cpu_policy")
        specs = {k: rng.choice(EXTRA_SPECS[k]).replace("VCPUS", str(vcpus)) for k in keys}
        props = {k: rng.choice(IMAGE_PROPS[k]) for k in rng.sample(sorted(IMAGE_PROPS), rng.randrange(0, 3))}
        out.append({"vcpus": vcpus, "extra_specs": specs, "properties": props, "disable": rng.random() < 0.25})
    return out


def _gantt(case: dict[str, Any]) -> Any:
    config = Config.from_dict({"workarounds": {"disable_fallback_pcpu_query": case["disable"]}})
    spec = decode({"flavor": {"name": "f1", "vcpus": case["vcpus"], "memory_mb": 1024, "root_gb": 1,
                              "extra_specs": case["extra_specs"]},
                   "image": {"id": "img-1", "name": "img", "disk_format": "qcow2", "properties": case["properties"]},
                   "project_id": "p1", "user_id": "u1"}, RequestSpec)
    try:
        ctx = RequestContext.build(spec, config, 0.0)
    except InvalidRequest as exc:
        return {"invalid": exc.message}
    queries = [{"resources": ctx.resources, "required": sorted(ctx.required_traits),
                "forbidden": sorted(ctx.forbidden_traits)}]
    if ctx.fallback is not None:
        queries.append({"resources": ctx.fallback.resources,
                        "required": sorted(ctx.required_traits - ctx.fallback.required),
                        "forbidden": sorted(ctx.forbidden_traits - ctx.fallback.forbidden)})
    return queries


def test_gantt_asks_novas_queries() -> None:
    cases = _cases(CASES)
    nova = run_json(reference.python(), DRIVER, {"cases": cases}, timeout=600)["results"]
    disagreements: list[str] = []
    kinds = {"invalid": 0, "one query": 0, "two queries": 0, "two, thread trait dropped": 0, "disabled": 0}
    for case, theirs in zip(cases, nova, strict=True):
        mine = _gantt(case)
        if isinstance(mine, dict) or isinstance(theirs, dict):
            if not (isinstance(mine, dict) and isinstance(theirs, dict)) and len(disagreements) < 10:
                disagreements.append(f"{case}: gantt {mine} nova {theirs}")
            kinds["invalid"] += 1
            continue
        if mine != theirs and len(disagreements) < 10:
            disagreements.append(f"{case}: gantt {mine} nova {theirs}")
        kinds["two queries" if len(theirs) == 2 else "one query"] += 1
        if len(theirs) == 2 and (theirs[0]["required"], theirs[0]["forbidden"]) != \
                (theirs[1]["required"], theirs[1]["forbidden"]):
            kinds["two, thread trait dropped"] += 1
        pinned = "dedicated" in (case["extra_specs"].get("hw:cpu_policy"), case["properties"].get("hw_cpu_policy"))
        kinds["disabled"] += case["disable"] and pinned and len(theirs) == 1
    assert disagreements == []
    # every kind of answer must be exercised, not only refusals or the one query
    assert all(count >= CASES // 50 for count in kinds.values()), kinds
