"""Child processes that must not outlive their parent (test servers, demo servers, serve workers).

A parent killed with SIGKILL runs no cleanup: without this, a crashed test run or supervisor leaves etcd
members or `gantt serve` workers running on the machine. Linux's parent-death signal covers that case.
"""

from __future__ import annotations

import ctypes
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux; elsewhere a no-op).

    Safe as a ``preexec_fn``: it only makes one system call.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        pass
