"""Child processes that must not outlive their parent (test servers, demo servers, serve workers).

A parent killed with SIGKILL runs no cleanup: without this, a crashed test run or supervisor leaves etcd
members or `gantt serve` workers running on the machine. Linux's parent-death signal covers that case.

Never as a ``preexec_fn``: that runs Python code in the child between fork and exec, and a parent with other
threads (grpc's, a replica's feed) may have held a lock at the fork that the child then waits for forever —
while holding a copy of every descriptor the parent had open, pipes included. Instead the child starts as a tiny
launcher (:func:`command`) that asks for the signal and then execs the real program: a fresh, single-threaded
process, so nothing can be held.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1

# Runs in a fresh interpreter (-I -S: no site, no environment), so it imports nothing of Gantt's.
_LAUNCHER = """\
import ctypes, os, sys
parent, sig = int(sys.argv[1]), int(sys.argv[2])
ctypes.CDLL(None, use_errno=True).prctl(1, sig, 0, 0, 0)
if os.getppid() != parent:  # the parent died before the request took effect
    os._exit(1)
os.execvp(sys.argv[3], sys.argv[3:])
"""


def command(argv: list[str], sig: int = signal.SIGKILL) -> list[str]:
    """``argv``, run so that the kernel sends ``sig`` to it when the thread that starts it dies (Linux).

    Elsewhere the command is returned unchanged. The launcher execs ``argv`` in place: the pid Popen reports is
    the program's own.
    """
    if not sys.platform.startswith("linux"):
        return list(argv)
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(os.getpid()), str(int(sig)), *argv]


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux; elsewhere a no-op).

    For a process to call on itself at start (a spawned worker), not as a ``preexec_fn`` (see the module
    docstring); to start a child that way, use :func:`command`.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        pass
