"""The reference Placement: openstack-placement==16.0.0 from PyPI in its own virtualenv (built once per machine,
kept in the user's cache, like tests/parity/reference.py for Nova), served on loopback with a fresh SQLite
database, for tests that compare Gantt's Placement face with the real thing."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from gantt.service import lifeline
from tests.venvs import cached_venv

PLACEMENT = "openstack-placement==16.0.0"
# gunicorn: how Placement is deployed (bench/placement.py); gabbi and oslotest: its functional suite and
# fixtures, run by tests/placement/gabbi_run.py.
PACKAGES = [PLACEMENT, "gunicorn==23.0.0", "gabbi==4.2.3", "oslotest==6.1.1"]
SERVE = Path(__file__).with_name("placement_serve.py")


def python() -> Path:
    """The reference interpreter, building its venv first if needed (about a minute, once per machine)."""
    return cached_venv(f"reference-{PLACEMENT.replace('==', '-')}", PACKAGES) / "bin" / "python"


@functools.lru_cache(maxsize=1)
def open_policy_file() -> str:
    """The rules Placement's OpenPolicyFixture sets, as a policy file (YAML): every rule Placement registers,
    but its base rule ``admin_api``, allows anyone (``@``)."""
    return subprocess.run([str(python()), "-c", "from placement import policies\n"
                           "for r in policies.list_rules():\n"
                           "    if r.name != 'admin_api': print(repr(r.name) + ': \"@\"')"],
                          capture_output=True, text=True, check=True,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}).stdout


class RealPlacement:
    """Placement 16.0.0 on a free loopback port, noauth2 (any token), its own SQLite file. ``gunicorn``: serve it
    as deployments do (``workers`` processes, ``threads`` each) instead of the tests' threaded wsgiref server."""

    def __init__(self, *, gunicorn: bool = False, workers: int = 1, threads: int = 4,
                 policy: str = "default", cors: dict[str, Any] | None = None) -> None:
        """``policy``: ``default`` (Placement's new defaults), ``legacy`` (the deprecated rules: admin for all,
        as its functional tests run), ``open`` (every rule allows everyone, as its OpenPolicyFixture). ``cors``:
        its ``[cors]`` options (lists as lists)."""
        self.gunicorn, self.workers, self.threads = gunicorn, workers, threads
        self._tmp = tempfile.TemporaryDirectory(prefix="placement-")
        self.dir = Path(self._tmp.name)
        conf = ("[api]\nauth_strategy = noauth2\n"
                f"[placement_database]\nconnection = sqlite:///{self.dir}/placement.sqlite\nsync_on_startup = True\n"
                f"[oslo_policy]\nenforce_new_defaults = {policy == 'default'}\n")
        if policy == "open":
            (self.dir / "policy.yaml").write_text(open_policy_file())
            conf += f"policy_file = {self.dir}/policy.yaml\n"
        if cors:
            conf += "[cors]\n" + "".join(f"{k} = {','.join(v) if isinstance(v, list) else v}\n"
                                         for k, v in cors.items())
        (self.dir / "placement.conf").write_text(conf)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> RealPlacement:
        exe = python()
        argv = [str(exe), str(SERVE), str(self.dir), str(self.sock.fileno())]
        if self.gunicorn:
            argv = [str(exe.with_name("gunicorn")), "--bind", f"fd://{self.sock.fileno()}", "--workers",
                    str(self.workers), "--threads", str(self.threads), "--log-level", "warning",
                    "--env", f"OS_PLACEMENT_CONFIG_DIR={self.dir}", "placement.wsgi.api:application"]
        with open(self.dir / "server.log", "ab") as log:
            self.proc = subprocess.Popen(lifeline.command(argv), stdout=log, stderr=subprocess.STDOUT,
                                         pass_fds=(self.sock.fileno(),), start_new_session=True)
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.url, timeout=5.0) as http:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"placement exited with {self.proc.returncode}:\n{self.log_tail()}")
                try:
                    if http.get("/").status_code == 200:
                        return self
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"placement not up after {timeout}s:\n{self.log_tail()}")
                time.sleep(0.1)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join((self.dir / "server.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def close(self) -> None:
        if self.proc is not None:
            # The whole session: under gunicorn, its workers would outlive a master killed alone.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.sock.close()
        self._tmp.cleanup()

    def __enter__(self) -> RealPlacement:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    print(python())
