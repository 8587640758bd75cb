"""``ServerProcess``: a real ``gantt serve`` in a child process, for the demo, the tests and the benchmarks.

The parent binds the listening socket (loopback, a free port) and hands it to the child (``--fd``). The port is
therefore known before the child starts, nobody else can take it, and it survives the child: ``kill()`` (SIGKILL)
then ``start()`` serves the same URL again, with connections made meanwhile waiting in the socket's backlog.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from gantt.client import SchedulerClient
from gantt.service import lifeline


def toml_text(config: dict[str, Any]) -> str:
    """A config dict as TOML (sections of scalars and lists: JSON literals are TOML literals there)."""
    lines = []
    for section, values in config.items():
        lines.append(f"[{section}]")
        for key, value in values.items():
            lines.append(f"{key} = {json.dumps(value)}")
        lines.append("")
    return "\n".join(lines)


class ServerProcess:
    def __init__(self, store: str, *, config: dict[str, Any] | str | os.PathLike[str] | None = None,
                 token: str | None = None, workers: int = 1, env: dict[str, str] | None = None,
                 workdir: str | os.PathLike[str] | None = None, log_level: str = "warning") -> None:
        self.store = store
        self.token = token
        self.workers = workers
        self.log_level = log_level
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="gantt-server-")
            workdir = self._tmp.name
        self.workdir = Path(workdir)
        self.log_path = self.workdir / "server.log"
        self.config_path: Path | None = None
        if isinstance(config, dict):
            self.config_path = self.workdir / "gantt.toml"
            self.config_path.write_text(toml_text(config))
        elif config is not None:
            self.config_path = Path(config)
        self.env = {**os.environ, **(env or {})}
        self.env.pop("GANTT_TOKEN", None)
        self.env.pop("GANTT_CONFIG", None)
        if token:
            self.env["GANTT_TOKEN"] = token
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.port: int = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "gantt", "serve", "--store", self.store, "--fd", str(self.sock.fileno()),
               "--workers", str(self.workers), "--log-level", self.log_level]
        if self.config_path is not None:
            cmd += ["--config", str(self.config_path)]
        return cmd

    def start(self, timeout: float = 30.0) -> ServerProcess:
        if self.proc is not None and self.proc.poll() is None:
            return self
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(lifeline.command(self.command()), stdout=log, stderr=subprocess.STDOUT,
                                         env=self.env, pass_fds=(self.sock.fileno(),), cwd=self.workdir,
                                         start_new_session=True)
        self.wait_healthy(timeout)
        return self

    def wait_healthy(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.url, timeout=2.0) as http:
            while True:
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(f"gantt serve exited with {self.proc.returncode}:\n{self.log_tail()}")
                try:
                    if http.get("/health").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"gantt serve not healthy after {timeout}s:\n{self.log_tail()}")
                time.sleep(0.05)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _signal(self, sig: int) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):  # the whole session: with --workers the children go too
            os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL, as a crash would: no shutdown code runs."""
        self._signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM and wait (SIGKILL after ``timeout``); returns the exit status."""
        if self.proc is None:
            return None
        self._signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        return self.proc.returncode

    def restart(self, timeout: float = 30.0) -> ServerProcess:
        self.stop()
        return self.start(timeout)

    def close(self) -> None:
        self.stop()
        self.sock.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    def client(self, token: str | None = None) -> SchedulerClient:
        return SchedulerClient(self.url, token=token if token is not None else self.token)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
