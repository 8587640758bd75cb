"""What one claim txn costs a 3-member etcd cluster, by shape: the etcd side of bench/cluster.py, without Gantt.

Starts a throwaway cluster on loopback (tests/etcd/cluster.py) and, from one thread, sends txns shaped as the
etcd store's group commit sends them: ``--claims`` nested txns per txn, each comparing its allocation key's mod
revision and putting ``--keys`` keys (an allocation of ``--value`` bytes, its index entry, its node's usage key),
with or without failure reads, plus ``last-write``; ``--watchers`` watch streams follow the prefix. Prints JSON:
the members' CPU (``/proc/<pid>/stat``) per txn and per claim, kernel time apart, with the CPU model and load.

``--shapes`` runs several shapes in one cluster, alternated ``--rounds`` times, e.g.
``bench/etcd_txn.py --shapes '[{"claims": 8}, {"claims": 16}]' --rounds 2``.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / "src")]

import grpc  # noqa: E402
from aetcd.rpc import rpc_pb2 as pb  # noqa: E402
from aetcd.rpc import rpc_pb2_grpc as rpc  # noqa: E402

from gantt.bench.scripts import cpu_model  # noqa: E402
from gantt.store import etcd_wire as wire  # noqa: E402

DEFAULTS = {"claims": 8, "keys": 3, "value": 250, "failure": True, "watchers": 1, "member": 0, "seconds": 6.0}


def cpu(pid: int) -> tuple[float, float]:
    """(user + system, system) CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, int(fields[12]) / tick


def _watch(endpoint: str, prefix: bytes, stop: threading.Event) -> None:
    requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
    requests.put(pb.WatchRequest(create_request=pb.WatchCreateRequest(key=prefix, range_end=prefix[:-1] + b"0")))

    def drain() -> Iterator[Any]:
        while not stop.is_set():
            try:
                yield requests.get(timeout=0.2)
            except queue.Empty:
                continue

    with grpc.insecure_channel(endpoint) as channel:
        stream = rpc.WatchStub(channel).Watch(drain())
        try:
            for _ in stream:
                if stop.is_set():
                    stream.cancel()
        except grpc.RpcError:
            pass


def run(cluster: Any, shape: dict[str, Any]) -> dict[str, Any]:
    s = {**DEFAULTS, **shape}
    prefix = f"/cost/{uuid.uuid4().hex[:8]}/".encode()
    stop = threading.Event()
    watchers = [threading.Thread(target=_watch, args=(cluster.members[i % 3].endpoint, prefix, stop), daemon=True)
                for i in range(s["watchers"])]
    for t in watchers:
        t.start()
    time.sleep(0.5)
    channel = grpc.insecure_channel(cluster.members[s["member"]].endpoint)
    txn = channel.unary_unary("/etcdserverpb.KV/Txn", request_serializer=None,
                              response_deserializer=pb.TxnResponse.FromString)
    pids = [m.proc.pid for m in cluster.members]
    before = [cpu(p) for p in pids]
    value = b"x" * s["value"]
    sent = 0
    started = time.monotonic()
    while time.monotonic() - started < s["seconds"]:
        nested = []
        for g in range(s["claims"]):
            consumer = uuid.uuid4().hex.encode()
            node = f"node{(sent * s['claims'] + g) % 200:06d}".encode()
            keys = [prefix + b"allocations/" + consumer, prefix + b"placed/" + node + b"/" + node + b"/" + consumer,
                    prefix + b"usage/" + node + b"/" + node][:s["keys"]]
            failure = [wire.read(keys[0]), wire.read(keys[-1], keys_only=True)] if s["failure"] else []
            nested.append(wire.nested(wire.txn([wire.compare_mod(keys[0], 0)],
                                               [wire.put(k, value if i == 0 else b"") for i, k in enumerate(keys)],
                                               failure)))
        txn(wire.txn([], [*nested, wire.put(prefix + b"last-write")]), timeout=10)
        sent += 1
    wall = time.monotonic() - started
    after = [cpu(p) for p in pids]
    stop.set()
    channel.close()
    used = [a[0] - b[0] for a, b in zip(after, before, strict=True)]
    system = sum(a[1] - b[1] for a, b in zip(after, before, strict=True))
    claims = sent * s["claims"]
    return {**s, "txns_per_s": round(sent / wall), "claims_per_s": round(claims / wall),
            "ms_per_txn": round(sum(used) * 1000 / sent, 3), "kernel_ms_per_txn": round(system * 1000 / sent, 3),
            "ms_per_claim": round(sum(used) * 1000 / claims, 3),
            "members_ms_per_claim": [round(u * 1000 / claims, 3) for u in used], "load": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/etcd_txn.py", description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default='[{"claims": 1}, {"claims": 8}, {"claims": 16}]',
                        help=f"JSON list of shapes; each key defaults to {json.dumps(DEFAULTS)}")
    parser.add_argument("--rounds", type=int, default=1, help="run the shapes this many times, alternated")
    args = parser.parse_args(argv)
    shapes = json.loads(args.shapes)
    unknown = {k for shape in shapes for k in shape} - set(DEFAULTS)
    if unknown:
        parser.error(f"unknown shape keys: {sorted(unknown)} (known: {sorted(DEFAULTS)})")
    from tests.etcd.cluster import LocalCluster

    out: dict[str, Any] = {"benchmark": "etcd_txn", "cpu": cpu_model(), "cpus": os.cpu_count(), "runs": []}
    with LocalCluster(Path(tempfile.mkdtemp(prefix="gantt-etcd-txn-"))) as cluster:
        out["leader"] = cluster.leader()
        for _ in range(args.rounds):
            for shape in shapes:
                out["runs"].append(run(cluster, shape))
                print(json.dumps(out["runs"][-1]), file=sys.stderr)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
