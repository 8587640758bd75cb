"""A Gantt instance in its own process for the multi-process and kill -9 tests: a Replica on an etcd store that
places requests in a loop and prints one line per placed request (``placed <request_id> <n>``).

``python -m tests.etcd.worker URL --seed N --instances K [--threads T] [--max-requests M]``
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid

from gantt.config import Config
from gantt.model import NoValidHost, StoreUnavailable
from gantt.replication.replica import Replica
from gantt.store.etcd import EtcdStore


def config(seed: int) -> Config:
    return Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter"], "host_subset_size": 3},
                             "gantt": {"seed": seed}})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--instances", type=int, default=1, help="num_instances of each request")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-requests", type=int, default=10_000)
    args = ap.parse_args(argv)
    store = EtcdStore(args.url)
    replica = Replica(store, config(args.seed)).start()
    out_lock = threading.Lock()
    print("ready", flush=True)
    remaining = [args.max_requests]

    def run() -> None:
        while True:
            with out_lock:
                if remaining[0] <= 0:
                    return
                remaining[0] -= 1
            request_id = str(uuid.uuid4())
            spec = {"flavor": {"name": "t", "vcpus": 1, "memory_mb": 64, "root_gb": 1},
                    "num_instances": args.instances, "request_id": request_id, "project_id": "p",
                    "instance_uuids": [f"{request_id}-{i}" for i in range(args.instances)]}
            answer = None
            for _ in range(100):
                try:
                    answer = replica.select_destinations(spec)
                    break
                except NoValidHost as exc:
                    if exc.explanation is not None and exc.explanation.reason == "contention":
                        continue  # lost every race this time: the cloud is not full yet
                    return
                except StoreUnavailable:  # overloaded machine: retry as a client would (same UUIDs)
                    time.sleep(0.1)
            if answer is None:
                continue
            with out_lock:
                print(f"placed {request_id} {len(answer)}", flush=True)

    threads = [threading.Thread(target=run) for _ in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = replica.scheduler.engine.stats
    print(f"done commit_conflicts={stats.commit_conflicts} claim_conflicts={store.stats.claim_conflicts}",
          flush=True)
    replica.stop()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
