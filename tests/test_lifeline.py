"""A child started through ``lifeline.command`` does not outlive a parent killed with SIGKILL, and is the
program itself (the launcher execs in place), started without running Python code between fork and exec."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from gantt.service import lifeline

PARENT = """
import subprocess, sys, threading, time
from gantt.service import lifeline
# Threads busy in the parent while it forks: what made a preexec_fn unsafe.
for _ in range(4):
    threading.Thread(target=lambda: [time.sleep(0) for _ in iter(int, 1)], daemon=True).start()
child = subprocess.Popen(lifeline.command([sys.executable, "-c", "import time; time.sleep(60)"]))
print(child.pid, flush=True)
time.sleep(60)
"""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux's")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead too (reaped by init later)
        return stat.read().split(")")[-1].split()[0] != "Z"


def test_grandchild_dies_with_its_parent() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    deadline = time.monotonic() + 10
    while "time.sleep(60)" not in _cmdline(child) and time.monotonic() < deadline:
        time.sleep(0.02)  # the launcher has not exec'd yet
    assert _alive(child) and "time.sleep(60)" in _cmdline(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_the_launched_program_keeps_the_pid_and_its_exit_status() -> None:
    done = subprocess.run(lifeline.command([sys.executable, "-c", "import os, sys; print(os.getpid()); "
                                            "sys.exit(7)"]), capture_output=True, text=True, timeout=30)
    assert done.returncode == 7 and done.stdout.strip().isdigit()


def test_a_child_whose_parent_is_already_gone_does_not_start() -> None:
    """The launcher compares its parent with the pid it was given: a mismatch means the parent died first."""
    argv = lifeline.command([sys.executable, "-c", "print('started')"])
    wrong = argv.index(str(os.getpid()))
    argv[wrong] = str(os.getpid() + 1_000_000)  # not our pid: as if the parent had died and we were adopted
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 1 and "started" not in done.stdout
