"""Issue 10: the first decode of a type from several threads at once crashed a worker (SIGSEGV in msgspec).

Every Struct type is prepared at import (``gantt.model.prepare_types``); these tests hold that in place.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import msgspec

import gantt
from gantt.model import PREPARED

_CHILD = r"""
import sys, threading
sys.setswitchinterval(1e-6)  # switch threads as often as possible: widen any window a first decode leaves
from gantt.model import HostReport, RequestSpec, decode
from gantt.store.base import Change
spec = {"flavor": {"vcpus": 2, "memory_mb": 4096, "root_gb": 20, "extra_specs": {"hw:cpu_policy": "shared"}},
        "image": {"properties": {"hw_architecture": "x86_64"}}, "scheduler_hints": {"group": ["g"]},
        "instance_group": {"uuid": "g", "policy": "anti-affinity"}, "num_instances": 2}
report = {"host": "h", "stats": {"vcpus": 8, "memory_mb": 1024, "local_gb": 10, "cpu_info": {"a": 1},
          "inventories": {"VCPU": {"total": 8}}, "metrics": [{"name": "m", "value": 1.0, "source": "s"}]}}
change = b'{"revision": 1, "kind": "host", "host": {"host": "h", "stats": {"vcpus": 1}}}'
barrier = threading.Barrier(8)
def run():
    barrier.wait()
    decode(spec, RequestSpec)
    decode(report, HostReport)
    decode(change, Change)
threads = [threading.Thread(target=run) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


def test_every_struct_type_is_prepared_at_import() -> None:
    for info in pkgutil.walk_packages(gantt.__path__, "gantt."):
        # gantt.nova runs only where Nova is installed (tests/nova checks its types there)
        if not info.name.endswith("__main__") and not info.name.startswith("gantt.nova"):
            importlib.import_module(info.name)
    pending: list[type] = [msgspec.Struct]
    ours: set[type] = set()
    while pending:
        for sub in pending.pop().__subclasses__():
            pending.append(sub)
            if sub.__module__.startswith("gantt."):
                ours.add(sub)
    missing = sorted(f"{t.__module__}.{t.__qualname__}" for t in ours - PREPARED)
    assert missing == []


def _first_decode_in_threads(_: int) -> tuple[int, str]:
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stderr


def test_fresh_processes_decode_from_many_threads_at_once() -> None:
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(_first_decode_in_threads, range(24)))
    crashed = [err for code, err in results if code != 0]
    assert crashed == [], crashed[0][-3000:]
