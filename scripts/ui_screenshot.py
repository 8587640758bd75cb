"""Make docs/ui.png: the live view (``/ui``) of a real ``gantt serve`` with a small cloud in it, in headless Chromium.

    .venv/bin/python scripts/ui_screenshot.py [--out docs/ui.png] [--seed 7]

Reproducible: the cloud (3 zones, 96 nodes, their load, the requests placed and refused) comes from the seed.
Needs Debian's chromium package and the playwright package (the test extra); downloads nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.service.browser import chromium, missing  # noqa: E402

from gantt.cli.server_process import ServerProcess  # noqa: E402
from gantt.client import SchedulerClient  # noqa: E402
from gantt.model import NoValidHost  # noqa: E402

ZONES = {"az1": 40, "az2": 32, "az3": 24}
CONFIG = {"DEFAULT": {"service_down_time": 86400}, "gantt": {"seed": 7}}


def populate(client: SchedulerClient, rng: random.Random) -> None:
    """Nodes in three zones with uneven load, a few disabled or fenced, then placements and refusals."""
    reports = []
    for zone, count in ZONES.items():
        hot = {"az1": 0.55, "az2": 0.3, "az3": 0.1}[zone]
        for i in range(count):
            vcpus, memory, disk = rng.choice([(32, 131072, 2000), (64, 262144, 4000), (48, 196608, 3000)])
            load = min(0.97, max(0.0, rng.gauss(hot, 0.22)))
            service = {}
            if rng.random() < 0.04:
                service = {"disabled": True, "disabled_reason": "maintenance"}
            elif rng.random() < 0.04:
                service = {"forced_down": True}
            reports.append({"name": f"{zone}-c{i + 1:02d}", "stats": {
                "vcpus": vcpus, "memory_mb": memory, "local_gb": disk, "cpu_allocation_ratio": 4.0,
                "vcpus_used": int(vcpus * 4 * load * rng.uniform(0.7, 1.1)),
                "memory_mb_used": int(memory * load), "local_gb_used": int(disk * load * rng.uniform(0.3, 0.9)),
                "service": service}})
    client.update_resource_stats_many(reports)
    for zone in ZONES:
        hosts = [r["name"] for r in reports if r["name"].startswith(zone)]
        client.update_aggregate({"id": zone, "name": zone, "hosts": hosts, "metadata": {"availability_zone": zone}})
    flavors = [(2, 4096, 40), (4, 8192, 80), (8, 32768, 160), (16, 65536, 320)]
    for _ in range(24):
        vcpus, ram, disk = rng.choice(flavors)
        count = rng.choice([1, 1, 1, 2])
        client.select_destinations({
            "flavor": {"name": f"m1.{vcpus}", "vcpus": vcpus, "memory_mb": ram, "root_gb": disk},
            "project_id": rng.choice(["web", "batch", "ci"]), "request_id": f"req-{_uuid(rng)}",
            "num_instances": count, "instance_uuids": [_uuid(rng) for _ in range(count)],
            "availability_zone": rng.choice([None, "az2", "az3"])})
    refused = [{"flavor": {"name": "x1.huge", "vcpus": 512, "memory_mb": 4096, "root_gb": 10}},
               {"flavor": {"name": "m1.large", "vcpus": 8, "memory_mb": 16384, "root_gb": 80},
                "availability_zone": "az9"},
               {"flavor": {"name": "r1.mem", "vcpus": 4, "memory_mb": 1_000_000, "root_gb": 80}}]
    for n, spec in enumerate(refused):
        with contextlib.suppress(NoValidHost):
            client.select_destinations({**spec, "request_id": f"req-refused-{n + 1}"})


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128)))


def _this_checkout() -> dict[str, str]:
    """The server runs this checkout's code, as this script does (not whichever Gantt the venv installed)."""
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "ui.png"))
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    why = missing()
    if why is not None:
        print(why, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="gantt-ui-") as tmp, \
            ServerProcess(f"sqlite:///{tmp}/gantt.sqlite", config=CONFIG, workdir=tmp, env=_this_checkout()) as server:
        with server.client() as client:
            populate(client, random.Random(args.seed))
        with chromium(width=1360, height=900) as browser:
            page = browser.new_page()
            page.goto(f"{server.url}/ui")
            page.wait_for_selector("body[data-loaded=true]", timeout=15_000)
            page.screenshot(path=args.out, full_page=True)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
