"""A RabbitMQ broker of its own for a test: Debian's ``rabbitmq-server`` (the package ``scripts/setup --test``
installs as root) on loopback, on free ports (AMQP, Erlang distribution, and an epmd of its own), with its database,
logs, configuration and Erlang cookie in a temporary directory. Stopped (and its epmd) when the test is done.

Missing broker: skipped with the reason, except under ``CI=true`` where that fails (CI must test the real broker).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.etcd.cluster import free_ports

# Debian's /usr/sbin/rabbitmq-server wraps this script to run it as the rabbitmq user with the system's directories;
# the test runs the script itself, as whoever runs the tests, with its own.
SERVER_SCRIPT = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
CTL_SCRIPT = SERVER_SCRIPT.with_name("rabbitmqctl")
EPMD = Path("/usr/bin/epmd")


def server() -> Path | None:
    if SERVER_SCRIPT.exists():
        return SERVER_SCRIPT
    found = shutil.which("rabbitmq-server")
    return Path(found) if found else None


def require() -> Path:
    found = server()
    if found is not None:
        return found
    # only here: bench/nova_rpc.py starts a broker in Nova's venv, which has no pytest
    import pytest

    message = ("rabbitmq-server not found: install Debian's rabbitmq-server package "
               "(scripts/setup --test does it as root)")
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message + " - CI must test against the real broker", pytrace=False)
    pytest.skip(message)


class Broker:
    """One broker in ``tmp``, on ports fixed at creation: ``stop()`` and ``start()`` again is a broker restart (same
    node, same database, same URL)."""

    def __init__(self, tmp: Path) -> None:
        self.script = require()
        self.tmp = tmp
        self.amqp, self.dist, self.epmd = free_ports(3)
        self.url = f"rabbit://guest:guest@127.0.0.1:{self.amqp}/"
        self.proc: subprocess.Popen[bytes] | None = None
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "rabbitmq.conf").write_text(f"listeners.tcp.default = 127.0.0.1:{self.amqp}\n")
        (tmp / "enabled_plugins").write_text("[].\n")
        self.env = {**os.environ, "HOME": str(tmp),  # the Erlang cookie goes there
                    "RABBITMQ_MNESIA_BASE": str(tmp / "mnesia"), "RABBITMQ_LOG_BASE": str(tmp / "log"),
                    "RABBITMQ_LOGS": "-", "RABBITMQ_NODENAME": f"gantt{self.amqp}@localhost",
                    "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1", "RABBITMQ_NODE_PORT": str(self.amqp),
                    "RABBITMQ_DIST_PORT": str(self.dist), "RABBITMQ_CONFIG_FILE": str(tmp / "rabbitmq"),
                    "RABBITMQ_ENABLED_PLUGINS_FILE": str(tmp / "enabled_plugins"),
                    "RABBITMQ_ADVANCED_CONFIG_FILE": str(tmp / "advanced.config"),
                    "RABBITMQ_PID_FILE": str(tmp / "pid"),
                    "ERL_EPMD_ADDRESS": "127.0.0.1", "ERL_EPMD_PORT": str(self.epmd)}

    def start(self, timeout: float = 120.0) -> None:
        log = self.tmp / "server.log"
        with log.open("ab") as out:
            out.write(b"\n--- start ---\n")
            mark = out.tell()
            # a session of its own: the script, the Erlang VM and its helpers are stopped together
            self.proc = subprocess.Popen([str(self.script)], env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                         cwd=self.tmp, start_new_session=True)
        _wait_ready(self.proc, self.amqp, log, timeout, mark)

    def consumers(self, queue: str) -> int:
        """How many consumers ``queue`` has now (0 when it does not exist yet), as rabbitmqctl lists them."""
        done = subprocess.run([str(CTL_SCRIPT), "-q", "list_queues", "name", "consumers"], env=self.env,
                              capture_output=True, text=True, timeout=60, cwd=self.tmp)
        for line in done.stdout.splitlines():
            name, _, count = line.partition("\t")
            if name == queue and count.strip().isdigit():
                return int(count)
        return 0

    def wait_for_consumer(self, queue: str, timeout: float = 120.0) -> None:
        """Until ``queue`` has a consumer again: after a restart, a message sent before its consumer came back and
        declared it is dropped by the broker (Nova's queues are not durable), for Nova's own scheduler too."""
        deadline = time.monotonic() + timeout
        while self.consumers(queue) == 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no consumer on {queue!r} {timeout:g} s after the broker started")
            time.sleep(0.5)

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None

    def close(self) -> None:
        self.stop()
        # epmd daemonizes out of the session: ask it to go, once the node is gone
        if EPMD.exists():
            subprocess.run([str(EPMD), "-port", str(self.epmd), "-kill"], capture_output=True, timeout=10,
                           env={**os.environ, "ERL_EPMD_ADDRESS": "127.0.0.1"})


@contextmanager
def broker(tmp: Path) -> Iterator[Broker]:
    """A started broker in ``tmp`` (its ``url``: ``rabbit://guest:guest@127.0.0.1:PORT/``), closed afterwards."""
    started = Broker(tmp)
    try:
        started.start()
        yield started
    finally:
        started.close()


def _wait_ready(proc: subprocess.Popen[bytes], port: int, log: Path, timeout: float, mark: int) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"rabbitmq-server exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        if b"Server startup complete" in log.read_bytes()[mark:]:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                pass
        time.sleep(0.3)
    raise RuntimeError(f"rabbitmq-server did not start within {timeout:g} s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass
