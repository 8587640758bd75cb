"""The real OpenStack client: python-openstackclient with the osc-placement plugin from PyPI, in its own
virtualenv (built once per machine, kept in the user's cache, like tests/parity/reference.py for Nova), and
``Osc``, which runs its ``openstack`` command against a Placement endpoint without Keystone.

Without Keystone the client takes the endpoint and the token as given: ``--os-auth-type admin_token --os-token T
--os-endpoint URL/placement`` (keystoneauth's token-endpoint plugin sends ``X-Auth-Token: T`` to that URL for every
service). ``T`` is Gantt's token when ``gantt serve`` has one; without one, ``admin`` (read as Placement's noauth2
reads it: an admin)."""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# The client's own libraries are pinned too: a new keystoneauth or cliff must not change what the tests see
# between two builds of the same venv. These releases support Python 3.11 and Placement microversions to 1.39.
PACKAGES = ["python-openstackclient==10.5.0", "osc-placement==4.9.1", "osc-lib==4.7.0", "keystoneauth1==5.18.1",
            "cliff==4.17.0", "openstacksdk==4.22.0"]


def venv_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    name = "-".join(p.replace("==", "-") for p in PACKAGES[:2])
    return cache / "gantt" / f"client-{name}-py{sys.version_info[0]}{sys.version_info[1]}"


def openstack() -> Path:
    """The ``openstack`` command, building its venv first if needed (about a minute, once per machine)."""
    path = venv_dir()
    exe = path / "bin" / "openstack"
    stamp = path / ".installed"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # xdist workers and scripts may ask at once: one builds
        if not stamp.exists() or stamp.read_text().split() != PACKAGES:
            base = os.environ.get("GANTT_REFERENCE_PYTHON", "python3")
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # Gantt's own tree stays out
            python = str(path / "bin" / "python")
            for argv in ([base, "-m", "venv", "--clear", str(path)],
                         [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *PACKAGES]):
                done = subprocess.run(argv, env=env, capture_output=True, text=True)
                if done.returncode:
                    raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
            stamp.write_text("\n".join(PACKAGES) + "\n")
    return exe


class OscError(AssertionError):
    """An ``openstack`` command that exited non-zero where success was expected."""


class Osc:
    """``openstack`` against ``endpoint`` (Placement's root URL) with ``token``, at microversion ``version``
    (``None``: the client's default, negotiated with the server)."""

    def __init__(self, endpoint: str, token: str = "admin", version: str | None = None) -> None:
        self.endpoint, self.token, self.version = endpoint, token, version
        self.exe = openstack()
        # No OS_* variable or clouds.yaml of the caller's may add a cloud, a region or another auth to the call.
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OS_") and k != "PYTHONPATH"}
        self.env["OS_CLIENT_CONFIG_FILE"] = os.devnull
        self.env["PYTHONWARNINGS"] = "ignore"  # the client's libraries' warnings are not its answer (see script)

    def at(self, version: str | None) -> Osc:
        """The same client at another microversion."""
        return Osc(self.endpoint, self.token, version)

    def argv(self, *args: str) -> list[str]:
        argv = [str(self.exe), "--os-auth-type", "admin_token", "--os-token", self.token,
                "--os-endpoint", self.endpoint]
        if self.version is not None:
            argv += ["--os-placement-api-version", self.version]
        return argv + list(args)

    def call(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(*args), env=self.env, capture_output=True, text=True, timeout=60)

    def __call__(self, *args: str) -> Any:
        """Run a command that must succeed; its ``-f json`` output parsed (``None`` when it prints nothing)."""
        done = self.call(*args)
        if done.returncode:
            raise OscError(f"openstack {' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}")
        return json.loads(done.stdout) if done.stdout.strip() else None

    def script(self, *commands: Sequence[str]) -> list[Any]:
        """Run several commands that must succeed through one ``openstack`` process (its interactive shell, fed on
        stdin), which pays the client's start-up (about a second) once. One entry per command: its ``-f json``
        output parsed, or ``None`` for a command without ``-f`` (those print nothing)."""
        # The shell would run its own argv words as commands: the options go in the environment instead.
        env = {**self.env, "OS_AUTH_TYPE": "admin_token", "OS_TOKEN": self.token, "OS_ENDPOINT": self.endpoint}
        if self.version is not None:
            env["OS_PLACEMENT_API_VERSION"] = self.version
        lines = "".join(shlex.join(command) + "\n" for command in commands)
        done = subprocess.run([str(self.exe)], input=lines, env=env, capture_output=True, text=True, timeout=120)
        # The shell exits 1 at the end of its input whatever happened: an error shows on stderr only.
        if done.stderr.strip():
            raise OscError(f"openstack shell, given:\n{lines}said:\n{done.stderr[-2000:]}")
        decoder, text, at, outputs = json.JSONDecoder(), done.stdout, 0, []
        for command in commands:
            if "-f" not in command:
                outputs.append(None)
                continue
            while text[at:at + 1].isspace():
                at += 1
            value, at = decoder.raw_decode(text, at)
            outputs.append(value)
        if text[at:].strip():
            raise OscError(f"openstack shell printed more than its commands' output:\n{text[at:][:2000]}")
        return outputs

    def fails(self, *args: str) -> str:
        """Run a command that must fail; what it says on stderr (its last line: the error, not warnings)."""
        done = self.call(*args)
        if done.returncode == 0:
            raise OscError(f"openstack {' '.join(args)} succeeded, printing:\n{done.stdout[-2000:]}")
        return done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""


if __name__ == "__main__":
    print(openstack())
