"""A throwaway etcd cluster on loopback: N members on free ports, data in a temporary directory.

Used by the tests (tests/etcd/conftest.py, tests/placement/conftest.py) and by bench/cluster.py. Plain Python (pytest
only inside ``require_etcd``): members are real ``etcd`` processes (the etcd-server package) that can be stopped and
started again to simulate faults.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from gantt.service import lifeline

ETCD = shutil.which("etcd") or ("/usr/bin/etcd" if os.path.exists("/usr/bin/etcd") else None)


def require_etcd() -> None:
    """For a test about to start members: skipped with the reason when the binary is missing, except under
    ``CI=true`` where that fails (CI must test etcd)."""
    import pytest

    if ETCD is not None:
        return
    message = "etcd binary not found: install the etcd-server package (scripts/setup does it as root)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message + " - CI must run the etcd tests", pytrace=False)
    pytest.skip(message)


def free_ports(n: int) -> list[int]:
    """Ports the kernel just handed out; all sockets held open together so the n ports are distinct."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class Member:
    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class LocalCluster:
    """``with LocalCluster(base_dir) as c: open_store(c.url("/prefix"))``; ``c.stop(i)`` / ``c.start(i)``."""

    base_dir: Path
    size: int = 3
    # etcd's defaults (100 ms / 1 s): shorter timeouts make elections flap on a busy 2-core test machine.
    heartbeat_ms: int = 100
    election_ms: int = 1000
    extra_args: list[str] = field(default_factory=list)
    members: list[Member] = field(default_factory=list)

    def __post_init__(self) -> None:
        if ETCD is None:
            raise FileNotFoundError("etcd binary not found: install the etcd-server package (scripts/setup)")
        self.base_dir = Path(self.base_dir)
        self.token = f"gantt-test-{uuid.uuid4().hex[:12]}"

    # ------------------------------------------------------------------------------------------ lifecycle

    def __enter__(self) -> LocalCluster:
        self.start_all()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start_all(self, attempts: int = 3) -> None:
        for attempt in range(attempts):
            ports = free_ports(2 * self.size)
            self.members = [Member(f"m{i}", ports[2 * i], ports[2 * i + 1],
                                   self.base_dir / f"{self.token}-a{attempt}-m{i}") for i in range(self.size)]
            for i in range(self.size):
                self._spawn(i, new=True)
            try:
                self.wait_healthy(timeout=20)
                return
            except TimeoutError:
                # Most likely a port taken between free_ports() and etcd's bind (another xdist worker).
                self.close()
        raise RuntimeError(f"etcd cluster did not start; logs under {self.base_dir}")

    def close(self) -> None:
        for i in range(len(self.members)):
            self.stop(i, sig=signal.SIGKILL)

    def _spawn(self, i: int, *, new: bool) -> None:
        m = self.members[i]
        m.data_dir.mkdir(parents=True, exist_ok=True)
        initial = ",".join(f"{x.name}=http://127.0.0.1:{x.peer_port}" for x in self.members)
        args = [
            ETCD or "etcd",
            "--name", m.name,
            "--data-dir", str(m.data_dir / "data"),
            "--listen-client-urls", f"http://127.0.0.1:{m.client_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{m.client_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{m.peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{m.peer_port}",
            "--initial-cluster", initial,
            "--initial-cluster-token", self.token,
            "--initial-cluster-state", "new" if new else "existing",
            "--heartbeat-interval", str(self.heartbeat_ms),
            "--election-timeout", str(self.election_ms),
            # A multi-instance request is one txn: up to 1000 allocations + their nodes' usage keys.
            "--max-txn-ops", "10000",
            "--max-request-bytes", str(8 * 1024 * 1024),
            "--logger", "zap",
            "--log-outputs", str(m.data_dir / "etcd.log"),
            "--log-level", "warn",
            *self.extra_args,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD")}
        m.proc = subprocess.Popen(lifeline.command(args), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=open(m.data_dir / "stderr.log", "ab"),  # noqa: SIM115
                                  env=env, start_new_session=True)

    def stop(self, i: int, sig: int = signal.SIGKILL) -> None:
        m = self.members[i]
        if m.proc is None:
            return
        if m.proc.poll() is None:
            m.proc.send_signal(sig)
            try:
                m.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                m.proc.kill()
                m.proc.wait()
        m.proc = None

    def start(self, i: int) -> None:
        """Start a stopped member again from its data directory (it rejoins the cluster)."""
        if self.members[i].running:
            return
        self._spawn(i, new=False)

    # ---------------------------------------------------------------------------------------------- views

    @property
    def endpoints(self) -> list[str]:
        return [m.endpoint for m in self.members]

    def url(self, prefix: str = "/gantt", members: list[int] | None = None) -> str:
        chosen = [self.members[i] for i in (members if members is not None else range(len(self.members)))]
        return "etcd://" + ",".join(m.endpoint for m in chosen) + prefix

    def leader(self, timeout: float = 10) -> int:
        """Index of the current leader (waits for one)."""
        from aetcd.rpc import rpc_pb2, rpc_pb2_grpc

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, m in enumerate(self.members):
                if not m.running:
                    continue
                try:
                    with grpc.insecure_channel(m.endpoint) as ch:
                        st = rpc_pb2_grpc.MaintenanceStub(ch).Status(rpc_pb2.StatusRequest(), timeout=1)
                    if st.leader and st.leader == st.header.member_id:
                        return i
                except grpc.RpcError:
                    continue
            time.sleep(0.05)
        raise TimeoutError("no etcd leader")

    def wait_healthy(self, timeout: float = 15, members: list[int] | None = None) -> None:
        """Until every running member (or those named) answers a linearizable read (it has a leader)."""
        from aetcd.rpc import rpc_pb2, rpc_pb2_grpc

        deadline = time.monotonic() + timeout
        indices = members if members is not None else [i for i, m in enumerate(self.members) if m.running]
        pending = set(indices)
        while pending:
            for i in list(pending):
                try:
                    with grpc.insecure_channel(self.members[i].endpoint) as ch:
                        rpc_pb2_grpc.KVStub(ch).Range(rpc_pb2.RangeRequest(key=b"/health"), timeout=1,
                                                      metadata=(("hasleader", "true"),))
                    pending.discard(i)
                except grpc.RpcError:
                    pass
            if pending:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"etcd members {sorted(pending)} not healthy")
                time.sleep(0.1)
